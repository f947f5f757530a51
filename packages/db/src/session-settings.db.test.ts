import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.js';

/**
 * Decision 0238: the platform's connections run without JIT compilation, whatever the server's
 * default (the test server's is `on`): compiling the plan of a folder listing of a large workspace
 * took 20 ms of a query that runs in under one.
 */
describe(`session settings of the platform's connections (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  it('runs every connection of the pool without JIT', async () => {
    // Three transactions at once: three connections of the pool, each asked once it is in use.
    const answers = await Promise.all(
      Array.from({ length: 3 }, () =>
        t.database.db.transaction().execute(async (trx) => {
          const { rows } = await sql<{ jit: string; pid: number }>`SELECT current_setting('jit') AS jit, pg_backend_pid() AS pid`.execute(trx);
          await sql`SELECT pg_sleep(0.1)`.execute(trx);
          return rows[0]!;
        }),
      ),
    );
    expect(new Set(answers.map((a) => a.pid)).size).toBe(3);
    expect(answers.map((a) => a.jit)).toEqual(['off', 'off', 'off']);
  });
});
