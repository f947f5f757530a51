import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate, type Migration } from './migrate.js';
import { openDatabase, type Database } from './open.js';

/** `embedded`: the server `codeagent start` runs (started once per test run); `postgres`: the machine's server. */
export type TestDatabaseTarget = 'embedded' | 'postgres';

export interface TestDatabase {
  database: Database;
  target: TestDatabaseTarget;
  /** A URL of this test's own database that other processes can open (`openDatabase({ databaseUrl })`). */
  url: string;
  drop(): Promise<void>;
}

/** PostgreSQL server the tests create their throw-away databases on. */
export function testServerUrl(): string {
  return process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}

/** Set by the test run's global setup when it started the embedded server (see testing-server.ts). */
export const EMBEDDED_TEST_SERVER_ENV = 'CODEAGENT_TEST_EMBEDDED';

export interface EmbeddedTestServer {
  socketDir: string;
  port: number;
  superuserPassword: string;
  user: string;
  password: string;
}

/**
 * The database target of this test run: the test command runs the database tests once per
 * target, setting CODEAGENT_TEST_DB. Outside that, the machine's PostgreSQL.
 */
export function testDatabaseTargets(): TestDatabaseTarget {
  return process.env.CODEAGENT_TEST_DB === 'embedded' ? 'embedded' : 'postgres';
}

/** A `postgres://` URL for a database on a Unix socket (pg reads the socket directory from `host`). */
function socketUrl(user: string, password: string, socketDir: string, port: number, database: string): string {
  return `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@/${database}?host=${encodeURIComponent(socketDir)}&port=${port}`;
}

function embeddedServer(): EmbeddedTestServer {
  const raw = process.env[EMBEDDED_TEST_SERVER_ENV];
  if (!raw) throw new Error(`no embedded test server: the db:embedded test project starts one (${EMBEDDED_TEST_SERVER_ENV} is unset)`);
  return JSON.parse(raw) as EmbeddedTestServer;
}

/**
 * A fresh, migrated database for one test file, on the embedded server or on the machine's
 * PostgreSQL, dropped again by `drop`, so test files never share state. On the embedded server
 * the tests log in as the platform's own role (no superuser), as the services do.
 */
export async function createTestDatabase(
  target: TestDatabaseTarget = testDatabaseTargets(),
  opts: { /** The migrations to apply (default: all): a test of one migration starts before it. */ migrations?: Migration[] } = {},
): Promise<TestDatabase> {
  const name = `codeagent_test_${randomBytes(6).toString('hex')}`;
  let adminUrl: string;
  let url: string;
  let owner = '';
  if (target === 'embedded') {
    const s = embeddedServer();
    adminUrl = socketUrl('postgres', s.superuserPassword, s.socketDir, s.port, 'postgres');
    url = socketUrl(s.user, s.password, s.socketDir, s.port, name);
    owner = ` OWNER ${s.user}`;
  } else {
    adminUrl = testServerUrl();
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    url = u.toString();
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    // The name is generated above from hex digits only; identifiers cannot be bound as parameters.
    await admin.query(`CREATE DATABASE ${name}${owner}`);
  } finally {
    await admin.end();
  }
  const database = await openDatabase({ databaseUrl: url, poolSize: 20 });
  await migrate(database, opts.migrations);
  return {
    database,
    target,
    url,
    async drop() {
      await database.close();
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
