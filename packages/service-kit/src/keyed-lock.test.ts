import { describe, expect, it } from 'vitest';
import { KeyedLock } from './keyed-lock.js';

const deferred = () => {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

describe('KeyedLock', () => {
  it('runs the work of one key one after another, in order, and forgets the key afterwards', async () => {
    const lock = new KeyedLock();
    const order: string[] = [];
    const first = deferred();
    const a = lock.run('k', async () => {
      order.push('a start');
      await first.promise;
      order.push('a end');
      return 1;
    });
    const b = lock.run('k', () => {
      order.push('b');
      return Promise.resolve(2);
    });
    // Every pending callback has run: a holds the key, b waits behind it.
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a start']);
    first.resolve();
    expect(await Promise.all([a, b])).toEqual([1, 2]);
    expect(order).toEqual(['a start', 'a end', 'b']);
    await new Promise((r) => setImmediate(r));
    expect(lock.size).toBe(0);
  });

  it('lets other keys run meanwhile', async () => {
    const lock = new KeyedLock();
    const held = deferred();
    const slow = lock.run('one', () => held.promise);
    expect(await lock.run('two', () => Promise.resolve('ran'))).toBe('ran');
    held.resolve();
    await slow;
  });

  it('a failure reaches its caller only; the next work of the key still runs', async () => {
    const lock = new KeyedLock();
    const failing = lock.run('k', () => Promise.reject(new Error('boom')));
    const next = lock.run('k', () => Promise.resolve('after'));
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('after');
  });
});
