import { describe, expect, it } from 'vitest';
import { sharedProbe } from './health.js';

describe('the health probes of the public /api/v1/health', () => {
  it('are shared by the requests that ask while one runs: a loop of anonymous requests makes one probe at a time', async () => {
    const asked: (string | undefined)[] = [];
    let answer!: (ok: boolean) => void;
    const probe = sharedProbe((requestId) => {
      asked.push(requestId);
      return new Promise<boolean>((resolve) => (answer = resolve));
    });
    const waiting = Array.from({ length: 50 }, (_, i) => probe(`r${i}`));
    expect(asked).toEqual(['r0']);
    answer(true);
    expect(await Promise.all(waiting)).toEqual(Array(50).fill(true));
    // Settled: the next request probes again, with its own request id.
    const next = probe('r50');
    expect(asked).toEqual(['r0', 'r50']);
    answer(false);
    expect(await next).toBe(false);
  });

  it('a probe that hangs is shared for its time limit only: it answers false, and the next request probes afresh', async () => {
    let calls = 0;
    const probe = sharedProbe(() => (++calls === 1 ? new Promise<boolean>(() => undefined) : Promise.resolve(true)), 100);
    expect(await probe()).toBe(false);
    // The dependency is back: health follows at once (it stayed "error" while the hung probe was shared).
    expect(await probe()).toBe(true);
    expect(calls).toBe(2);
  });

  it('a probe that throws answers false, and the next one runs', async () => {
    let calls = 0;
    const probe = sharedProbe(() => (++calls === 1 ? Promise.reject(new Error('down')) : Promise.resolve(true)));
    expect(await probe()).toBe(false);
    expect(await probe()).toBe(true);
  });
});
