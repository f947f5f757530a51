import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { JupyterAccess } from './jupyter-auth.js';
import { OpenSockets, type SocketAccess } from './open-sockets.js';

const access = (token: string, ws = 'w1'): SocketAccess => ({
  method: 'GET',
  url: `/jupyter/${ws}/api/kernels/k/channels`,
  headers: { authorization: `Bearer ${token}`, upgrade: 'websocket' },
  host: 'platform.example',
});

describe('open JupyterLab websockets asked again', () => {
  it('closes the sockets whose access is refused, keeps the others, and asks once per credential and workspace', async () => {
    const answers = new Map<string, JupyterAccess>([
      ['Bearer ok', { ok: true, userId: 'u1' }],
      ['Bearer gone', { ok: false, status: 401, error: 'unauthorized', message: '' }],
    ]);
    const asked: string[] = [];
    const sockets = new OpenSockets((a) => {
      asked.push(String(a.headers.authorization));
      return Promise.resolve(answers.get(String(a.headers.authorization))!);
    }, 60_000);
    const kept = [new PassThrough(), new PassThrough()];
    const ended = [new PassThrough(), new PassThrough()];
    kept.forEach((s) => sockets.add(s, access('ok')));
    ended.forEach((s) => sockets.add(s, access('gone')));
    expect(sockets.size).toBe(4);
    await sockets.sweep();
    expect(asked.sort()).toEqual(['Bearer gone', 'Bearer ok']);
    expect(ended.every((s) => s.destroyed)).toBe(true);
    expect(kept.some((s) => s.destroyed)).toBe(false);
    await new Promise((r) => setImmediate(r));
    expect(sockets.size).toBe(2);
    sockets.close();
  });

  it('keeps the sockets while the backend cannot answer (502, 504, a throw): an outage does not cut every terminal', async () => {
    let answer: () => Promise<JupyterAccess> = () => Promise.resolve({ ok: false, status: 502, error: 'bad_gateway', message: '' });
    const sockets = new OpenSockets(() => answer(), 60_000);
    const s = new PassThrough();
    sockets.add(s, access('t'));
    await sockets.sweep();
    answer = () => Promise.resolve({ ok: false, status: 504, error: 'gateway_timeout', message: '' });
    await sockets.sweep();
    answer = () => Promise.reject(new Error('socket hang up'));
    await sockets.sweep();
    expect(s.destroyed).toBe(false);
    answer = () => Promise.resolve({ ok: false, status: 404, error: 'not_found', message: '' });
    await sockets.sweep();
    expect(s.destroyed).toBe(true);
    sockets.close();
  });

  it('forgets a socket once it closes by itself', async () => {
    const sockets = new OpenSockets(() => Promise.resolve({ ok: true, userId: 'u' }), 60_000);
    const s = new PassThrough();
    sockets.add(s, access('t'));
    s.destroy();
    await new Promise((r) => setImmediate(r));
    expect(sockets.size).toBe(0);
    sockets.close();
  });
});
