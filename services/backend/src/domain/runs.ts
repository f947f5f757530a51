import type { Kysely } from 'kysely';
import type { DB, RunRow, RunStatus, ScheduleRow } from '@codeagent/db';
import { enqueueRun, nextRunAfter, validateSchedule } from '@codeagent/runs';
import { BadRequestError, NotFoundError, decodeCursor, keysetPage, isUuid } from '@codeagent/service-kit';


export interface RunDto {
  id: string;
  workspace_id: string;
  schedule_id: string | null;
  notebook_path: string;
  parameters: Record<string, unknown>;
  status: RunStatus;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  log_key: string | null;
  output_path: string | null;
}

export interface ScheduleDto {
  id: string;
  workspace_id: string;
  notebook_path: string;
  cron: string;
  timezone: string;
  enabled: boolean;
  next_run_at: string | null;
  last_run_at: string | null;
  created_at: string;
  updated_at: string;
}

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
  };
}

/** A run is queued here; a schedule worker claims and executes it (SPEC §7). */
export async function createRun(
  db: Kysely<DB>,
  workspaceId: string,
  input: { notebookPath: string; parameters?: Record<string, unknown> | undefined; createdBy: string },
): Promise<RunDto> {
  return toRunDto(await enqueueRun(db, { workspaceId, notebookPath: input.notebookPath, parameters: input.parameters ?? {}, createdBy: input.createdBy }));
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
  const after = decodeCursor(opts.cursor, 2);
  let q = db.selectFrom('runs').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit + 1);
  if (opts.scheduleId !== undefined) {
    if (!isUuid(opts.scheduleId)) return { items: [], next_cursor: null };
    q = q.where('schedule_id', '=', opts.scheduleId);
  }
  if (opts.status !== undefined) q = q.where('status', '=', opts.status);
  if (after) {
    const [at, id] = after as [string, string];
    q = q.where((eb) => eb.or([eb('created_at', '<', new Date(at)), eb.and([eb('created_at', '=', new Date(at)), eb('id', '<', id)])]));
  }
  const rows = await q.execute();
  return keysetPage(rows, opts.limit, (r) => [r.created_at.toISOString(), r.id], toRunDto);
}

function checkSchedule(cron: string, timezone: string): void {
  const problems = validateSchedule(cron, timezone);
  if (Object.keys(problems).length > 0) {
    throw new BadRequestError(`invalid schedule: ${Object.entries(problems).map(([k, v]) => `${k} ${v}`).join('; ')}`, problems);
  }
}

export async function createSchedule(
  db: Kysely<DB>,
  workspaceId: string,
  input: { notebookPath: string; cron: string; timezone?: string | undefined; enabled?: boolean | undefined; createdBy: string },
): Promise<ScheduleDto> {
  const timezone = input.timezone ?? 'UTC';
  checkSchedule(input.cron, timezone);
  const row = await db
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
  const after = decodeCursor(cursor, 2);
  let q = db.selectFrom('schedules').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').limit(limit + 1);
  if (after) {
    const [at, id] = after as [string, string];
    q = q.where((eb) => eb.or([eb('created_at', '>', new Date(at)), eb.and([eb('created_at', '=', new Date(at)), eb('id', '>', id)])]));
  }
  const rows = await q.execute();
  return keysetPage(rows, limit, (r) => [r.created_at.toISOString(), r.id], toScheduleDto);
}

export async function updateSchedule(
  db: Kysely<DB>,
  workspaceId: string,
  id: string,
  patch: { notebookPath?: string | undefined; cron?: string | undefined; timezone?: string | undefined; enabled?: boolean | undefined },
): Promise<ScheduleDto> {
  return db.transaction().execute(async (trx) => {
    const current = isUuid(id)
      ? await trx.selectFrom('schedules').selectAll().where('id', '=', id).where('workspace_id', '=', workspaceId).forUpdate().executeTakeFirst()
      : undefined;
    if (!current) throw new NotFoundError(`schedule ${id} not found`);
    const cron = patch.cron?.trim() ?? current.cron;
    const timezone = patch.timezone ?? current.timezone;
    checkSchedule(cron, timezone);
    const timingChanged = cron !== current.cron || timezone !== current.timezone || (patch.enabled === true && !current.enabled);
    const row = await trx
      .updateTable('schedules')
      .set({
        notebook_path: patch.notebookPath ?? current.notebook_path,
        cron,
        timezone,
        enabled: patch.enabled ?? current.enabled,
        // Re-enabling or re-timing starts from now: no catch-up for the time it was off.
        ...(timingChanged ? { next_run_at: nextRunAfter(cron, timezone, new Date()) } : {}),
        updated_at: new Date(),
      })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return toScheduleDto(row);
  });
}

export async function deleteSchedule(db: Kysely<DB>, workspaceId: string, id: string): Promise<void> {
  const row = await scheduleRow(db, workspaceId, id);
  await db.deleteFrom('schedules').where('id', '=', row.id).execute();
}
