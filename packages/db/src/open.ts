import { CompiledQuery, Kysely, PostgresDialect, type DatabaseConnection } from 'kysely';
import pg from 'pg';
import type { Config } from '@codeagent/config';
import {
  clientConfig as clientConfigOf,
  DATABASE_POOL_SIZES,
  platformConnection,
  waitForDatabase,
  withScriptSession,
  type Connection,
  type DatabaseClient,
  type ScriptSession,
} from './connection.js';
import { listenOn, type ListenHandlers, type Listener } from './notify.js';
import type { DB } from './schema.js';

export {
  platformConnection,
  describeConnection,
  embeddedMaxConnections,
  DatabaseUnavailableError,
  DATABASE_POOL_SIZES,
  LISTEN_CONNECTIONS,
} from './connection.js';
export type { Connection, DatabaseClient, ScriptSession } from './connection.js';

export interface Database {
  db: Kysely<DB>;
  /** The pool itself, for what Kysely does not cover (LISTEN, COPY). */
  pool: pg.Pool;
  /** A dedicated connection listening on `channel` (LISTEN/NOTIFY), reconnecting when lost; see notify.ts. */
  listen(channel: string, handlers: ListenHandlers, opts?: { retryMs?: number }): Listener;
  /** Exclusive connection for multi-statement scripts; used by the migration runner. */
  withScriptSession<T>(work: (session: ScriptSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** Where the server is; `databaseUrl` is the same as a string `connection`. */
  connection?: Connection;
  databaseUrl?: string | undefined;
  /** Pool size (default 10). */
  poolSize?: number;
  /** Shown in pg_stat_activity: which component holds a connection. */
  applicationName?: string;
}

// pg returns int8 as strings by default; counts and sizes in this schema fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => Number(v));

/**
 * What every connection of the platform's Kysely sets first (decision 0238): no JIT compilation.
 * The planner's estimates for the platform's walks (recursive folder listings, the fair claim)
 * pass `jit_above_cost` on large tables although they read a few rows, and compiling one took
 * 20 ms of a query that runs in under one. A statement (Kysely's `onCreateConnection`, awaited
 * before the connection's first query), not the startup `options` (which PgBouncer and other
 * poolers refuse); a server without the setting answers an error, ignored. (The embedded server
 * runs with `jit=off` anyway.)
 */
async function applySessionSettings(connection: DatabaseConnection): Promise<void> {
  await connection.executeQuery(CompiledQuery.raw('SET jit = off')).catch(() => undefined);
}

// eslint-disable-next-line @typescript-eslint/require-await -- async so that a missing connection is a rejection, as callers expect
export async function openDatabase(options: OpenOptions): Promise<Database> {
  const connection = options.connection ?? options.databaseUrl;
  if (connection === undefined) throw new Error('openDatabase needs a connection (a postgres:// URL or socket fields)');
  const clientConfig = clientConfigOf(connection, options.applicationName ?? 'codeagent');
  const pool = new pg.Pool({ ...clientConfig, max: options.poolSize ?? 10 });
  // An idle client losing its connection (server restarted) must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool, onCreateConnection: applySessionSettings }) });
  return {
    db,
    pool,
    listen: (channel, handlers, opts) => listenOn({ ...clientConfig, application_name: `${clientConfig.application_name} listen` }, channel, handlers, opts),
    withScriptSession: (work) => withScriptSession(pool, work),
    close: () => db.destroy(),
  };
}

/**
 * Opens the platform's database and checks that it answers, waiting up to `waitMs` for a
 * server that is still starting. Failing that, one sentence that names the setting and the fix.
 */
export async function openPlatformDatabase(config: Config, client: DatabaseClient, waitMs = 10_000): Promise<Database> {
  const database = await openDatabase({
    connection: platformConnection(config),
    poolSize: DATABASE_POOL_SIZES[client],
    applicationName: `codeagent ${client}`,
  });
  await waitForDatabase(config, database.pool, () => database.close(), waitMs);
  return database;
}
