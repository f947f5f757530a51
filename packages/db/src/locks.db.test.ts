import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseBusyError, releaseLease, tryLease, withLease } from './locks.js';
import { createTestDatabase, type TestDatabase } from './testing.js';

describe('leases shared by several instances (issue 18)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => t.drop());

  it('gives a key to one holder at a time; the holder renews it; release or expiry frees it', async () => {
    const db = t.database.db;
    expect(await tryLease(db, 'k1', 'a', 60_000)).toBe(true);
    expect(await tryLease(db, 'k1', 'b', 60_000)).toBe(false);
    expect(await tryLease(db, 'k1', 'a', 60_000)).toBe(true); // renewal
    await releaseLease(db, 'k1', 'b'); // not b's: nothing happens
    expect(await tryLease(db, 'k1', 'b', 60_000)).toBe(false);
    await releaseLease(db, 'k1', 'a');
    expect(await tryLease(db, 'k1', 'b', 60_000)).toBe(true);
    // A holder that died: its lease expires and the key is free again.
    expect(await tryLease(db, 'k2', 'dead', 1)).toBe(true);
    await new Promise((r) => setTimeout(r, 20));
    expect(await tryLease(db, 'k2', 'alive', 60_000)).toBe(true);
  });

  it('serialises work across holders (two instances), bounded waiting', async () => {
    const db = t.database.db;
    const events: string[] = [];
    const work = (who: string) => async () => {
      events.push(`${who} in`);
      await new Promise((r) => setTimeout(r, 150));
      events.push(`${who} out`);
    };
    await Promise.all([
      withLease(db, 'edit', { holder: 'one', ttlMs: 5000, waitMs: 5000, pollMs: 20 }, work('one')),
      withLease(db, 'edit', { holder: 'two', ttlMs: 5000, waitMs: 5000, pollMs: 20 }, work('two')),
    ]);
    expect([events[0]!.split(' ')[1], events[1]!.split(' ')[1], events[2]!.split(' ')[1], events[3]!.split(' ')[1]]).toEqual(['in', 'out', 'in', 'out']);
    // A failed piece of work releases at once; a busy key is refused after the wait.
    await expect(withLease(db, 'fails', { holder: 'x', ttlMs: 5000, waitMs: 100 }, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await tryLease(db, 'fails', 'y', 5000)).toBe(true);
    await expect(withLease(db, 'fails', { holder: 'z', ttlMs: 5000, waitMs: 100, pollMs: 20 }, () => Promise.resolve(1))).rejects.toBeInstanceOf(
      LeaseBusyError,
    );
  });
});
