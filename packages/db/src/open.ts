import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { ConfigError, type Config } from '@codeagent/config';
import { embeddedConnection, embeddedPaths } from './embedded/layout.js';
import { listenOn, type ListenHandlers, type Listener } from './notify.js';
import type { DB } from './schema.js';

/** A session with exclusive use of one connection, for scripts (migrations). */
export interface ScriptSession {
  exec(sql: string): Promise<void>;
  query<R = Record<string, unknown>>(sql: string, params: unknown[]): Promise<R[]>;
}

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

/** A `postgres://` URL, or the fields of a connection (the embedded server's Unix socket). */
export type Connection = string | { host: string; port: number; user: string; password: string; database: string };

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

// eslint-disable-next-line @typescript-eslint/require-await -- async so that a missing connection is a rejection, as callers expect
export async function openDatabase(options: OpenOptions): Promise<Database> {
  const connection = options.connection ?? options.databaseUrl;
  if (connection === undefined) throw new Error('openDatabase needs a connection (a postgres:// URL or socket fields)');
  const clientConfig: pg.ClientConfig = {
    ...(typeof connection === 'string' ? { connectionString: connection } : connection),
    application_name: options.applicationName ?? 'codeagent',
  };
  const pool = new pg.Pool({ ...clientConfig, max: options.poolSize ?? 10 });
  // An idle client losing its connection (server restarted) must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    listen: (channel, handlers, opts) => listenOn({ ...clientConfig, application_name: `${clientConfig.application_name} listen` }, channel, handlers, opts),
    async withScriptSession(work) {
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
    },
    close: () => db.destroy(),
  };
}

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

/** Besides the pools: the listening connections (Database.listen) of the worker, the backend and the bridge. */
export const LISTEN_CONNECTIONS = 3;

export function embeddedMaxConnections(): number {
  return Object.values(DATABASE_POOL_SIZES).reduce((a, b) => a + b, 0) + LISTEN_CONNECTIONS + 10;
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET', '57P03']);

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
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await database.pool.query('SELECT 1');
      return database;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (UNREACHABLE.has(code) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      await database.close().catch(() => undefined);
      const fix = config.databaseUrl
        ? 'start that PostgreSQL server or correct DATABASE_URL'
        : 'start the platform with `codeagent start` (it runs the embedded database), or set DATABASE_URL';
      throw new DatabaseUnavailableError(`cannot reach ${describeConnection(config)}: ${(err as Error).message || code}; ${fix}`);
    }
  }
}

export class DatabaseUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseUnavailableError';
  }
}
