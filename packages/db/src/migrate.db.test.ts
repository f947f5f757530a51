import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createTestDatabase, testDatabaseTargets, type TestDatabase } from './testing.js';
import { listMigrations, migrate } from './migrate.js';

describe(`migrations (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  it('records every numbered migration once', async () => {
    const rows = await t.database.db.selectFrom('schema_migrations').select('version').orderBy('version').execute();
    expect(rows.map((r) => r.version)).toEqual(listMigrations().map((m) => m.version));
  });

  it('is idempotent: a second and third run apply nothing and keep the data', async () => {
    await t.database.db.insertInto('workspaces').values({ name: 'keep me' }).execute();
    expect(await migrate(t.database)).toEqual([]);
    expect(await migrate(t.database)).toEqual([]);
    const ws = await t.database.db.selectFrom('workspaces').select('name').execute();
    expect(ws.map((w) => w.name)).toContain('keep me');
  });

  it('runs concurrently from several callers without applying anything twice', async () => {
    const results = await Promise.all([migrate(t.database), migrate(t.database), migrate(t.database)]);
    expect(results.flat()).toEqual([]);
  });

  it('seeds the admin and user platform roles', async () => {
    const roles = await t.database.db.selectFrom('platform_roles').select('id').orderBy('id').execute();
    expect(roles.map((r) => r.id)).toEqual(['admin', 'user']);
  });

  it('rolls a failing migration back whole and reports which one failed', async () => {
    const bad = [...listMigrations(), { version: '999_broken', sql: 'CREATE TABLE half_done (id int); SELECT * FROM no_such_table;' }];
    await expect(migrate(t.database, bad)).rejects.toThrow(/999_broken/);
    const exists = await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name = 'half_done'`.execute(t.database.db);
    expect(exists.rows[0]?.n).toBe(0);
    const versions = await t.database.db.selectFrom('schema_migrations').select('version').execute();
    expect(versions.map((v) => v.version)).not.toContain('999_broken');
  });

  it('reports affected rows of updates through the query layer', async () => {
    const res = await t.database.db.updateTable('workspaces').set({ description: 'x' }).where('name', '=', 'keep me').executeTakeFirst();
    expect(Number(res.numUpdatedRows)).toBe(1);
  });

  it("012 starts each workspace's running total of stored bytes at what it stores, and keeps it from then on", async () => {
    const all = listMigrations();
    const before = await createTestDatabase(testDatabaseTargets(), { migrations: all.filter((m) => m.version < '012') });
    try {
      const db = before.database.db;
      const workspace = async (name: string) => (await db.insertInto('workspaces').values({ name }).returning('id').executeTakeFirstOrThrow()).id;
      const [a, b, empty] = [await workspace('a'), await workspace('b'), await workspace('empty')];
      const row = { sha256: '0'.repeat(64), content_type: 'text/plain' };
      await db
        .insertInto('objects')
        .values([
          { workspace_id: a, path: 'x', version_id: randomUUID(), size: 100, ...row },
          { workspace_id: a, path: 'y', version_id: randomUUID(), size: 20, ...row },
          { workspace_id: b, path: 'x', version_id: randomUUID(), size: 7, ...row },
        ])
        .execute();
      await db
        .insertInto('object_versions')
        .values({ id: randomUUID(), workspace_id: a, path: 'x', size: 3000, created_at: new Date(), ...row })
        .execute();
      await db
        .insertInto('trash_items')
        .values({ workspace_id: b, path: 'gone', version_id: randomUUID(), size: 50_000, updated_at: new Date(), ...row })
        .execute();
      expect(await migrate(before.database, all)).toEqual(all.filter((m) => m.version >= '012').map((m) => m.version));
      const total = async (ws: string) =>
        Number((await sql<{ n: string }>`SELECT coalesce(sum(bytes), 0) AS n FROM workspace_usage WHERE workspace_id = ${ws}`.execute(db)).rows[0]!.n);
      expect([await total(a), await total(b), await total(empty)]).toEqual([3120, 50_007, 0]);
      await db.deleteFrom('trash_items').where('workspace_id', '=', b).execute();
      await db.updateTable('objects').set({ size: 1 }).where('workspace_id', '=', a).execute();
      expect([await total(a), await total(b)]).toEqual([3002, 7]);
    } finally {
      await before.drop();
    }
  });
});
