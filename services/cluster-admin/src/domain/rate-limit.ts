import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

/** Takes one request's token for a cluster; false when its bucket is empty (no request may be sent). */
export interface RateLimiter {
  take(clusterId: string, ratePerMinute: number): Promise<boolean>;
}

/**
 * Per-cluster token buckets in the database (migration 010): `rate` requests per minute,
 * bursts up to `rate`; 0 = unlimited. One statement takes a token (the row is locked by the
 * upsert), so every cluster-service instance draws from the same bucket: two instances allow
 * `rate` per minute together, not each (issue 18). A changed rate starts a full bucket.
 */
export class DatabaseRateLimiter implements RateLimiter {
  constructor(private readonly db: Kysely<DB>) {}

  async take(clusterId: string, ratePerMinute: number): Promise<boolean> {
    if (ratePerMinute === 0) return true;
    const refilled = sql`LEAST(EXCLUDED.rate::float8, b.tokens + EXTRACT(EPOCH FROM clock_timestamp() - b.updated_at) / 60.0 * EXCLUDED.rate)`;
    const taken = await sql<{ tokens: number }>`
      INSERT INTO cluster_rate_buckets AS b (cluster_id, tokens, rate, updated_at)
      VALUES (${clusterId}, ${ratePerMinute - 1}, ${ratePerMinute}, clock_timestamp())
      ON CONFLICT (cluster_id) DO UPDATE SET
        tokens = CASE WHEN b.rate <> EXCLUDED.rate THEN EXCLUDED.tokens ELSE ${refilled} - 1 END,
        rate = EXCLUDED.rate,
        updated_at = clock_timestamp()
      WHERE b.rate <> EXCLUDED.rate OR ${refilled} >= 1
      RETURNING tokens`.execute(this.db);
    return taken.rows.length === 1;
  }
}
