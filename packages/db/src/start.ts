import pg from 'pg';
import type { Config } from '@codeagent/config';
import { clientConfig, DATABASE_POOL_SIZES, platformConnection, waitForDatabase, withScriptSession } from './connection.js';
import { migrate } from './migrate.js';

/**
 * `@codeagent/db/start`: what `codeagent start` needs while it supervises — the embedded server
 * and the migrations — on pg alone. The supervisor lives as long as the platform; Kysely, which
 * it would otherwise load for the migrations only, stays out of it (docs/decisions/0085).
 */
export { EmbeddedPostgres } from './embedded/server.js';
export { embeddedPaths } from './embedded/layout.js';
export { embeddedMaxConnections } from './connection.js';

/**
 * Applies the pending migrations to the platform's database (as `migrate` on a Database opened
 * with `openPlatformDatabase(config, 'migrate')`: the same connection, wait and messages), and
 * closes its connection. Returns the versions it applied.
 */
export async function migratePlatform(config: Config, waitMs = 10_000): Promise<string[]> {
  const pool = new pg.Pool({ ...clientConfig(platformConnection(config), 'codeagent migrate'), max: DATABASE_POOL_SIZES.migrate });
  pool.on('error', () => undefined);
  const close = () => pool.end();
  await waitForDatabase(config, pool, close, waitMs);
  try {
    return await migrate({ withScriptSession: (work) => withScriptSession(pool, work) });
  } finally {
    await close();
  }
}
