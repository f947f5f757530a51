import { PassThrough } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LabSockets } from './lab-sockets.js';

const U = '11111111-1111-4111-8111-111111111111';
const V = '22222222-2222-4222-8222-222222222222';
const A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
const B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';

describe('LabSockets (decision 0259)', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());
  const sockets = () => new LabSockets(pino({ level: 'silent' }), 1000);
  const open = (s: LabSockets, user: string, ws: string) => {
    const socket = new PassThrough();
    s.add(socket, user, ws);
    return socket;
  };

  it("ends a changed user's websockets at once and again a second later, nobody else's", () => {
    const s = sockets();
    const mine = open(s, U, A);
    const other = open(s, V, A);
    s.userChanged(U.toUpperCase());
    expect(mine.destroyed).toBe(true);
    expect(other.destroyed).toBe(false);
    // Let in (by an ingress that had not heard of the change yet) just after: ended a second later.
    const late = open(s, U, B);
    vi.advanceTimersByTime(999);
    expect(late.destroyed).toBe(false);
    vi.advanceTimersByTime(1);
    expect(late.destroyed).toBe(true);
    // After that, a reconnection stays.
    const again = open(s, U, A);
    vi.advanceTimersByTime(10_000);
    expect(again.destroyed).toBe(false);
    expect(other.destroyed).toBe(false);
  });

  it('changes in a loop end the websockets once a second at most, and the last change is still followed by an ending a second after it', async () => {
    const s = sockets();
    let ends = 0;
    const reopen = () => {
      const socket = open(s, U, A);
      socket.once('close', () => {
        ends++;
        reopen();
      });
    };
    reopen();
    // A workspace admin adds and removes the member 100 times a second for 5 s.
    for (let t = 0; t < 5000; t += 10) {
      s.userChanged(U);
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(ends).toBeGreaterThanOrEqual(5);
    expect(ends).toBeLessThanOrEqual(6);
    const before = ends;
    await vi.advanceTimersByTimeAsync(1000);
    expect(ends).toBe(before + 1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(ends).toBe(before + 1);
  });

  it('ends the websockets of workspaces that are gone, and every one when changes may have been missed', () => {
    const s = sockets();
    const inA = open(s, U, A);
    const inB = open(s, V, B);
    expect(s.workspaces().sort()).toEqual([A, B]);
    s.endWorkspaces([B.toUpperCase()]);
    expect(inB.destroyed).toBe(true);
    expect(inA.destroyed).toBe(false);
    expect(s.workspaces()).toEqual([A]);
    s.endAll();
    expect(inA.destroyed).toBe(true);
    expect(s.workspaces()).toEqual([]);
  });

  it("tells whether a user, a workspace or everyone changed since a stamp (a body's last chunk waits on it)", () => {
    const s = sockets();
    const before = s.stamp();
    expect(s.unchangedSince(U, A, before)).toBe(true);
    s.userChanged(V);
    expect(s.unchangedSince(U, A, before)).toBe(true);
    s.userChanged(U.toUpperCase());
    expect(s.unchangedSince(U, A, before)).toBe(false);
    const later = s.stamp();
    expect(s.unchangedSince(U, A, later)).toBe(true);
    s.endWorkspaces([B]);
    expect(s.unchangedSince(U, A, later)).toBe(true);
    expect(s.unchangedSince(U, B, later)).toBe(false);
    const last = s.stamp();
    s.endAll();
    expect(s.unchangedSince(V, A, last)).toBe(false);
  });
});
