import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { databaseUidAllocator, UnknownWorkspaceError } from './uids-db.js';

describe(`sandbox uids in the database (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  const ws: string[] = [];
  beforeAll(async () => {
    t = await createTestDatabase();
    for (let i = 0; i < 12; i++)
      ws.push(
        (
          await t.database.db
            .insertInto('workspaces')
            .values({ name: `w${i}` })
            .returning('id')
            .executeTakeFirstOrThrow()
        ).id,
      );
  });
  afterAll(async () => {
    await t.drop();
  });

  it('allocates one uid per workspace, once, and the same on another runtime', async () => {
    const base = 1_900_000_000;
    const first = databaseUidAllocator(t.database.db, base);
    const a = await first.uidFor(ws[0]!);
    const b = await first.uidFor(ws[1]!);
    expect(a).toBeGreaterThan(base);
    expect(b).not.toBe(a);
    const second = databaseUidAllocator(t.database.db, base);
    expect(await second.uidFor(ws[0]!)).toBe(a);
    expect(await second.uidFor(ws[1]!)).toBe(b);
  });

  it('never gives two workspaces the same uid when runtimes race', async () => {
    const racers = [0, 1, 2].map(() => databaseUidAllocator(t.database.db, 1_900_000_000));
    const uids = await Promise.all(ws.slice(2).flatMap((w) => racers.map((r) => r.uidFor(w).then((uid) => [w, uid] as const))));
    const byWs = new Map<string, Set<number>>();
    for (const [w, uid] of uids) byWs.set(w, (byWs.get(w) ?? new Set()).add(uid));
    for (const set of byWs.values()) expect(set.size).toBe(1);
    const all = [...byWs.values()].map((s) => [...s][0]);
    expect(new Set(all).size).toBe(all.length);
  });

  it('refuses unknown and deleted workspaces', async () => {
    const alloc = databaseUidAllocator(t.database.db, 1_900_000_000);
    await expect(alloc.uidFor('00000000-0000-0000-0000-000000000000')).rejects.toBeInstanceOf(UnknownWorkspaceError);
    const gone = (await t.database.db.insertInto('workspaces').values({ name: 'gone', deleted_at: new Date() }).returning('id').executeTakeFirstOrThrow()).id;
    await expect(alloc.uidFor(gone)).rejects.toBeInstanceOf(UnknownWorkspaceError);
    // deleted after its first kernel: no new kernel either
    const later = (await t.database.db.insertInto('workspaces').values({ name: 'later' }).returning('id').executeTakeFirstOrThrow()).id;
    await alloc.uidFor(later);
    await t.database.db.updateTable('workspaces').set({ deleted_at: new Date() }).where('id', '=', later).execute();
    await expect(alloc.uidFor(later)).rejects.toBeInstanceOf(UnknownWorkspaceError);
  });
});
