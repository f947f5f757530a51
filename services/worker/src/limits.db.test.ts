import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { enqueueRun } from '@codeagent/runs';
import { LocalObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from '@codeagent/files';
import { ScheduleWorker, type NotebookRunner, type RunIO } from './worker.js';
import { platformRunIO } from './server.js';
import type { Notebook } from './notebook.js';

const NOTEBOOK: Notebook = { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [{ cell_type: 'code', source: 'print(1)', metadata: {}, outputs: [] }] };
/** Executes nothing; answers with outputs that make the executed notebook large. */
const bulkyRuntime: NotebookRunner = {
  runNotebook: (nb) =>
    Promise.resolve({
      status: 'ok',
      notebook: { ...nb, cells: nb.cells.map((c) => ({ ...c, outputs: [{ output_type: 'stream', name: 'stdout', text: 'y'.repeat(4000) }] as never })) },
      duration_ms: 1,
    }),
};

describe(`worker limits (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let store: LocalObjectStore;
  beforeAll(async () => {
    t = await createTestDatabase();
    store = new LocalObjectStore(mkdtempSync(join(tmpdir(), 'codeagent-worker-limits-')));
    await store.init();
  });
  afterAll(async () => {
    await t.drop();
  });
  const workspace = async () => (await t.database.db.insertInto('workspaces').values({ name: 'limits' }).returning('id').executeTakeFirstOrThrow()).id;

  it('fails a run whose executed notebook would pass WORKSPACE_QUOTA_BYTES, storing nothing', async () => {
    const ws = await workspace();
    const files = new WorkspaceFiles(t.database.db, store, undefined, { quotaBytes: 3000 });
    await files.put(ws, 'nb.ipynb', Readable.from([Buffer.from(JSON.stringify(NOTEBOOK))]), { actor: null });
    const logs = new Map<string, Buffer>();
    const io: RunIO = {
      ...platformRunIO(files, 'http://127.0.0.1:9', 'unused'),
      writeRunLog: (w, r, c) => {
        logs.set(r, c);
        return Promise.resolve(`${w}/${r}.log`);
      },
    };
    const run = await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io, runtime: bulkyRuntime, log: pino({ level: 'silent' }) });
    await w.tick();
    await w.drain();
    const row = await t.database.db.selectFrom('runs').selectAll().where('id', '=', run.id).executeTakeFirstOrThrow();
    expect(row.status).toBe('failed');
    expect(row.error).toMatch(/WORKSPACE_QUOTA_BYTES \(3000\)/);
    expect(row.output_path).toBeNull();
    expect((await files.list(ws, 'nb.runs/', 10, undefined)).items).toEqual([]);
    expect(logs.get(run.id)!.toString()).toContain('"event":"error"');
  });

  it("fails a run whose results meet a full disk with the operator's words, not the file system's code", async () => {
    const ws = await workspace();
    const files = new WorkspaceFiles(t.database.db, store);
    await files.put(ws, 'nb.ipynb', Readable.from([Buffer.from(JSON.stringify(NOTEBOOK))]), { actor: null });
    const io: RunIO = {
      ...platformRunIO(files, 'http://127.0.0.1:9', 'unused'),
      // What the local store's write gives on a full file system (disk-full.db.test.ts has the real one).
      writeExecutedNotebook: () => Promise.reject(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })),
      writeRunLog: (w, r) => Promise.resolve(`${w}/${r}.log`),
    };
    const run = await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io, runtime: bulkyRuntime, log: pino({ level: 'silent' }) });
    await w.tick();
    await w.drain();
    const row = await t.database.db.selectFrom('runs').selectAll().where('id', '=', run.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'failed', output_path: null });
    expect(row.error).toBe("the platform's disk is full: the run's results could not be stored; ask an administrator to free space");
  });

  it('says in its log when a schedule tick is skipped because the workspace queue is full', async () => {
    const ws = await workspace();
    for (let i = 0; i < 2; i++) await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'nb.ipynb' });
    const s = await t.database.db
      .insertInto('schedules')
      .values({ workspace_id: ws, notebook_path: 'nb.ipynb', cron: '0 * * * *', timezone: 'UTC', next_run_at: new Date(Date.now() - 1000) })
      .returning('id')
      .executeTakeFirstOrThrow();
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    // concurrency 0 slots free: the worker only enqueues, so the two runs stay queued.
    const w = new ScheduleWorker({ db: t.database.db, io: {} as RunIO, runtime: bulkyRuntime, log, concurrency: 0, limits: { maxQueuedRunsPerWorkspace: 2 } });
    await w.tick();
    const skipped = lines.map((l) => JSON.parse(l) as { msg: string; schedule_id?: string; queued?: number }).find((l) => l.schedule_id === s.id);
    expect(skipped).toMatchObject({ queued: 2 });
    expect(skipped!.msg).toMatch(/skipped.*MAX_QUEUED_RUNS_PER_WORKSPACE/);
    expect(await t.database.db.selectFrom('runs').select('id').where('schedule_id', '=', s.id).execute()).toEqual([]);
  });
});
