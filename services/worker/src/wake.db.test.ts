import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { RUNS_CHANNEL, cancelRun, enqueueDueSchedules, enqueueRun, notifyWorkers } from '@codeagent/runs';
import { ScheduleWorker, WARM_AHEAD_MS, type NotebookRunner, type RunIO } from './worker.js';
import type { Notebook } from './notebook.js';

const log = pino({ level: 'silent' });
const NOTEBOOK: Notebook = { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [{ cell_type: 'code', source: 'print(1)', metadata: {}, outputs: [] }] };
/** Far longer than any wait below: a run that starts did not wait for the poll. */
const POLL_MS = 600_000;

const io: RunIO = {
  readNotebook: () => Promise.resolve(Buffer.from(JSON.stringify(NOTEBOOK))),
  writeExecutedNotebook: () => Promise.resolve(),
  writeRunLog: (ws, id) => Promise.resolve(`${ws}/${id}.log`),
};

/** "Executes" a run until released or aborted; remembers the abort. */
class HeldRuntime implements NotebookRunner {
  readonly aborted = new Set<string>();
  private releases: (() => void)[] = [];
  async runNotebook(notebook: Notebook, _t: number, _c?: unknown, signal?: AbortSignal, requestId?: string) {
    await new Promise<void>((resolve) => {
      this.releases.push(resolve);
      signal?.addEventListener('abort', () => {
        this.aborted.add(requestId ?? '');
        resolve();
      });
    });
    return { status: 'ok' as const, notebook, duration_ms: 1 };
  }
  releaseAll() {
    for (const r of this.releases.splice(0)) r();
  }
  /** The runtime's `warm_up` calls: which workspace, when. */
  readonly warmed: { workspaceId: string; at: number }[] = [];
  warmUp(workspaceId: string) {
    this.warmed.push({ workspaceId, at: Date.now() });
    return Promise.resolve(true);
  }
}

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

describe(`the worker wakes on NOTIFY (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let workspaceId: string;
  let worker: ScheduleWorker;
  let runtime: HeldRuntime;
  const status = async (id: string) => (await t.database.db.selectFrom('runs').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;

  beforeAll(async () => {
    t = await createTestDatabase();
    workspaceId = (await t.database.db.insertInto('workspaces').values({ name: 'wake' }).returning('id').executeTakeFirstOrThrow()).id;
  });
  afterAll(async () => {
    await t.drop();
  });

  /** A worker that polls only every 10 minutes, listening and idle (its start-up ticks done). */
  async function startWorker(concurrency = 2, pollMs = POLL_MS): Promise<ScheduleWorker> {
    runtime = new HeldRuntime();
    worker = new ScheduleWorker({
      db: t.database.db,
      io,
      runtime,
      log,
      pollMs,
      concurrency,
      listen: t.database.listen.bind(t.database),
      leaseSeconds: 60,
    });
    worker.start();
    await until('the worker listens', () => worker.listening);
    await worker.idle();
    return worker;
  }
  afterEach(async () => {
    runtime.releaseAll();
    await worker.stop(5000);
    await t.database.db.deleteFrom('runs').execute();
    await t.database.db.deleteFrom('schedules').execute();
  });

  it('claims a queued run at once, without waiting for the poll', async () => {
    await startWorker();
    const before = worker.ticks;
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the run is running', async () => (await status(run.id)) === 'running');
    expect(worker.ticks).toBeGreaterThan(before);
    expect(worker.running).toBe(1);
  });

  it('sends nothing for a rolled-back enqueue: the worker does not tick for it', async () => {
    await startWorker();
    const before = worker.ticks;
    await t.database.db
      .transaction()
      .execute(async (trx) => {
        await enqueueRun(trx, { workspaceId, notebookPath: 'nb.ipynb' });
        throw new Error('rollback');
      })
      .catch(() => undefined);
    // A committed notification sent after the rolled-back one arrives after it would have.
    const marker = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the later run is running', async () => (await status(marker.id)) === 'running');
    expect(worker.ticks - before).toBe(1);
    expect(await t.database.db.selectFrom('runs').select('id').execute()).toHaveLength(1);
  });

  it('stops a running run at once when it is cancelled', async () => {
    await startWorker();
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the run is running', async () => (await status(run.id)) === 'running');
    await cancelRun(t.database.db, workspaceId, run.id);
    await until('the runtime call is aborted', () => runtime.aborted.has(`run-${run.id}`));
    await until('the slot is free', () => worker.running === 0);
  });

  it('fires a schedule when it is due (told of it by NOTIFY), not at the next poll', async () => {
    await startWorker();
    const schedule = await t.database.db.transaction().execute(async (trx) => {
      const row = await trx
        .insertInto('schedules')
        .values({
          workspace_id: workspaceId,
          notebook_path: 'nb.ipynb',
          cron: '* * * * * *',
          timezone: 'UTC',
          enabled: true,
          next_run_at: new Date(Date.now() + 1500),
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await notifyWorkers(trx);
      return row;
    });
    await until(
      'the scheduled run is running',
      async () =>
        (await t.database.db.selectFrom('runs').select('status').where('schedule_id', '=', schedule.id).where('status', '=', 'running').execute()).length > 0,
    );
  });

  it('warms a workspace WARM_AHEAD_MS before its schedule fires, once, never earlier; not for a disabled schedule or a deleted workspace (decision 0212)', async () => {
    await startWorker();
    const workspace = async (name: string, deleted = false) =>
      (
        await t.database.db
          .insertInto('workspaces')
          .values({ name, ...(deleted ? { deleted_at: new Date() } : {}) })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
    const [soon, later, off, gone] = [await workspace('soon'), await workspace('later'), await workspace('off'), await workspace('gone', true)];
    const now = Date.now();
    const laterDue = now + WARM_AHEAD_MS + 1500;
    await t.database.db.transaction().execute(async (trx) => {
      const schedule = (ws: string, at: number, enabled = true) => ({
        workspace_id: ws,
        notebook_path: 'nb.ipynb',
        cron: '0 0 1 1 *',
        timezone: 'UTC',
        enabled,
        next_run_at: new Date(at),
      });
      await trx
        .insertInto('schedules')
        .values([
          // Two schedules of one workspace at one time: one warm-up.
          schedule(soon, now + WARM_AHEAD_MS - 5000),
          schedule(soon, now + WARM_AHEAD_MS - 5000),
          schedule(later, laterDue),
          schedule(off, now + 5000, false),
          schedule(gone, now + 5000),
        ])
        .execute();
      await notifyWorkers(trx);
    });
    await until('the workspace due soon is warmed', () => runtime.warmed.length > 0);
    expect(runtime.warmed.map((w) => w.workspaceId)).toEqual([soon]);
    // More ticks (a run queued and finished elsewhere) warm nothing twice.
    for (let i = 0; i < 3; i++) await notifyWorkers(t.database.db);
    await until('the later workspace is warmed', () => runtime.warmed.some((w) => w.workspaceId === later));
    const warmedLater = runtime.warmed.find((w) => w.workspaceId === later)!;
    expect(warmedLater.at).toBeGreaterThanOrEqual(laterDue - WARM_AHEAD_MS);
    // …at its own time, not when the earlier workspace's schedule fires (13.5 s later).
    expect(warmedLater.at).toBeLessThan(now + WARM_AHEAD_MS - 5000);
    expect(runtime.warmed.map((w) => w.workspaceId).sort()).toEqual([soon, later].sort());
  });

  it('starts the next queued run as soon as a slot is free', async () => {
    await startWorker(1);
    const first = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    const second = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the first run is running', async () => (await status(first.id)) === 'running');
    expect(await status(second.id)).toBe('queued');
    runtime.releaseAll();
    await until('the second run is running', async () => (await status(second.id)) === 'running');
    expect(await status(first.id)).toBe('succeeded');
  });

  it('listens again after its connection is killed, and still wakes', async () => {
    await startWorker();
    const killed = await sql<{
      n: number;
    }>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE ${`LISTEN ${RUNS_CHANNEL}%`}`.execute(
      t.database.db,
    );
    expect(killed.rows[0]?.n).toBe(1);
    await until('the worker has noticed', () => !worker.listening);
    await until('the worker listens again', () => worker.listening);
    await worker.idle();
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the run is running', async () => (await status(run.id)) === 'running');
  });

  it('collapses a flood of notifications into a few ticks (payloads are ignored)', async () => {
    await startWorker();
    const before = worker.ticks;
    await sql`SELECT pg_notify(${RUNS_CHANNEL}, 'x' || g) FROM generate_series(1, 2000) g`.execute(t.database.db);
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await until('the run is running', async () => (await status(run.id)) === 'running');
    await worker.idle();
    expect(worker.ticks - before).toBeLessThan(50);
  });

  it('sleeps while idle and listening: a tick every ten polls, not every poll (decision 0202)', async () => {
    await startWorker(2, 50);
    const before = worker.ticks;
    await new Promise((r) => setTimeout(r, 2000));
    // Every 500 ms: about 4 ticks in 2 s (every 50 ms, as without a listener: about 40).
    expect(worker.ticks - before).toBeGreaterThanOrEqual(2);
    expect(worker.ticks - before).toBeLessThanOrEqual(8);
  });

  it('fails a lease when it expires, though no poll is due for minutes', async () => {
    // A run held by a worker that died: its lease expires in a second.
    const run = await enqueueRun(t.database.db, { workspaceId, notebookPath: 'nb.ipynb' });
    await t.database.db
      .updateTable('runs')
      .set({ status: 'running', worker_id: 'gone', started_at: new Date(), lease_expires_at: sql<Date>`now() + interval '1 second'` })
      .where('id', '=', run.id)
      .execute();
    await startWorker();
    expect(await status(run.id)).toBe('running');
    const started = Date.now();
    await until('the run is failed', async () => (await status(run.id)) === 'failed');
    // At its expiry (within the slack of the check), not at the next poll ten minutes away.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('starts a scheduled run another worker enqueued at once (its enqueue tells every worker)', async () => {
    await startWorker();
    // Due already, and nobody told: this worker, asleep until its fallback tick, does not know.
    await t.database.db
      .insertInto('schedules')
      .values({
        workspace_id: workspaceId,
        notebook_path: 'nb.ipynb',
        cron: '0 0 1 1 *',
        timezone: 'UTC',
        enabled: true,
        next_run_at: new Date(Date.now() - 1000),
      })
      .execute();
    // Another worker's tick (busy, so it takes none of the runs itself) enqueues it.
    const tick = await enqueueDueSchedules(t.database.db);
    expect(tick.enqueued).toHaveLength(1);
    await until('the scheduled run is running', async () => (await status(tick.enqueued[0]!.id)) === 'running');
  });
});
