import { sql, type Kysely } from 'kysely';
import { advisoryXactLock, type DB, type RunRow, type RunStatus, type ScheduleRow } from '@codeagent/db';
import {
  MAX_NOTEBOOK_BYTES,
  QueueFullError,
  cancelQueuedRunsOfSchedule,
  cancelRun as cancelQueuedOrRunning,
  enqueueRun,
  nextRunAfter,
  notebookSizeProblem,
  notifyWorkers,
  parameterNameProblem,
  validateSchedule,
} from '@codeagent/runs';
import { BadRequestError, ConflictError, NotFoundError, TooManyRequestsError, decodeCursor, keysetPage, isUuid } from '@codeagent/service-kit';
import { InvalidPathError } from '@codeagent/storage';
import type { WorkspaceFiles } from '@codeagent/files';
import type { RunDto, ScheduleDto } from './schemas.js';

/** Run flood limits of docs/contract/spec.md §4.5 (settings SCHEDULE_MIN_INTERVAL_SECONDS, MAX_*_PER_WORKSPACE). */
export interface RunLimits {
  scheduleMinIntervalSeconds: number;
  maxSchedulesPerWorkspace: number;
  maxQueuedRunsPerWorkspace: number;
}

export const DEFAULT_RUN_LIMITS: RunLimits = { scheduleMinIntervalSeconds: 60, maxSchedulesPerWorkspace: 50, maxQueuedRunsPerWorkspace: 100 };

export type { RunDto, ScheduleDto };

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toRunDto(r: RunRow): RunDto {
  return {
    id: r.id,
    workspace_id: r.workspace_id,
    schedule_id: r.schedule_id,
    notebook_path: r.notebook_path,
    parameters: r.parameters,
    status: r.status,
    created_at: r.created_at.toISOString(),
    started_at: iso(r.started_at),
    finished_at: iso(r.finished_at),
    error: r.error,
    log_key: r.log_key,
    output_path: r.output_path,
    created_by: r.created_by,
  };
}

function toScheduleDto(s: ScheduleRow): ScheduleDto {
  return {
    id: s.id,
    workspace_id: s.workspace_id,
    notebook_path: s.notebook_path,
    cron: s.cron,
    timezone: s.timezone,
    enabled: s.enabled,
    next_run_at: iso(s.next_run_at),
    last_run_at: iso(s.last_run_at),
    created_at: s.created_at.toISOString(),
    updated_at: s.updated_at.toISOString(),
    created_by: s.created_by,
  };
}

/**
 * The notebook a run or schedule names must exist in the workspace: 404 when it does not, for a
 * run, a new schedule and a schedule moved to another notebook alike (the resource they act on
 * is missing); a malformed path is 400, and so is a notebook over MAX_NOTEBOOK_BYTES (decision 0230).
 */
export async function requireNotebook(files: WorkspaceFiles, workspaceId: string, path: string): Promise<void> {
  let size: number;
  try {
    ({ size } = await files.stat(workspaceId, path));
  } catch (err) {
    if (err instanceof InvalidPathError) throw new BadRequestError(`notebook_path ${err.message}`, { notebook_path: err.reason });
    if (err instanceof NotFoundError) {
      throw new NotFoundError(`no notebook at ${path} in this workspace; upload it first`);
    }
    throw err;
  }
  const tooLarge = notebookSizeProblem(size);
  if (tooLarge) throw new BadRequestError(tooLarge, { notebook_path: `larger than ${MAX_NOTEBOOK_BYTES / 1024 / 1024} MiB` });
}

/**
 * A run is queued here; a schedule worker claims and executes it (docs/contract/spec.md §7). A workspace holds at
 * most `maxQueued` queued runs (MAX_QUEUED_RUNS_PER_WORKSPACE): beyond, 429.
 */
export async function createRun(
  db: Kysely<DB>,
  workspaceId: string,
  input: { notebookPath: string; parameters?: Record<string, unknown> | undefined; createdBy: string },
  maxQueued: number = DEFAULT_RUN_LIMITS.maxQueuedRunsPerWorkspace,
): Promise<RunDto> {
  // Refused here, not by the run failing later: each name becomes a Python assignment.
  const problems = Object.fromEntries(
    Object.keys(input.parameters ?? {}).flatMap((name) => {
      const problem = parameterNameProblem(name);
      return problem === undefined ? [] : [[`parameters.${name}`, problem]];
    }),
  );
  refuseProblems('parameters', problems);
  try {
    return toRunDto(
      await enqueueRun(db, { workspaceId, notebookPath: input.notebookPath, parameters: input.parameters ?? {}, createdBy: input.createdBy }, { maxQueued }),
    );
  } catch (err) {
    if (err instanceof QueueFullError) throw new TooManyRequestsError(err.message);
    throw err;
  }
}

/**
 * Cancels a queued or running run (docs/contract/spec.md §4.5): a queued run is never claimed afterwards; the
 * worker running a running one notices within its poll interval and aborts the runtime call,
 * which stops the kernel. A finished run: 409.
 */
export async function cancelRun(db: Kysely<DB>, workspaceId: string, runId: string): Promise<RunDto> {
  const cancelled = isUuid(runId) ? await cancelQueuedOrRunning(db, workspaceId, runId, 'cancelled') : undefined;
  if (cancelled) return toRunDto(cancelled);
  const run = await getRun(db, workspaceId, runId);
  throw new ConflictError(`run ${run.id} has already finished (status ${run.status}); only queued or running runs can be cancelled`);
}

export async function getRun(db: Kysely<DB>, workspaceId: string, runId: string): Promise<RunRow> {
  const run = isUuid(runId)
    ? await db.selectFrom('runs').selectAll().where('id', '=', runId).where('workspace_id', '=', workspaceId).executeTakeFirst()
    : undefined;
  if (!run) throw new NotFoundError(`run ${runId} not found`);
  return run;
}

export async function listRuns(
  db: Kysely<DB>,
  workspaceId: string,
  opts: { scheduleId?: string | undefined; status?: RunStatus | undefined; limit: number; cursor?: string | undefined },
) {
  const after = decodeCursor(opts.cursor, ['time', 'uuid']);
  let q = db
    .selectFrom('runs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (opts.scheduleId !== undefined) {
    if (!isUuid(opts.scheduleId)) return { items: [], next_cursor: null };
    q = q.where('schedule_id', '=', opts.scheduleId);
  }
  if (opts.status !== undefined) q = q.where('status', '=', opts.status);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(at, id)));
  }
  const rows = await q.execute();
  return keysetPage(rows, opts.limit, (r) => [r.created_at.toISOString(), r.id], toRunDto);
}

function checkSchedule(cron: string, timezone: string, minIntervalSeconds?: number): void {
  refuseProblems('schedule', validateSchedule(cron, timezone, minIntervalSeconds));
}

/** 400 `invalid_request` naming every problem by its field, when there is one. */
function refuseProblems(what: string, problems: Record<string, string>): void {
  if (Object.keys(problems).length === 0) return;
  throw new BadRequestError(
    `invalid ${what}: ${Object.entries(problems)
      .map(([k, v]) => `${k} ${v}`)
      .join('; ')}`,
    problems,
  );
}

/**
 * Creates a schedule. Its cron may not fire more often than SCHEDULE_MIN_INTERVAL_SECONDS
 * (400), and a workspace holds at most MAX_SCHEDULES_PER_WORKSPACE schedules (429; counted
 * under a per-workspace lock, so parallel requests cannot overshoot).
 */
export async function createSchedule(
  db: Kysely<DB>,
  workspaceId: string,
  input: { notebookPath: string; cron: string; timezone?: string | undefined; enabled?: boolean | undefined; createdBy: string },
  limits: Pick<RunLimits, 'scheduleMinIntervalSeconds' | 'maxSchedulesPerWorkspace'> = DEFAULT_RUN_LIMITS,
): Promise<ScheduleDto> {
  const timezone = input.timezone ?? 'UTC';
  checkSchedule(input.cron, timezone, limits.scheduleMinIntervalSeconds);
  const row = await db.transaction().execute(async (trx) => {
    await advisoryXactLock(trx, `codeagent:schedules:${workspaceId}`);
    const { n } = await trx
      .selectFrom('schedules')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    if (Number(n) >= limits.maxSchedulesPerWorkspace) {
      throw new TooManyRequestsError(
        `the workspace already has ${n} schedules (MAX_SCHEDULES_PER_WORKSPACE is ${limits.maxSchedulesPerWorkspace}); delete one first`,
      );
    }
    const created = await trx
      .insertInto('schedules')
      .values({
        workspace_id: workspaceId,
        notebook_path: input.notebookPath,
        cron: input.cron.trim(),
        timezone,
        enabled: input.enabled ?? true,
        next_run_at: nextRunAfter(input.cron, timezone, new Date()),
        created_by: input.createdBy,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // Workers sleep until the next schedule is due: this one may be due sooner.
    if (created.enabled) await notifyWorkers(trx);
    return created;
  });
  return toScheduleDto(row);
}

async function scheduleRow(db: Kysely<DB>, workspaceId: string, id: string): Promise<ScheduleRow> {
  const row = isUuid(id)
    ? await db.selectFrom('schedules').selectAll().where('id', '=', id).where('workspace_id', '=', workspaceId).executeTakeFirst()
    : undefined;
  if (!row) throw new NotFoundError(`schedule ${id} not found`);
  return row;
}

export async function getSchedule(db: Kysely<DB>, workspaceId: string, id: string): Promise<ScheduleDto> {
  return toScheduleDto(await scheduleRow(db, workspaceId, id));
}

export async function listSchedules(db: Kysely<DB>, workspaceId: string, limit: number, cursor: string | undefined) {
  const after = decodeCursor(cursor, ['time', 'uuid']);
  let q = db
    .selectFrom('schedules')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit + 1);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), '>', eb.tuple(at, id)));
  }
  const rows = await q.execute();
  return keysetPage(rows, limit, (r) => [r.created_at.toISOString(), r.id], toScheduleDto);
}

export async function updateSchedule(
  db: Kysely<DB>,
  workspaceId: string,
  id: string,
  patch: { notebookPath?: string | undefined; cron?: string | undefined; timezone?: string | undefined; enabled?: boolean | undefined },
  minIntervalSeconds: number = DEFAULT_RUN_LIMITS.scheduleMinIntervalSeconds,
  /** The editor who changes it: it runs for them from now on (decision 0254). */
  by?: string,
): Promise<ScheduleDto> {
  return db.transaction().execute(async (trx) => {
    const current = isUuid(id)
      ? await trx.selectFrom('schedules').selectAll().where('id', '=', id).where('workspace_id', '=', workspaceId).forUpdate().executeTakeFirst()
      : undefined;
    if (!current) throw new NotFoundError(`schedule ${id} not found`);
    const cron = patch.cron?.trim() ?? current.cron;
    const timezone = patch.timezone ?? current.timezone;
    const timingChanged = cron !== current.cron || timezone !== current.timezone || (patch.enabled === true && !current.enabled);
    // A schedule stored before the limit may still be switched off or renamed; new timing obeys it.
    checkSchedule(cron, timezone, timingChanged ? minIntervalSeconds : undefined);
    const row = await trx
      .updateTable('schedules')
      .set({
        notebook_path: patch.notebookPath ?? current.notebook_path,
        cron,
        timezone,
        enabled: patch.enabled ?? current.enabled,
        ...(by !== undefined ? { created_by: by } : {}),
        // Re-enabling or re-timing starts from now: no catch-up for the time it was off.
        ...(timingChanged ? { next_run_at: nextRunAfter(cron, timezone, new Date()) } : {}),
        updated_at: new Date(),
      })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (timingChanged) await notifyWorkers(trx);
    return toScheduleDto(row);
  });
}

/** Deletes a schedule and cancels its queued runs (a running one finishes; its row stays). */
export async function deleteSchedule(db: Kysely<DB>, workspaceId: string, id: string): Promise<void> {
  const row = await scheduleRow(db, workspaceId, id);
  await db.transaction().execute(async (trx) => {
    // Lock first: a worker queueing a tick of this schedule right now commits before we look.
    await trx.selectFrom('schedules').select('id').where('id', '=', row.id).forUpdate().execute();
    await cancelQueuedRunsOfSchedule(trx, row.id, 'cancelled: its schedule was deleted');
    await trx.deleteFrom('schedules').where('id', '=', row.id).execute();
  });
}
