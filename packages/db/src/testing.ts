import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from './migrate.js';
import { openDatabase, type Database } from './open.js';

export type TestDatabaseTarget = 'pglite' | 'postgres';

export interface TestDatabase {
  database: Database;
  target: TestDatabaseTarget;
  /** For PostgreSQL: the URL of this test's own database (to share it with other processes). */
  url: string | undefined;
  drop(): Promise<void>;
}

/** PostgreSQL server the tests create their throw-away databases on. */
export function testServerUrl(): string {
  return process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}

/**
 * The database target of this test run: the test command runs the database tests once
 * per target, setting CODEAGENT_TEST_DB. Outside that, PGlite.
 */
export function testDatabaseTargets(): TestDatabaseTarget {
  return process.env.CODEAGENT_TEST_DB === 'postgres' ? 'postgres' : 'pglite';
}

/**
 * A fresh, migrated database for one test file: in-memory PGlite, or a new database
 * on the PostgreSQL server (dropped again by `drop`), so test files never share state.
 */
export async function createTestDatabase(target: TestDatabaseTarget = testDatabaseTargets()): Promise<TestDatabase> {
  if (target === 'pglite') {
    const database = await openDatabase({ dataDir: 'memory://' });
    await migrate(database);
    return { database, target, url: undefined, drop: () => database.close() };
  }
  const serverUrl = testServerUrl();
  const name = `codeagent_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    // The name is generated above from hex digits only; identifiers cannot be bound as parameters.
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const database = await openDatabase({ databaseUrl: url.toString(), poolSize: 20 });
  await migrate(database);
  return {
    database,
    target,
    url: url.toString(),
    async drop() {
      await database.close();
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
