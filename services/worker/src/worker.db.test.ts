import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { openDatabase, createTestDatabase, type Database, type TestDatabase } from '@codeagent/db';
import { cancelRun, claimRuns, enqueueRun } from '@codeagent/runs';
import { ScheduleWorker, type NotebookRunner, type RunContext, type RunIO } from './worker.js';
import type { Notebook } from './notebook.js';

const log = pino({ level: 'silent' });
const NOTEBOOK: Notebook = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: {},
  cells: [{ cell_type: 'code', source: 'print(1)', metadata: { tags: ['parameters'] }, outputs: [] }],
};

class MemoryIO implements RunIO {
  files = new Map<string, Buffer>([['ws/nb.ipynb', Buffer.from(JSON.stringify(NOTEBOOK))]]);
  logs = new Map<string, string>();
  readNotebook(workspaceId: string, path: string) {
    const f = this.files.get(`ws/${path}`);
    if (!f) return Promise.reject(new Error(`${path} not found in workspace ${workspaceId}`));
    return Promise.resolve(f);
  }
  writeExecutedNotebook(_ws: string, path: string, content: Buffer) {
    this.files.set(`ws/${path}`, content);
    return Promise.resolve();
  }
  writeRunLog(workspaceId: string, runId: string, content: Buffer) {
    const key = `${workspaceId}/${runId}.log`;
    this.logs.set(key, content.toString());
    return Promise.resolve(key);
  }
}

/** Records which notebooks ran; "runs" each in a few ms. */
class CountingRuntime implements NotebookRunner {
  executed: string[] = [];
  async runNotebook(notebook: Notebook) {
    const marker = JSON.stringify(notebook.cells.map((c) => c.source));
    this.executed.push(marker);
    await new Promise((r) => setTimeout(r, 2));
    const failing = marker.includes('1/0');
    return {
      status: failing ? ('error' as const) : ('ok' as const),
      notebook: {
        ...notebook,
        cells: notebook.cells.map((c) => ({
          ...c,
          outputs: failing ? [{ output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero' }] : [],
        })),
      },
      duration_ms: 2,
    };
  }
}

/** Holds every run of `held` until released; the others run at once. */
class HoldingRuntime implements NotebookRunner {
  started: string[] = [];
  private readonly inner = new CountingRuntime();
  private release!: () => void;
  private readonly released = new Promise<void>((r) => (this.release = r));
  constructor(private readonly held: string) {}
  async runNotebook(notebook: Notebook, _timeoutSeconds: number, context?: RunContext) {
    this.started.push(context?.workspaceId ?? '');
    if (context?.workspaceId === this.held) await this.released;
    return this.inner.runNotebook(notebook);
  }
  letGo(): void {
    this.release();
  }
}

describe(`schedule worker (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let second: Database;
  let workspaceId: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    // A second connection pool, as a second worker process would have (PGlite has one session).
    second = t.url ? await openDatabase({ databaseUrl: t.url }) : t.database;
    workspaceId = (await t.database.db.insertInto('workspaces').values({ name: 'runs' }).returning('id').executeTakeFirstOrThrow()).id;
  });
  afterAll(async () => {
    if (second !== t.database) await second.close();
    await t.drop();
  });

  const runsById = async (ids: string[]) => t.database.db.selectFrom('runs').selectAll().where('id', 'in', ids).execute();

  it('executes each of 200 due runs exactly once with two workers', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      ids.push((await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb', parameters: { i } })).id);
    }
    const io = new MemoryIO();
    const runtime = new CountingRuntime();
    const workers = [
      new ScheduleWorker({ db: t.database.db, io, runtime, log, workerId: 'w1', concurrency: 8, pollMs: 5 }),
      new ScheduleWorker({ db: second.db, io, runtime, log, workerId: 'w2', concurrency: 8, pollMs: 5 }),
    ];
    workers.forEach((w) => w.start());
    const deadline = Date.now() + 60_000;
    for (;;) {
      const open = await t.database.db.selectFrom('runs').select('id').where('id', 'in', ids).where('status', 'in', ['queued', 'running']).execute();
      if (open.length === 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.all(workers.map((w) => w.stop()));

    const runs = await runsById(ids);
    expect(runs.every((r) => r.status === 'succeeded')).toBe(true);
    // every run's parameters were executed exactly once
    const perRun = ids.map((_, i) => runtime.executed.filter((m) => m.includes(`loads(\\"${i}\\")`)).length);
    expect(runtime.executed).toHaveLength(200);
    expect(perRun.every((n) => n === 1)).toBe(true);
    expect(io.logs.size).toBe(200);
    if (t.target === 'postgres') {
      // both workers took part
      expect(new Set(runs.map((r) => r.worker_id))).toEqual(new Set(['w1', 'w2']));
    }
  });

  it('records output path, log and the first error of a failing notebook', async () => {
    const io = new MemoryIO();
    io.files.set('ws/dir/bad.ipynb', Buffer.from(JSON.stringify({ ...NOTEBOOK, cells: [{ cell_type: 'code', source: '1/0', metadata: {} }] })));
    const ok = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb', parameters: { alpha: 0.5, name: 'x"y' } });
    const bad = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'dir/bad.ipynb' });
    const missing = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nope.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io, runtime: new CountingRuntime(), log, concurrency: 3 });
    await w.tick();
    await w.drain();
    const [rOk, rBad, rMissing] = await Promise.all([ok, bad, missing].map(async (r) => (await runsById([r.id]))[0]!));
    expect(rOk).toMatchObject({ status: 'succeeded', output_path: `nb.runs/${ok.id}.ipynb`, log_key: `${workspaceId}/${ok.id}.log`, error: null });
    expect(rOk!.finished_at).not.toBeNull();
    const executed = JSON.parse(io.files.get(`ws/nb.runs/${ok.id}.ipynb`)!.toString()) as Notebook;
    expect(executed.cells[1]!.metadata?.tags).toEqual(['injected-parameters']);
    expect((executed.cells[1]!.source as string[]).join('')).toContain('alpha = __import__("json").loads("0.5")');
    expect(rBad).toMatchObject({ status: 'failed', error: 'ZeroDivisionError: division by zero', output_path: `dir/bad.runs/${bad.id}.ipynb` });
    expect(rMissing).toMatchObject({ status: 'failed', output_path: null });
    expect(rMissing!.error).toContain('nope.ipynb not found');
    const events = io.logs
      .get(`${workspaceId}/${ok.id}.log`)!
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; time: string });
    expect(events.map((e) => e.event)).toEqual(['claimed', 'started', 'executed', 'stored', 'finished']);
    expect(events.every((e) => !Number.isNaN(Date.parse(e.time)))).toBe(true);
  });

  it('fails a run whose worker died (lease expired) and keeps working', async () => {
    const orphan = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    // A worker claims it and dies: no heartbeat, no completion.
    const claimed = await claimRuns(t.database.db, 'dead-worker', 1, 1);
    expect(claimed.map((r) => r.id)).toEqual([orphan.id]);
    await new Promise((r) => setTimeout(r, 1500));
    const fresh = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io: new MemoryIO(), runtime: new CountingRuntime(), log });
    await w.tick();
    await w.drain();
    const [dead] = await runsById([orphan.id]);
    expect(dead).toMatchObject({ status: 'failed' });
    expect(dead!.error).toMatch(/lease of dead-worker expired/);
    const [next] = await runsById([fresh.id]);
    expect(next!.status).toBe('succeeded');
  });

  /** MemoryIO whose run-log write waits until let go: the run is then finishing (its lease no longer renewed). */
  class HeldLogIO extends MemoryIO {
    private letGoLog!: () => void;
    readonly logHeld = new Promise<void>((r) => (this.letGoLog = r));
    logWaiting = false;
    override async writeRunLog(workspaceId: string, runId: string, content: Buffer) {
      this.logWaiting = true;
      await this.logHeld;
      return super.writeRunLog(workspaceId, runId, content);
    }
    letGo(): void {
      this.letGoLog();
    }
  }
  const waitFor = async (what: () => boolean | Promise<boolean>) => {
    const deadline = Date.now() + 30_000;
    while (!(await what())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('a run cancelled while it finishes stays cancelled and keeps its log and executed notebook', async () => {
    const io = new HeldLogIO();
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io, runtime: new CountingRuntime(), log, concurrency: 1 });
    await w.tick();
    await waitFor(() => io.logWaiting);
    expect(await cancelRun(t.database.db, workspaceId, run.id)).toBeDefined();
    io.letGo();
    await w.drain();
    const [row] = await runsById([run.id]);
    // The log used to be stored but not recorded (GET …/log 404), the notebook not at all (never purged).
    expect(row).toMatchObject({ status: 'cancelled', log_key: `${workspaceId}/${run.id}.log`, output_path: `nb.runs/${run.id}.ipynb` });
    expect(io.logs.get(`${workspaceId}/${run.id}.log`)).toContain('"finished"');
  });

  it('a run whose lease expired while it finished stays failed and keeps its log and executed notebook', async () => {
    const io = new HeldLogIO();
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: t.database.db, io, runtime: new CountingRuntime(), log, concurrency: 1, workerId: 'slow-finisher' });
    await w.tick();
    await waitFor(() => io.logWaiting);
    await t.database.db
      .updateTable('runs')
      .set({ status: 'failed', error: 'the worker running it stopped responding (lease of slow-finisher expired)', finished_at: new Date() })
      .where('id', '=', run.id)
      .execute();
    io.letGo();
    await w.drain();
    const [row] = await runsById([run.id]);
    expect(row).toMatchObject({ status: 'failed', log_key: `${workspaceId}/${run.id}.log`, output_path: `nb.runs/${run.id}.ipynb` });
    expect(row!.error).toMatch(/lease of slow-finisher expired/);
  });

  /** The worker's database, whose next `failures` updates fail as a dropped connection does. */
  function flakyDb(failures: { left: number }) {
    const db = t.database.db;
    return new Proxy(db, {
      get(target, prop) {
        if (prop === 'updateTable' && failures.left > 0) {
          failures.left--;
          return () => {
            throw new Error('Connection terminated unexpectedly');
          };
        }
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  it('records a run’s end through a database that fails for a moment', async () => {
    const io = new HeldLogIO();
    const failures = { left: 0 };
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: flakyDb(failures), io, runtime: new CountingRuntime(), log, concurrency: 1 });
    await w.tick();
    await waitFor(() => io.logWaiting);
    failures.left = 2;
    io.letGo();
    await w.drain();
    expect(failures.left).toBe(0);
    const [row] = await runsById([run.id]);
    expect(row).toMatchObject({ status: 'succeeded', log_key: `${workspaceId}/${run.id}.log` });
  });

  it('a database that keeps failing while a run ends does not end the worker: its slot frees and the next run goes through', async () => {
    const io = new HeldLogIO();
    const failures = { left: 0 };
    const lost = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const w = new ScheduleWorker({ db: flakyDb(failures), io, runtime: new CountingRuntime(), log, concurrency: 1 });
    await w.tick();
    await waitFor(() => io.logWaiting);
    // Every try fails (the rejection used to go unhandled: the process ended, every run in it lost).
    failures.left = 1000;
    io.letGo();
    await w.drain();
    expect(w.running).toBe(0);
    expect((await runsById([lost.id]))[0]!.status).toBe('running'); // until its lease expires
    failures.left = 0;
    await t.database.db.updateTable('runs').set({ status: 'failed', finished_at: new Date() }).where('id', '=', lost.id).execute();
    const next = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await w.tick();
    await w.drain();
    expect((await runsById([next.id]))[0]!.status).toBe('succeeded');
  });

  it('turns a schedule that missed many ticks into one catch-up run', async () => {
    const s = await t.database.db
      .insertInto('schedules')
      .values({ workspace_id: workspaceId, notebook_path: 'nb.ipynb', cron: '* * * * *', timezone: 'UTC', next_run_at: new Date(Date.now() - 30 * 60_000) })
      .returning('id')
      .executeTakeFirstOrThrow();
    const w = new ScheduleWorker({ db: t.database.db, io: new MemoryIO(), runtime: new CountingRuntime(), log });
    await w.tick();
    await w.tick();
    await w.drain();
    const runs = await t.database.db.selectFrom('runs').selectAll().where('schedule_id', '=', s.id).execute();
    expect(runs).toHaveLength(1);
    expect(runs[0]!.status).toBe('succeeded');
    const after = await t.database.db.selectFrom('schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    expect(after.next_run_at!.getTime()).toBeGreaterThan(Date.now());
    expect(after.last_run_at).not.toBeNull();
  });

  it('long runs of one workspace never hold every slot: another workspace’s run starts while they run (MAX_RUNNING_RUNS_PER_WORKSPACE)', async () => {
    const db = t.database.db;
    const hog = (await db.insertInto('workspaces').values({ name: 'hog' }).returning('id').executeTakeFirstOrThrow()).id;
    const other = (await db.insertInto('workspaces').values({ name: 'other' }).returning('id').executeTakeFirstOrThrow()).id;
    const runtime = new HoldingRuntime(hog);
    // Two workers, two slots each: without the cap the hog's four runs would take all four.
    const workers = [
      new ScheduleWorker({ db, io: new MemoryIO(), runtime, log, workerId: 'cap-1', concurrency: 2, maxRunningPerWorkspace: 1, pollMs: 5 }),
      new ScheduleWorker({ db: second.db, io: new MemoryIO(), runtime, log, workerId: 'cap-2', concurrency: 2, maxRunningPerWorkspace: 1, pollMs: 5 }),
    ];
    const hogRuns: string[] = [];
    for (let i = 0; i < 4; i++) hogRuns.push((await enqueueRun(db, { workspaceId: hog, notebookPath: 'nb.ipynb' })).id);
    workers.forEach((w) => w.start());
    try {
      const statuses = async (ids: string[]) => (await runsById(ids)).map((r) => r.status).sort();
      const until = async (what: () => Promise<boolean>) => {
        const deadline = Date.now() + 30_000;
        while (!(await what())) {
          if (Date.now() > deadline) throw new Error('timed out');
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      await until(async () => (await statuses(hogRuns)).includes('running'));
      const lone = await enqueueRun(db, { workspaceId: other, notebookPath: 'nb.ipynb' });
      await until(async () => (await statuses([lone.id]))[0] === 'succeeded');
      // Many ticks of both workers later, still one of the hog's runs at a time.
      expect(await statuses(hogRuns)).toEqual(['queued', 'queued', 'queued', 'running']);
      expect(runtime.started.filter((w) => w === hog)).toHaveLength(1);
      runtime.letGo();
      await until(async () => (await statuses(hogRuns)).every((s) => s === 'succeeded'));
    } finally {
      runtime.letGo();
      await Promise.all(workers.map((w) => w.stop()));
    }
  });

  it('a flood of runs in one workspace delays another workspace’s run by one claim cycle at most', async () => {
    const db = t.database.db;
    const flooder = (await db.insertInto('workspaces').values({ name: 'flooder' }).returning('id').executeTakeFirstOrThrow()).id;
    const quiet = (await db.insertInto('workspaces').values({ name: 'quiet' }).returning('id').executeTakeFirstOrThrow()).id;
    const floodIds: string[] = [];
    for (let i = 0; i < 300; i++) floodIds.push((await enqueueRun(db, { workspaceId: flooder, notebookPath: 'nb.ipynb' })).id);
    const runtime = new CountingRuntime();
    const concurrency = 4;
    const workers = [
      new ScheduleWorker({ db, io: new MemoryIO(), runtime, log, workerId: 'fair-1', concurrency, pollMs: 5 }),
      new ScheduleWorker({ db: second.db, io: new MemoryIO(), runtime, log, workerId: 'fair-2', concurrency, pollMs: 5 }),
    ];
    workers.forEach((w) => w.start());
    const finishedFlood = async () =>
      (await db.selectFrom('runs').select('id').where('workspace_id', '=', flooder).where('status', '=', 'succeeded').execute()).length;
    const deadline = Date.now() + 60_000;
    while ((await finishedFlood()) < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const lone = await enqueueRun(db, { workspaceId: quiet, notebookPath: 'nb.ipynb' });
    // Visible to every claim from here on: its commit, not its created_at (the insert's
    // transaction start), before which claims could not see it and rightly took the flood's runs
    // (CI saw 10 of them in that window on a loaded machine).
    const visibleAt = new Date();
    let done;
    while (Date.now() < deadline) {
      done = await db.selectFrom('runs').selectAll().where('id', '=', lone.id).where('status', '=', 'succeeded').executeTakeFirst();
      if (done) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(workers.map((w) => w.stop()));
    expect(done, 'the quiet workspace’s run never ran').toBeDefined();
    const flood = await db.selectFrom('runs').select(['status', 'started_at']).where('workspace_id', '=', flooder).execute();
    // Claimed after the quiet run could be seen but before it: at most the claims then under way, one per slot.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- tsc needs it: `done` is assigned in a loop (TS7005 without it)
    const overtaking = flood.filter((r) => r.started_at && r.started_at >= visibleAt && r.started_at < done!.started_at!);
    expect(overtaking.length).toBeLessThanOrEqual(workers.length * concurrency);
    // Meaningful only if the flood was far from over when the quiet run went through.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- tsc needs it: `done` is assigned in a loop (TS7005 without it)
    const laterOrWaiting = flood.filter((r) => r.status === 'queued' || (r.started_at && r.started_at > done!.started_at!));
    expect(laterOrWaiting.length).toBeGreaterThan(100);
  });
});
