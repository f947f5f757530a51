import { existsSync } from 'node:fs';
import type pg from 'pg';
import { ConfigError, type Config } from '@codeagent/config';
import { embeddedConnection, embeddedPaths } from './embedded/layout.js';

// The connection to the platform's database with pg alone: what `codeagent start` needs to run
// the migrations without loading Kysely (docs/decisions/0085); open.ts builds the Database on it.

/** A session with exclusive use of one connection, for scripts (migrations). */
export interface ScriptSession {
  exec(sql: string): Promise<void>;
  query<R = Record<string, unknown>>(sql: string, params: unknown[]): Promise<R[]>;
}

/** A `postgres://` URL, or the fields of a connection (the embedded server's Unix socket). */
export type Connection = string | { host: string; port: number; user: string; password: string; database: string };

/**
 * The platform's database from its settings: DATABASE_URL, or else the embedded server of
 * DATA_DIR (started by `codeagent start`), reached over its private Unix socket.
 */
export function platformConnection(config: Config): Connection {
  if (config.databaseUrl) return config.databaseUrl;
  if (!config.embeddedDatabase) {
    throw new ConfigError(['DATABASE_URL is required when NODE_ENV=production; set it to your PostgreSQL server (postgres://user:password@host:5432/db)']);
  }
  return embeddedConnection(config.dataDir, config.embeddedDatabase.password);
}

/** Where the database is, for messages: never the password. */
export function describeConnection(config: Config): string {
  if (config.databaseUrl) {
    try {
      const u = new URL(config.databaseUrl);
      return `DATABASE_URL (${u.hostname || 'local socket'}:${u.port || 5432}${u.pathname})`;
    } catch {
      return 'DATABASE_URL';
    }
  }
  return `the embedded database (socket in ${embeddedPaths(config.dataDir).socketDir})`;
}

/**
 * Connections each component may hold. The embedded server's `max_connections` is sized from
 * this table (plus room for the superuser and a few administrative sessions).
 */
export const DATABASE_POOL_SIZES = { backend: 10, worker: 4, bridge: 4, 'cluster-admin': 4, runtime: 2, migrate: 1 } as const;
export type DatabaseClient = keyof typeof DATABASE_POOL_SIZES;

/** Besides the pools: the listening connections (Database.listen) of the worker, the backend (two), the bridge and the runtime (two). */
export const LISTEN_CONNECTIONS = 6;

export function embeddedMaxConnections(): number {
  return Object.values(DATABASE_POOL_SIZES).reduce((a, b) => a + b, 0) + LISTEN_CONNECTIONS + 10;
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET', '57P03']);

export class DatabaseUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseUnavailableError';
  }
}

/** pg's client settings for `connection`, named `applicationName` in pg_stat_activity. */
export function clientConfig(connection: Connection, applicationName: string): pg.ClientConfig {
  return { ...(typeof connection === 'string' ? { connectionString: connection } : connection), application_name: applicationName };
}

/** Runs `work` on one connection of `pool`, held exclusively until it is done. */
export async function withScriptSession<T>(pool: pg.Pool, work: (session: ScriptSession) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await work({
      exec: async (sql) => {
        await client.query(sql);
      },
      // eslint-disable-next-line @typescript-eslint/no-unsafe-return -- pg's rows are untyped; the caller names the row type (query<T>)
      query: async (sql, params) => (await client.query(sql, params)).rows,
    });
  } finally {
    client.release();
  }
}

/**
 * Checks that the platform's database answers on `pool`, waiting up to `waitMs` for a server
 * that is still starting. Failing that, `close` and one sentence that names the setting and the fix.
 */
export async function waitForDatabase(config: Config, pool: pg.Pool, close: () => Promise<void>, waitMs: number): Promise<void> {
  // An embedded server that was never created (no `codeagent start` on this DATA_DIR: no data
  // directory, which the platform's user can see even where the server runs as a user of its
  // own) will not come up by waiting: say so at once.
  const never = !config.databaseUrl && !existsSync(embeddedPaths(config.dataDir).pgdata);
  const deadline = Date.now() + (never ? 0 : waitMs);
  for (;;) {
    try {
      await pool.query('SELECT 1');
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (UNREACHABLE.has(code) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      await close().catch(() => undefined);
      const fix = config.databaseUrl
        ? 'start that PostgreSQL server or correct DATABASE_URL'
        : 'start the platform with `codeagent start` (it runs the embedded database), or set DATABASE_URL';
      throw new DatabaseUnavailableError(`cannot reach ${describeConnection(config)}: ${(err as Error).message || code}; ${fix}`);
    }
  }
}
