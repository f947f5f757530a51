import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaExceededError } from '@codeagent/service-kit';
import { WorkspaceFiles, foldUsage, storedBytes } from './files.js';
import { createTestFiles, type TestFiles } from './testing.js';

/**
 * The running totals of stored bytes (migration 012, decision 0200) that WORKSPACE_QUOTA_BYTES is
 * checked against: always what the workspace's objects, versions and trash hold, whatever wrote
 * them, and a few rows to read however many files the workspace has.
 */
describe(`stored bytes as a running total (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  beforeAll(async () => {
    fixture = await createTestFiles('usage');
    ({ files } = fixture);
  });
  afterAll(async () => {
    await fixture.close();
  });

  const db = () => fixture.t.database.db;
  const write = (f: WorkspaceFiles, ws: string, path: string, size: number) => f.put(ws, path, Readable.from([Buffer.alloc(size, 'x')]), { actor: null });
  /** What the workspace stores, summed over its rows: what the total stands for. */
  const counted = async (ws: string): Promise<number> => {
    const { rows } = await sql<{ n: string }>`
      SELECT (SELECT coalesce(sum(size), 0) FROM objects WHERE workspace_id = ${ws})
           + (SELECT coalesce(sum(size), 0) FROM object_versions WHERE workspace_id = ${ws})
           + (SELECT coalesce(sum(size), 0) FROM trash_items WHERE workspace_id = ${ws}) AS n`.execute(db());
    return Number(rows[0]!.n);
  };
  const usageRows = async (ws: string): Promise<number> =>
    Number(
      (
        await db()
          .selectFrom('workspace_usage')
          .select(sql<string>`count(*)`.as('n'))
          .where('workspace_id', '=', ws)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('equals what the objects, versions and trash hold after every kind of write', async () => {
    const ws = await fixture.newWorkspace('every-write');
    const other = await fixture.newWorkspace('beside');
    await write(files, other, 'keep.bin', 999);
    const steps: [string, () => Promise<unknown>][] = [
      ['a new file', () => write(files, ws, 'a.bin', 100)],
      ['another', () => write(files, ws, 'd/b.bin', 30)],
      ['an empty file', () => write(files, ws, 'd/empty', 0)],
      ['a replace (the old content becomes a version)', () => write(files, ws, 'a.bin', 250)],
      ['a rename', () => files.rename(ws, 'd/b.bin', 'd/c.bin', null)],
      ['a rename onto a file (its content becomes a version)', () => files.rename(ws, 'd/c.bin', 'a.bin', null)],
      ['a restore of a version', async () => files.restoreVersion(ws, 'a.bin', (await files.versions(ws, 'a.bin')).items[2]!.version_id, null)],
      ['a delete to the trash', () => files.remove(ws, 'a.bin', null)],
      ['a restore from the trash', async () => files.restoreTrash(ws, (await files.trash(ws, 10, undefined)).items[0]!.id, null)],
      ['another delete', () => write(files, ws, 'gone.bin', 70).then(() => files.remove(ws, 'gone.bin', null))],
      ['a purge of the trash', async () => files.purgeTrash(ws, (await files.trash(ws, 10, undefined)).items[0]!.id)],
      ['version retention', () => files.pruneVersions({ keepCount: 1, limit: 100 })],
      ['a purge of paths with their versions', () => files.purgePaths(ws, ['a.bin'])],
      ['a fold', () => foldUsage(db(), 100)],
      ['a write after the fold', () => write(files, ws, 'after.bin', 5)],
    ];
    for (const [step, run] of steps) {
      await run();
      expect({ step, bytes: await storedBytes(db(), ws) }).toEqual({ step, bytes: await counted(ws) });
    }
    expect(await storedBytes(db(), ws)).toBe(5 + 0); // after.bin and d/empty are all that is left
    expect(await storedBytes(db(), other)).toBe(999);
  });

  it('folds every workspace to one row, and no fold changes a total', async () => {
    const ws = await fixture.newWorkspace('folds');
    for (let i = 0; i < 20; i++) await write(files, ws, `f${i}`, i + 1);
    for (let i = 0; i < 5; i++) await files.remove(ws, `f${i}`, null);
    expect(await usageRows(ws)).toBeGreaterThan(20);
    const before = await storedBytes(db(), ws);
    expect(before).toBe(210);
    expect(await foldUsage(db(), 1000)).toBeGreaterThanOrEqual(1);
    expect(await usageRows(ws)).toBe(1);
    expect(await storedBytes(db(), ws)).toBe(before);
    // Nothing left to fold: a second pass touches nothing.
    expect(await foldUsage(db(), 1000)).toBe(0);
    expect(await usageRows(ws)).toBe(1);
  });

  it('keeps a workspace with a quota to a few rows, however many writes it takes', async () => {
    const ws = await fixture.newWorkspace('quota-rows');
    const quota = new WorkspaceFiles(db(), fixture.store, undefined, { quotaBytes: 1_000_000 });
    for (let i = 0; i < 150; i++) await write(quota, ws, `n${i}`, 10);
    expect(await usageRows(ws)).toBeLessThanOrEqual(65);
    expect(await storedBytes(db(), ws)).toBe(1500);
  });

  it('stays exact under parallel writes, quota checks and folds', async () => {
    const [a, b] = [await fixture.newWorkspace('parallel-a'), await fixture.newWorkspace('parallel-b')];
    const QUOTA = 20_000;
    const quota = new WorkspaceFiles(db(), fixture.store, undefined, { quotaBytes: QUOTA });
    let refused = 0;
    let folding = true;
    const folds = (async () => {
      while (folding) await foldUsage(db(), 10);
    })();
    await Promise.all(
      Array.from({ length: 240 }, async (_, i) => {
        const ws = i % 2 === 0 ? a : b;
        try {
          // Every other writer checks the quota (and folds past 64 rows); the rest only append.
          await write(i % 4 < 2 ? quota : files, ws, `p${i % 60}`, 100 + (i % 7) * 50);
          if (i % 9 === 0) await files.remove(ws, `p${i % 60}`, null).catch(() => undefined);
        } catch (err) {
          if (!(err instanceof QuotaExceededError)) throw err;
          refused++;
        }
      }),
    );
    folding = false;
    await folds;
    for (const ws of [a, b]) expect(await storedBytes(db(), ws)).toBe(await counted(ws));
    expect(refused).toBeGreaterThan(0); // the quota was reached, under concurrency
  });
});
