import { sql, type Kysely } from 'kysely';
import type { DB, RunRow } from '@codeagent/db';
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

export async function enqueueRun(db: Kysely<DB>, input: EnqueueInput): Promise<RunRow> {
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

/**
 * Turns due schedules into queued runs. A schedule that missed several ticks (no worker was
 * running) gets one catch-up run, and its next time moves past `now`.
 */
export async function enqueueDueSchedules(db: Kysely<DB>, now = new Date(), batch = 100): Promise<RunRow[]> {
  return db.transaction().execute(async (trx) => {
    const due = await trx
      .selectFrom('schedules as s')
      .innerJoin('workspaces as w', 'w.id', 's.workspace_id')
      .select(['s.id', 's.workspace_id', 's.notebook_path', 's.cron', 's.timezone', 's.created_by'])
      .where('s.enabled', '=', true)
      .where('s.next_run_at', '<=', now)
      .where('w.deleted_at', 'is', null)
      .orderBy('s.next_run_at')
      .limit(batch)
      .forUpdate('s')
      .skipLocked()
      .execute();
    const runs: RunRow[] = [];
    for (const s of due) {
      runs.push(await enqueueRun(trx, { workspaceId: s.workspace_id, notebookPath: s.notebook_path, scheduleId: s.id, createdBy: s.created_by }));
      await trx
        .updateTable('schedules')
        .set({ next_run_at: nextRunAfter(s.cron, s.timezone, now), last_run_at: now })
        .where('id', '=', s.id)
        .execute();
    }
    return runs;
  });
}

/** Claims up to `limit` queued runs for `workerId`, oldest first, with a lease. */
export async function claimRuns(db: Kysely<DB>, workerId: string, limit: number, leaseSeconds: number): Promise<RunRow[]> {
  const claimable = db.selectFrom('runs').select('id').where('status', '=', 'queued').orderBy('created_at').limit(limit).forUpdate().skipLocked();
  return db
    .updateTable('runs')
    .set({
      status: 'running',
      worker_id: workerId,
      started_at: sql<Date>`now()`,
      lease_expires_at: sql<Date>`now() + make_interval(secs => ${leaseSeconds})`,
    })
    .where('id', 'in', claimable)
    .returningAll()
    .execute();
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
