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

  it('runs every pooled connection without JIT, through the pool and through Kysely', async () => {
    const clients = await Promise.all(Array.from({ length: 3 }, () => t.database.pool.connect()));
    try {
      for (const c of clients) expect((await c.query<{ jit: string }>('SHOW jit')).rows[0]?.jit).toBe('off');
    } finally {
      for (const c of clients) c.release();
    }
    expect((await sql<{ jit: string }>`SHOW jit`.execute(t.database.db)).rows[0]?.jit).toBe('off');
  });
});
