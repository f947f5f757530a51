import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Database } from './open.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));
/** Arbitrary constant: the advisory lock that serialises migration runs of several processes. */
const MIGRATION_LOCK_ID = 7_274_001;

export interface Migration {
  version: string;
  sql: string;
}

/** Numbered SQL files `NNN_name.sql`, in order. */
export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(`${dir}/${f}`, 'utf8') }));
}

/**
 * Applies the migrations not yet recorded in `schema_migrations`, each in its own
 * transaction. Safe to run from several processes at once (advisory lock) and
 * idempotent: a second run applies nothing. Returns the versions it applied.
 */
export async function migrate(database: Pick<Database, 'withScriptSession'>, migrations = listMigrations()): Promise<string[]> {
  return database.withScriptSession(async (session) => {
    await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    try {
      await session.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
      const rows = await session.query<{ version: string }>('SELECT version FROM schema_migrations', []);
      const done = new Set(rows.map((r) => r.version));
      const applied: string[] = [];
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        await session.exec('BEGIN');
        try {
          await session.exec(m.sql);
          await session.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
          await session.exec('COMMIT');
        } catch (err) {
          await session.exec('ROLLBACK');
          throw new Error(`migration ${m.version} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(m.version);
      }
      return applied;
    } finally {
      await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]);
    }
  });
}
