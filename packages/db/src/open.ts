import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { DB } from './schema.js';

/** A session with exclusive use of one connection, for scripts (migrations). */
export interface ScriptSession {
  exec(sql: string): Promise<void>;
  query<R = Record<string, unknown>>(sql: string, params: unknown[]): Promise<R[]>;
}

export interface Database {
  db: Kysely<DB>;
  kind: 'pglite' | 'postgres';
  /** Exclusive connection for multi-statement scripts; used by the migration runner. */
  withScriptSession<T>(work: (session: ScriptSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** postgres:// URL; when absent the embedded database in `dataDir` is used. */
  databaseUrl?: string | undefined;
  /** Directory of the embedded database; `memory://` for a throw-away in-memory one. */
  dataDir?: string;
  /** Pool size for PostgreSQL (default 10). */
  poolSize?: number;
}

// pg returns int8 as strings by default; counts and sizes in this schema fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (v: string) => Number(v));

export async function openDatabase(options: OpenOptions): Promise<Database> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 10);
  if (!options.dataDir) throw new Error('openDatabase needs databaseUrl or dataDir');
  return openEmbedded(options.dataDir);
}

function openPostgres(url: string, max: number): Database {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    kind: 'postgres',
    async withScriptSession(work) {
      const client = await pool.connect();
      try {
        return await work({
          exec: async (sql) => {
            await client.query(sql);
          },
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
 * PGlite is a single-connection database. This adapter gives Kysely's PostgreSQL dialect
 * a "pool" of that one connection: a caller holds it exclusively (a whole transaction,
 * or one query) and the next waits, which is exactly PostgreSQL's semantics with one client.
 */
class PGlitePool implements PostgresPool {
  private tail: Promise<void> = Promise.resolve();

  constructor(
    readonly pglite: PGlite,
    private readonly onEnd: () => void,
  ) {}

  /** Waits for exclusive use of the connection; the returned function gives it back. */
  async acquire(): Promise<() => void> {
    let release!: () => void;
    const previous = this.tail;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    return release;
  }

  async connect(): Promise<PostgresPoolClient> {
    const release = await this.acquire();
    const pglite = this.pglite;
    const client = {
      async query(sql: string, parameters: ReadonlyArray<unknown>) {
        const result = await pglite.query<Record<string, unknown>>(sql, [...parameters]);
        return {
          command: commandOf(sql),
          rowCount: result.affectedRows ?? result.rows.length,
          rows: result.rows,
        };
      },
      release,
    };
    return client as unknown as PostgresPoolClient;
  }

  async end(): Promise<void> {
    await this.pglite.close();
    this.onEnd();
  }
}

function commandOf(sql: string): 'INSERT' | 'UPDATE' | 'DELETE' | 'MERGE' | 'SELECT' {
  const word = /^\s*(?:with\b[\s\S]*?\)\s*)?(\w+)/i.exec(sql)?.[1]?.toUpperCase();
  return word === 'INSERT' || word === 'UPDATE' || word === 'DELETE' || word === 'MERGE' ? word : 'SELECT';
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The embedded database lives in `${dataDir}/pgdata` and may be opened by one process only;
 * a lock file with the owner's pid turns a second opener into a clear error instead of
 * corruption. A lock left by a dead process is taken over. Returns the unlock function.
 */
export function lockEmbeddedDatabase(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockFile = join(dataDir, 'pgdata.lock');
  if (existsSync(lockFile)) {
    const owner = Number(readFileSync(lockFile, 'utf8').trim());
    if (Number.isInteger(owner) && owner !== process.pid && pidAlive(owner)) {
      throw new Error(
        `the embedded database in ${dataDir} is in use by process ${owner}; ` +
          'stop it, or set DATABASE_URL to share a PostgreSQL server between components',
      );
    }
  }
  writeFileSync(lockFile, String(process.pid));
  return () => rmSync(lockFile, { force: true });
}

async function openEmbedded(dataDir: string): Promise<Database> {
  let pglite: PGlite;
  let unlock = (): void => undefined;
  if (dataDir === 'memory://') {
    pglite = new PGlite();
  } else {
    unlock = lockEmbeddedDatabase(dataDir);
    pglite = new PGlite(join(dataDir, 'pgdata'));
  }
  await pglite.waitReady;
  const pool = new PGlitePool(pglite, unlock);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    kind: 'pglite',
    async withScriptSession(work) {
      const release = await pool.acquire();
      try {
        return await work({
          exec: async (sql) => {
            await pglite.exec(sql);
          },
          query: async <R>(sql: string, params: unknown[]) => (await pglite.query<R>(sql, params)).rows,
        });
      } finally {
        release();
      }
    },
    close: () => db.destroy(),
  };
}
