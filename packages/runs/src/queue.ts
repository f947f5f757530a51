import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely';
import { advisoryXactLock, type DB, type RunRow } from '@codeagent/db';
import { nextRunAfter } from './cron.js';

/**
 * The run queue in PostgreSQL. Every worker may call every function at any time, from
 * several processes: claims use `FOR UPDATE SKIP LOCKED`, so each run and each schedule tick
 * goes to exactly one worker.
 */

export interface EnqueueInput {
  workspaceId: string;
  notebookPath: string;
  parameters?: Record<string, unknown>;
  scheduleId?: string | null;
  createdBy?: string | null;
}

/**
 * The channel on which workers are told that runs or schedules changed (a run queued or
 * cancelled, a schedule created or re-timed): they tick at once instead of at their next poll
 * (docs/decisions/0081-listen-notify.md). Sent inside the writing transaction, so it is
 * delivered only once the change is committed (and not at all when it is rolled back).
 */
export const RUNS_CHANNEL = 'codeagent_runs';

/** Tells every listening worker to look at the queue now (delivered at commit). */
export async function notifyWorkers(db: Kysely<DB>): Promise<void> {
  await sql`SELECT pg_notify(${RUNS_CHANNEL}, '')`.execute(db);
}

/**
 * When a worker's tick has something to do next without being told: the next schedule due (the
 * same schedules enqueueDueSchedules considers, not those of deleted workspaces), the first lease
 * of a running run to expire and, with `warmAfter`, the first schedule due after that time (the
 * next to warm ahead of its run: those due before it are warmed already). One statement.
 */
export async function nextDeadlines(
  db: Kysely<DB>,
  warmAfter?: Date,
): Promise<{ schedule: Date | undefined; lease: Date | undefined; warm: Date | undefined }> {
  const due = (eb: ExpressionBuilder<DB, never>, after?: Date) => {
    let q = eb
      .selectFrom('schedules as s')
      .innerJoin('workspaces as w', 'w.id', 's.workspace_id')
      .select(sql<Date | null>`min(s.next_run_at)`.as('at'))
      .where('s.enabled', '=', true)
      .where('w.deleted_at', 'is', null);
    if (after) q = q.where('s.next_run_at', '>', after);
    return q;
  };
  const row = await db
    .selectNoFrom((eb) => [
      due(eb).as('schedule'),
      eb
        .selectFrom('runs')
        .select(sql<Date | null>`min(lease_expires_at)`.as('at'))
        .where('status', '=', 'running')
        .as('lease'),
      warmAfter ? due(eb, warmAfter).as('warm') : sql<Date | null>`NULL::timestamptz`.as('warm'),
    ])
    .executeTakeFirstOrThrow();
  return { schedule: row.schedule ?? undefined, lease: row.lease ?? undefined, warm: row.warm ?? undefined };
}

/** At most this many workspaces are warmed ahead of their schedules per tick (schedulesDueSoon). */
export const DUE_SOON_WORKSPACES = 100;

/**
 * The workspaces with an enabled schedule due after `from` and by `until` (those of deleted
 * workspaces excluded, as in enqueueDueSchedules), each with its earliest such time, soonest
 * first, at most DUE_SOON_WORKSPACES: the workspaces a worker warms before their runs.
 */
export async function schedulesDueSoon(db: Kysely<DB>, from: Date, until: Date): Promise<{ workspaceId: string; at: Date }[]> {
  const rows = await db
    .selectFrom('schedules as s')
    .innerJoin('workspaces as w', 'w.id', 's.workspace_id')
    .select(['s.workspace_id', sql<Date>`min(s.next_run_at)`.as('at')])
    .where('s.enabled', '=', true)
    .where('w.deleted_at', 'is', null)
    .where('s.next_run_at', '>', from)
    .where('s.next_run_at', '<=', until)
    .groupBy('s.workspace_id')
    .orderBy('at')
    .limit(DUE_SOON_WORKSPACES)
    .execute();
  return rows.map((r) => ({ workspaceId: r.workspace_id, at: new Date(r.at) }));
}

/** A workspace already holds `limit` queued runs (MAX_QUEUED_RUNS_PER_WORKSPACE). */
export class QueueFullError extends Error {
  constructor(readonly limit: number) {
    super(`the workspace already has ${limit} queued runs (MAX_QUEUED_RUNS_PER_WORKSPACE); wait for them to run or cancel some`);
    this.name = 'QueueFullError';
  }
}

/** The lock every check of a workspace's queued-run count takes first (see advisoryXactLock). */
const queueLock = (workspaceId: string) => `codeagent:run-queue:${workspaceId}`;

function inTransaction<T>(db: Kysely<DB>, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db as Transaction<DB>) : db.transaction().execute(work);
}

async function insertRun(db: Kysely<DB>, input: EnqueueInput): Promise<RunRow> {
  return db
    .insertInto('runs')
    .values({
      workspace_id: input.workspaceId,
      notebook_path: input.notebookPath,
      parameters: JSON.stringify(input.parameters ?? {}),
      schedule_id: input.scheduleId ?? null,
      created_by: input.createdBy ?? null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

async function countQueued(db: Kysely<DB>, workspaceIds: string[]): Promise<Map<string, number>> {
  if (workspaceIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('runs')
    .select(['workspace_id', sql<number>`count(*)::int`.as('n')])
    .where('workspace_id', 'in', workspaceIds)
    .where('status', '=', 'queued')
    .groupBy('workspace_id')
    .execute();
  return new Map(rows.map((r) => [r.workspace_id, Number(r.n)]));
}

/**
 * Queues a run. With `maxQueued`, refuses (QueueFullError) when the workspace already has that
 * many queued runs; the count and the insert happen under one lock per workspace, so parallel
 * requests cannot overshoot the cap.
 */
export async function enqueueRun(db: Kysely<DB>, input: EnqueueInput, opts: { maxQueued?: number } = {}): Promise<RunRow> {
  const { maxQueued } = opts;
  return inTransaction(db, async (trx) => {
    if (maxQueued !== undefined) {
      await advisoryXactLock(trx, queueLock(input.workspaceId));
      const queued = (await countQueued(trx, [input.workspaceId])).get(input.workspaceId) ?? 0;
      if (queued >= maxQueued) throw new QueueFullError(maxQueued);
    }
    const run = await insertRun(trx, input);
    await notifyWorkers(trx);
    return run;
  });
}

export interface ScheduleTickOptions {
  now?: Date;
  batch?: number;
  /** No tick is scheduled sooner than this after the previous one (SCHEDULE_MIN_INTERVAL_SECONDS). */
  minIntervalSeconds?: number;
  /** A tick of a workspace at this many queued runs is skipped (MAX_QUEUED_RUNS_PER_WORKSPACE). */
  maxQueuedPerWorkspace?: number;
}

export interface ScheduleTick {
  enqueued: RunRow[];
  /** Ticks that queued nothing because the workspace's queue was full. */
  skipped: { scheduleId: string; workspaceId: string; queued: number }[];
  /** Schedules switched off at their tick: the member they run for may no longer run notebooks there (decision 0254). */
  stopped: { scheduleId: string; workspaceId: string; createdBy: string }[];
}

/**
 * Turns due schedules into queued runs. A schedule that missed several ticks (no worker was
 * running) gets one catch-up run, and its next time moves past `now` — and at least
 * `minIntervalSeconds` past the tick it fires, so a schedule stored before the limit existed
 * cannot fire more often either. A tick whose workspace queue is full is skipped (not queued
 * later): the schedule moves on to its next time.
 */
export async function enqueueDueSchedules(db: Kysely<DB>, opts: ScheduleTickOptions = {}): Promise<ScheduleTick> {
  const now = opts.now ?? new Date();
  const minIntervalMs = (opts.minIntervalSeconds ?? 0) * 1000;
  return db.transaction().execute(async (trx) => {
    const due = await trx
      .selectFrom('schedules as s')
      .innerJoin('workspaces as w', 'w.id', 's.workspace_id')
      // The member a schedule runs for (who set it up last): still an editor or admin of the
      // workspace, and not disabled? (A schedule without one, from before, runs as it did.)
      .leftJoin('users as u', 'u.id', 's.created_by')
      .leftJoin('workspace_members as m', (join) =>
        join.onRef('m.workspace_id', '=', 's.workspace_id').onRef('m.user_id', '=', 's.created_by').on('m.deleted_at', 'is', null),
      )
      .select(['s.id', 's.workspace_id', 's.notebook_path', 's.cron', 's.timezone', 's.created_by', 's.next_run_at'])
      .select((eb) =>
        eb.or([eb('s.created_by', 'is', null), eb.and([eb('u.disabled_at', 'is', null), eb('m.role', 'in', ['editor', 'admin'])])]).as('runnable'),
      )
      .where('s.enabled', '=', true)
      .where('s.next_run_at', '<=', now)
      .where('w.deleted_at', 'is', null)
      .orderBy('s.next_run_at')
      .limit(opts.batch ?? 100)
      .forUpdate('s')
      .skipLocked()
      .execute();
    const workspaces = [...new Set(due.map((s) => s.workspace_id))].sort();
    let queued = new Map<string, number>();
    if (opts.maxQueuedPerWorkspace !== undefined) {
      // Sorted, so two workers never wait for each other's locks in opposite orders.
      for (const ws of workspaces) await advisoryXactLock(trx, queueLock(ws));
      queued = await countQueued(trx, workspaces);
    }
    const tick: ScheduleTick = { enqueued: [], skipped: [], stopped: [] };
    for (const s of due) {
      if (!s.runnable) {
        // Switched off, not skipped: it would run code on behalf of someone who may no longer
        // (removed, made a viewer, disabled). An editor who turns it on again takes it over.
        await trx.updateTable('schedules').set({ enabled: false, updated_at: now }).where('id', '=', s.id).execute();
        tick.stopped.push({ scheduleId: s.id, workspaceId: s.workspace_id, createdBy: s.created_by! });
        continue;
      }
      const count = queued.get(s.workspace_id) ?? 0;
      const full = opts.maxQueuedPerWorkspace !== undefined && count >= opts.maxQueuedPerWorkspace;
      if (full) {
        tick.skipped.push({ scheduleId: s.id, workspaceId: s.workspace_id, queued: count });
      } else {
        tick.enqueued.push(await insertRun(trx, { workspaceId: s.workspace_id, notebookPath: s.notebook_path, scheduleId: s.id, createdBy: s.created_by }));
        queued.set(s.workspace_id, count + 1);
      }
      // Croner has whole-second resolution: strictly after (due + min - 1 s) allows a fire at exactly due + min.
      const earliest = s.next_run_at && minIntervalMs > 0 ? new Date(s.next_run_at.getTime() + minIntervalMs - 1000) : now;
      await trx
        .updateTable('schedules')
        .set({ next_run_at: nextRunAfter(s.cron, s.timezone, earliest > now ? earliest : now), ...(full ? {} : { last_run_at: now }) })
        .where('id', '=', s.id)
        .execute();
    }
    // Every worker with a free slot may take them (an idle one sleeps until told: decision 0202).
    if (tick.enqueued.length > 0) await notifyWorkers(trx);
    return tick;
  });
}

/**
 * Claims up to `limit` queued runs for `workerId`, with a lease, fairly across workspaces:
 * round-robin by workspace (every workspace's oldest run before any workspace's second; the
 * workspace served longest ago first), oldest first within a workspace. "Served" is the
 * latest `started_at` of the workspace's runs, so the order needs no state of its own and
 * holds across workers: a flood in one workspace delays another's run by at most one claim.
 *
 * With `maxRunningPerWorkspace` (MAX_RUNNING_RUNS_PER_WORKSPACE, decision 0234), a workspace
 * that already has that many runs running on any worker contributes none: long runs of one
 * workspace cannot hold every worker's slots while other workspaces' runs wait. Claims then
 * take one advisory lock, so that two workers' claims never both see the last place free.
 */
export async function claimRuns(
  db: Kysely<DB>,
  workerId: string,
  limit: number,
  leaseSeconds: number,
  opts: { maxRunningPerWorkspace?: number } = {},
): Promise<RunRow[]> {
  const cap = opts.maxRunningPerWorkspace;
  if (cap === undefined) return claimStatement(db, workerId, limit, leaseSeconds, CLAIM_UNCAPPED);
  return inTransaction(db, async (trx) => {
    await advisoryXactLock(trx, CLAIM_LOCK);
    return claimStatement(trx, workerId, limit, leaseSeconds, cap);
  });
}

/** Taken by every capped claim (see claimRuns). */
const CLAIM_LOCK = 'codeagent:run-claim';
/** No workspace reaches this many running runs (PostgreSQL's largest integer). */
const CLAIM_UNCAPPED = 2_147_483_647;

async function claimStatement(db: Kysely<DB>, workerId: string, limit: number, leaseSeconds: number, cap: number): Promise<RunRow[]> {
  // `workspaces` walks the distinct workspaces with queued runs through the partial index
  // runs_queued_workspace (a loose index scan: one probe per workspace, not one per run);
  // each contributes its oldest queued runs, as many as `limit` and the places its running
  // runs leave under `cap` allow (runs_running_workspace counts them), ranked by turn.
  const result = await sql<RunRow>`
    WITH RECURSIVE workspaces AS (
      (SELECT workspace_id FROM runs WHERE status = 'queued' ORDER BY workspace_id LIMIT 1)
      UNION ALL
      SELECT (SELECT r.workspace_id FROM runs r WHERE r.status = 'queued' AND r.workspace_id > w.workspace_id ORDER BY r.workspace_id LIMIT 1)
      FROM workspaces w
      WHERE w.workspace_id IS NOT NULL
    ),
    candidates AS (
      SELECT q.id, q.created_at, q.turn, served.last_served
      FROM workspaces w
      CROSS JOIN LATERAL (
        SELECT max(s.started_at) AS last_served FROM runs s WHERE s.workspace_id = w.workspace_id AND s.started_at IS NOT NULL
      ) served
      CROSS JOIN LATERAL (
        SELECT count(*)::int AS running FROM runs x WHERE x.workspace_id = w.workspace_id AND x.status = 'running'
      ) busy
      CROSS JOIN LATERAL (
        SELECT oldest.id, oldest.created_at, row_number() OVER (ORDER BY oldest.created_at, oldest.id) AS turn
        FROM (
          SELECT r.id, r.created_at FROM runs r
          WHERE r.workspace_id = w.workspace_id AND r.status = 'queued'
          ORDER BY r.created_at, r.id
          LIMIT least(${limit}::int, greatest(${cap}::int - busy.running, 0))
        ) oldest
      ) q
      WHERE w.workspace_id IS NOT NULL
    ),
    picked AS (
      SELECT r.id
      FROM runs r
      JOIN candidates c ON c.id = r.id
      WHERE r.status = 'queued'
      ORDER BY c.turn, c.last_served ASC NULLS FIRST, c.created_at, c.id
      LIMIT ${limit}
      FOR UPDATE OF r SKIP LOCKED
    )
    UPDATE runs
    SET status = 'running',
        worker_id = ${workerId},
        started_at = now(),
        lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
    FROM picked
    WHERE runs.id = picked.id AND runs.status = 'queued'
    RETURNING runs.*`.execute(db);
  return result.rows;
}

/** Heartbeat: extends the lease while the worker still holds the run; false when it lost it. */
export async function renewLease(db: Kysely<DB>, runId: string, workerId: string, leaseSeconds: number): Promise<boolean> {
  const res = await db
    .updateTable('runs')
    .set({ lease_expires_at: sql<Date>`now() + make_interval(secs => ${leaseSeconds})` })
    .where('id', '=', runId)
    .where('worker_id', '=', workerId)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/** Of `runIds`, those `workerId` still holds (running, its claim): the others were cancelled or lost. */
export async function runsStillHeld(db: Kysely<DB>, workerId: string, runIds: string[]): Promise<Set<string>> {
  if (runIds.length === 0) return new Set();
  const rows = await db.selectFrom('runs').select('id').where('id', 'in', runIds).where('worker_id', '=', workerId).where('status', '=', 'running').execute();
  return new Set(rows.map((r) => r.id));
}

export interface Completion {
  status: 'succeeded' | 'failed';
  error?: string | null;
  logKey?: string | null;
  outputPath?: string | null;
}

/** Records the end of a run, if this worker still holds it. */
export async function completeRun(db: Kysely<DB>, runId: string, workerId: string, done: Completion): Promise<boolean> {
  const res = await db
    .updateTable('runs')
    .set({
      status: done.status,
      error: done.error ?? null,
      log_key: done.logKey ?? null,
      output_path: done.outputPath ?? null,
      finished_at: sql<Date>`now()`,
      lease_expires_at: null,
    })
    .where('id', '=', runId)
    .where('worker_id', '=', workerId)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/**
 * Cancels a queued or running run (a worker never claims it afterwards; the worker running it
 * notices and stops its kernel). Returns the cancelled run, or undefined when the run is not
 * queued or running (finished, or not in this workspace).
 */
export async function cancelRun(db: Kysely<DB>, workspaceId: string, runId: string, reason = 'cancelled'): Promise<RunRow | undefined> {
  return inTransaction(db, async (trx) => {
    const run = await trx
      .updateTable('runs')
      .set({ status: 'cancelled', error: reason, finished_at: sql<Date>`now()`, lease_expires_at: null })
      .where('id', '=', runId)
      .where('workspace_id', '=', workspaceId)
      .where('status', 'in', ['queued', 'running'])
      .returningAll()
      .executeTakeFirst();
    // The worker running it stops its kernel at once instead of at its next poll.
    if (run?.status === 'cancelled' && run.worker_id !== null) await notifyWorkers(trx);
    return run;
  });
}

/** Cancels the queued runs of a schedule (when it is deleted); returns how many. */
export async function cancelQueuedRunsOfSchedule(db: Kysely<DB>, scheduleId: string, reason: string): Promise<number> {
  const res = await db
    .updateTable('runs')
    .set({ status: 'cancelled', error: reason, finished_at: sql<Date>`now()` })
    .where('schedule_id', '=', scheduleId)
    .where('status', '=', 'queued')
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/**
 * A run this worker held that ended meanwhile without it (cancelled by a user, or failed when its
 * lease expired) keeps that end, and gets the log and executed notebook the worker stored after
 * all: `GET …/log` finds the log, and retention removes both with the run. Only what is not yet
 * recorded is filled in. Returns whether the run was such a run.
 */
export async function recordEndedRunResults(
  db: Kysely<DB>,
  runId: string,
  workerId: string,
  results: { logKey: string | null; outputPath: string | null },
): Promise<boolean> {
  const res = await db
    .updateTable('runs')
    .set({
      log_key: sql<string | null>`coalesce(log_key, ${results.logKey})`,
      output_path: sql<string | null>`coalesce(output_path, ${results.outputPath})`,
    })
    .where('id', '=', runId)
    .where('worker_id', '=', workerId)
    .where('status', 'in', ['cancelled', 'failed'])
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/** Runs whose worker stopped renewing the lease (killed, partitioned) end `failed`, never stuck. */
export async function failExpiredRuns(db: Kysely<DB>): Promise<RunRow[]> {
  return db
    .updateTable('runs')
    .set({
      status: 'failed',
      error: sql<string>`'the worker running it stopped responding (lease of ' || coalesce(worker_id, '?') || ' expired)'`,
      finished_at: sql<Date>`now()`,
      lease_expires_at: null,
    })
    .where('status', '=', 'running')
    .where('lease_expires_at', '<', sql<Date>`now()`)
    .returningAll()
    .execute();
}
