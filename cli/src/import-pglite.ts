import { existsSync, renameSync, rmSync } from 'node:fs';
import type { Config } from '@codeagent/config';
import {
  EmbeddedPostgres,
  embeddedMaxConnections,
  embeddedPaths,
  listMigrations,
  migrate,
  openPlatformDatabase,
  type Database,
  type EmbeddedPostgres as EmbeddedPostgresType,
} from '@codeagent/db';
import { acquireDataDirLock, StartError } from './preflight.js';

const BATCH = 500;

interface PGliteLike {
  query<R>(sql: string, params?: unknown[]): Promise<{ rows: R[] }>;
  close(): Promise<void>;
}

/** Tables ordered so that every table comes after the tables its foreign keys point to. */
function dependencyOrder(tables: string[], edges: { t: string; ref: string }[]): string[] {
  const ordered: string[] = [];
  const visiting = new Set<string>();
  const visit = (t: string) => {
    if (ordered.includes(t) || visiting.has(t)) return;
    visiting.add(t);
    for (const e of edges) if (e.t === t && e.ref !== t) visit(e.ref);
    ordered.push(t);
  };
  tables.forEach(visit);
  return ordered;
}

/**
 * `codeagent import-pglite`: copies the data of the earlier embedded database (PGlite, in
 * DATA_DIR/pgdata) into the PostgreSQL server of this version (the embedded one, or
 * DATABASE_URL), table by table inside one transaction, then keeps the old directory as
 * `pgdata.imported-<time>`. The platform must be stopped; the target must be empty.
 */
export async function importPglite(config: Config): Promise<number> {
  const paths = embeddedPaths(config.dataDir);
  if (!existsSync(paths.legacyPglite)) throw new StartError(`nothing to import: ${paths.legacyPglite} does not exist`);
  const releaseLock = acquireDataDirLock(config.dataDir);
  let server: EmbeddedPostgresType | undefined;
  let source: PGliteLike | undefined;
  let target: Database | undefined;
  try {
    // PGlite stays a dependency of this command only: it reads the old directory, one connection.
    const { PGlite } = await import('@electric-sql/pglite');
    source = await PGlite.create(paths.legacyPglite);
    if (!config.databaseUrl) {
      server = new EmbeddedPostgres({
        dataDir: config.dataDir,
        password: config.embeddedDatabase!.password,
        superuserPassword: config.embeddedDatabase!.superuserPassword,
        maxConnections: embeddedMaxConnections(),
        onLog: (line) => console.error(`postgres: ${line}`),
      });
      await server.start();
    }
    target = await openPlatformDatabase(config, 'migrate');

    // The target gets exactly the schema the old data was written with; later migrations follow the copy.
    const done = new Set((await source.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    await migrate(
      target,
      listMigrations().filter((m) => done.has(m.version)),
    );

    const tables = (
      await source.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations' ORDER BY table_name",
      )
    ).rows.map((r) => r.table_name);
    const edges = (
      await source.query<{ t: string; ref: string }>(
        "SELECT conrelid::regclass::text AS t, confrelid::regclass::text AS ref FROM pg_constraint WHERE contype = 'f'",
      )
    ).rows;
    const order = dependencyOrder(tables, edges);

    const client = await target.pool.connect();
    try {
      await client.query('BEGIN');
      for (const table of order) {
        const existing = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${client.escapeIdentifier(table)}`);
        // Only the rows the migrations themselves insert (platform roles) may already be there.
        const seeded = table === 'platform_roles';
        if (!seeded && (existing.rows[0]?.n ?? 0) > 0) {
          throw new StartError(
            `the target database already holds data in ${table}; import into an empty database (move DATA_DIR/postgres away, or point DATABASE_URL at a new database)`,
          );
        }
        const rows = (await source.query<{ r: string }>(`SELECT row_to_json(t)::text AS r FROM ${client.escapeIdentifier(table)} t`)).rows;
        for (let i = 0; i < rows.length; i += BATCH) {
          const batch = `[${rows
            .slice(i, i + BATCH)
            .map((r) => r.r)
            .join(',')}]`;
          const id = client.escapeIdentifier(table);
          await client.query(`INSERT INTO ${id} SELECT * FROM json_populate_recordset(NULL::${id}, $1::json)${seeded ? ' ON CONFLICT DO NOTHING' : ''}`, [
            batch,
          ]);
        }
        console.log(`  ${table.padEnd(24)} ${rows.length} rows`);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    await migrate(target);
    await source.close();
    source = undefined;
    const kept = `${paths.legacyPglite}.imported-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    renameSync(paths.legacyPglite, kept);
    rmSync(`${paths.legacyPglite}.lock`, { force: true });
    console.log(`imported; the old directory is kept as ${kept} (delete it when you no longer need it)`);
    return 0;
  } finally {
    await source?.close().catch(() => undefined);
    await target?.close().catch(() => undefined);
    await server?.stop();
    releaseLock();
  }
}
