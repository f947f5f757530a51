import { describe, expect, it } from 'vitest';
import type { ListenHandlers, Listener } from '@codeagent/db';
import { FolderTimes } from './folder-times.js';

describe('kept folder times', () => {
  it('a change in one workspace while another is read keeps nothing of the other from being kept (it did: one write anywhere, every large listing read again)', () => {
    let handlers: ListenHandlers | undefined;
    const times = new FolderTimes();
    times.follow((_channel, h) => {
      handlers = h;
      return { connected: true, close: () => Promise.resolve() } satisfies Listener;
    });
    const a = '11111111-1111-4111-8111-111111111111';
    const b = '22222222-2222-4222-8222-222222222222';
    const stamp = times.stamp();
    // While a's folder walk runs, files change in b (a loop of tiny writes would do it all the time).
    handlers!.onNotify(`${b} data`);
    times.set(a, 'data/', '2026-11-28T00:00:00.000Z', stamp);
    times.set(b, 'data/', '2026-11-28T00:00:00.000Z', stamp);
    expect(times.get(a, 'data/')).toBe('2026-11-28T00:00:00.000Z');
    // b's own read, from before its change, may be stale: not kept.
    expect(times.get(b, 'data/')).toBeUndefined();
    // A lost connection refuses every read from before it.
    const before = times.stamp();
    handlers!.onDisconnect!(undefined);
    times.set(a, 'other/', 'x', before);
    expect(times.get(a, 'other/')).toBeUndefined();
  });
});
