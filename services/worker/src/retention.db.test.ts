import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { sql } from 'kysely';
import type { TestDatabase } from '@codeagent/db';
import type { LocalObjectStore } from '@codeagent/storage';
import { storedBytes, type WorkspaceFiles } from '@codeagent/files';
import { createTestFiles, type TestFiles } from '@codeagent/files/testing';
import { applyRetention, type RetentionSettings } from './retention.js';
import { executedNotebookPath } from './notebook.js';

const log = pino({ level: 'silent' });
const DAY = 24 * 3600 * 1000;

describe(`retention of runs and versions (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let store: LocalObjectStore;
  let files: WorkspaceFiles;
  let fixture: TestFiles;
  let ws: string;
  beforeAll(async () => {
    fixture = await createTestFiles('retention');
    ({ t, store, files } = fixture);
  });
  afterAll(async () => {
    await fixture.close();
  });
  beforeEach(async () => {
    ws = await fixture.newWorkspace('retention');
  });

  const retention = (settings: Partial<RetentionSettings>, extra: { batchSize?: number; maxBatches?: number } = {}) =>
    applyRetention({ db: t.database.db, files, store, log, settings: { runDays: 0, versionCount: 0, versionDays: 0, ...settings }, ...extra });
  const write = (path: string, content: string) => files.put(ws, path, Readable.from([Buffer.from(content)]), { actor: null });

  /** A run as the worker leaves it: row, executed notebook beside the source, log in run_log. */
  async function finishedRun(status: 'succeeded' | 'failed' | 'cancelled' | 'running' | 'queued', finishedDaysAgo: number | null) {
    const row = await t.database.db
      .insertInto('runs')
      .values({
        workspace_id: ws,
        notebook_path: 'jobs/nb.ipynb',
        status,
        finished_at: finishedDaysAgo === null ? null : new Date(Date.now() - finishedDaysAgo * DAY),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const outputPath = executedNotebookPath('jobs/nb.ipynb', row.id);
    await write(outputPath, `{"run":"${row.id}"}`);
    const logKey = `${ws}/${row.id}.log`;
    await store.put('run_log', logKey, Readable.from([Buffer.from('{"event":"finished"}\n')]));
    await t.database.db.updateTable('runs').set({ output_path: outputPath, log_key: logKey }).where('id', '=', row.id).execute();
    return { id: row.id, outputPath, logKey };
  }
  const runExists = async (id: string) => (await t.database.db.selectFrom('runs').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
  const objectExists = async (path: string) => (await files.list(ws, path, 1, undefined)).items.some((o) => o.path === path);

  it('removes finished runs older than RUN_RETENTION_DAYS with their executed notebook and log, nothing else', async () => {
    const old = [await finishedRun('succeeded', 40), await finishedRun('failed', 31), await finishedRun('cancelled', 90)];
    const recent = await finishedRun('succeeded', 2);
    const stillRunning = await finishedRun('running', null);
    await write('jobs/nb.ipynb', '{"source":true}');
    const result = await retention({ runDays: 30 });
    expect(result.runs).toBe(3);
    for (const r of old) {
      expect(await runExists(r.id)).toBe(false);
      expect(await objectExists(r.outputPath)).toBe(false);
      expect(await store.head('run_log', r.logKey)).toBeUndefined();
    }
    for (const r of [recent, stillRunning]) {
      expect(await runExists(r.id)).toBe(true);
      expect(await objectExists(r.outputPath)).toBe(true);
      expect(await store.head('run_log', r.logKey)).toBeDefined();
    }
    expect(await objectExists('jobs/nb.ipynb')).toBe(true);
    // Off (0): nothing goes.
    expect((await retention({ runDays: 0 })).runs).toBe(0);
    expect(await runExists(recent.id)).toBe(true);
  });

  it('works in bounded batches', async () => {
    for (let i = 0; i < 5; i++) await finishedRun('succeeded', 100);
    expect((await retention({ runDays: 30 }, { batchSize: 2, maxBatches: 1 })).runs).toBe(2);
    expect((await retention({ runDays: 30 }, { batchSize: 2, maxBatches: 10 })).runs).toBe(3);
    expect((await retention({ runDays: 30 }, { batchSize: 2, maxBatches: 10 })).runs).toBe(0);
  });

  it('keeps the newest VERSION_RETENTION_COUNT versions of each path; the current content is never touched', async () => {
    for (let i = 1; i <= 5; i++) await write('doc.txt', `doc v${i}`);
    for (let i = 1; i <= 2; i++) await write('other.txt', `other v${i}`);
    const before = (await files.versions(ws, 'doc.txt')).items;
    expect(before.filter((v) => !v.current)).toHaveLength(4);
    const result = await retention({ versionCount: 2 });
    expect(result.versions).toBeGreaterThanOrEqual(2);
    const after = (await files.versions(ws, 'doc.txt')).items;
    expect(after.map((v) => v.version_id)).toEqual(before.slice(0, 3).map((v) => v.version_id));
    for (const gone of before.slice(3)) expect(await store.head('version', `${ws}/${gone.version_id}`)).toBeUndefined();
    expect((await files.versions(ws, 'other.txt')).items.filter((v) => !v.current)).toHaveLength(1);
    expect((await files.readAll(ws, 'doc.txt')).toString()).toBe('doc v5');
    const kept = after.find((v) => !v.current)!;
    expect((await store.get('version', `${ws}/${kept.version_id}`)) !== undefined).toBe(true);
  });

  it('removes versions replaced more than VERSION_RETENTION_DAYS ago', async () => {
    await write('aged.txt', 'a1');
    await write('aged.txt', 'a2');
    await write('aged.txt', 'a3');
    const [, newer, older] = (await files.versions(ws, 'aged.txt')).items;
    await t.database.db
      .updateTable('object_versions')
      .set({ replaced_at: new Date(Date.now() - 20 * DAY) })
      .where('id', '=', older!.version_id)
      .execute();
    await retention({ versionDays: 14 });
    expect((await files.versions(ws, 'aged.txt')).items.map((v) => v.version_id).slice(1)).toEqual([newer!.version_id]);
  });

  it('folds the running totals of stored bytes, with no retention setting on, and keeps them exact', async () => {
    for (let i = 0; i < 12; i++) await write(`f${i % 4}`, 'x'.repeat(i + 1));
    const rows = async () =>
      Number(
        (
          await t.database.db
            .selectFrom('workspace_usage')
            .select(sql<string>`count(*)`.as('n'))
            .where('workspace_id', '=', ws)
            .executeTakeFirstOrThrow()
        ).n,
      );
    expect(await rows()).toBeGreaterThan(1);
    await retention({});
    expect(await rows()).toBe(1);
    expect(await storedBytes(t.database.db, ws)).toBe(78); // 1 + 2 + … + 12: four files and eight versions
  });
});
