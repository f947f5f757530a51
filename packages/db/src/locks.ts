import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.js';

/**
 * Takes a transaction-scoped advisory lock named by `key` (e.g. `quota:<workspace id>`): held
 * until commit or rollback, so checks that count rows and then write (caps, quotas) cannot
 * both pass under concurrency. Take it before locking any row, so lock order stays the same.
 */
export async function advisoryXactLock(trx: Transaction<DB>, key: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
}

/** The lease is held by another instance and was not freed within the wait. */
export class LeaseBusyError extends Error {
  constructor(key: string, waitedMs: number) {
    super(`${key} is busy (held by another instance for more than ${Math.round(waitedMs / 1000)} s)`);
    this.name = 'LeaseBusyError';
  }
}

/**
 * Takes the lease `key` for `holder` when it is free or expired (or already this holder's,
 * which renews it): one statement, so two instances never both get it. True when now held.
 */
export async function tryLease(db: Kysely<DB>, key: string, holder: string, ttlMs: number): Promise<boolean> {
  const ttl = `${Math.max(1, Math.ceil(ttlMs))} milliseconds`;
  const row = await sql<{ holder: string }>`
    INSERT INTO service_leases AS l (key, holder, expires_at) VALUES (${key}, ${holder}, clock_timestamp() + ${ttl}::interval)
    ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at < clock_timestamp() OR l.holder = EXCLUDED.holder
    RETURNING holder`.execute(db);
  return row.rows.length === 1;
}

/** Gives the lease up, if this holder still has it. */
export async function releaseLease(db: Kysely<DB>, key: string, holder: string): Promise<void> {
  await db.deleteFrom('service_leases').where('key', '=', key).where('holder', '=', holder).execute();
}

export interface LeaseOptions {
  /** Who holds it: unique per instance and call. */
  holder: string;
  /** Held this long unless renewed; renewed every third of it while `work` runs. */
  ttlMs: number;
  /** Waits at most this long for another holder to let go, then LeaseBusyError. */
  waitMs: number;
  pollMs?: number;
}

/**
 * Runs `work` while holding the lease `key` across every instance of a component (issue 18: a
 * per-key lock that two bridges share). Waiting is bounded; a holder that dies frees the key
 * when its lease expires; a failed or timed-out `work` releases it at once.
 */
export async function withLease<T>(db: Kysely<DB>, key: string, opts: LeaseOptions, work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + opts.waitMs;
  const poll = opts.pollMs ?? 200;
  while (!(await tryLease(db, key, opts.holder, opts.ttlMs))) {
    if (Date.now() >= deadline) throw new LeaseBusyError(key, opts.waitMs);
    await new Promise((r) => setTimeout(r, poll));
  }
  const renew = setInterval(() => void tryLease(db, key, opts.holder, opts.ttlMs).catch(() => undefined), Math.max(50, opts.ttlMs / 3));
  try {
    return await work();
  } finally {
    clearInterval(renew);
    await releaseLease(db, key, opts.holder).catch(() => undefined);
  }
}
