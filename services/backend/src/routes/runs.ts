import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { ListQuery, NotFoundError, listResponse } from '@codeagent/service-kit';
import {
  DEFAULT_RUN_LIMITS,
  cancelRun,
  createRun,
  createSchedule,
  deleteSchedule,
  getRun,
  getSchedule,
  listRuns,
  listSchedules,
  requireNotebook,
  toRunDto,
  updateSchedule,
  type RunLimits,
} from '../domain/runs.js';
import type { WorkspaceFiles } from '@codeagent/files';
import { errors } from './schemas.js';
import { Run, RunStatus, Schedule } from '../domain/schemas.js';

/** Reads a run log from the run_log area; undefined when there is none (yet). */
export type RunLogReader = (logKey: string) => Promise<NodeJS.ReadableStream | undefined>;

/** Asks the runtime to ready a workspace for its next run (the runtime's `warm_up`, decision 0209). */
export type RuntimeWarmUp = (workspaceId: string, requestId: string) => Promise<boolean>;

export interface RunsRoutesOptions {
  db: Kysely<DB>;
  files: WorkspaceFiles;
  readRunLog: RunLogReader;
  limits?: RunLimits;
  warmUp?: RuntimeWarmUp | undefined;
}

/** A workspace is readied for a run at most this often, however many members open its run form. */
const WARM_UP_EVERY_MS = 10_000;

const NotebookPath = Type.String({ minLength: 1, maxLength: 1024, pattern: '\\.ipynb$' });
const Ws = Type.Object({ ws: Type.String({ maxLength: 64 }) });
const WsId = Type.Object({ ws: Type.String({ maxLength: 64 }), id: Type.String({ maxLength: 64 }) });
const Cron = Type.String({ minLength: 1, maxLength: 200 });
const Zone = Type.String({ minLength: 1, maxLength: 100 });

/** Notebook runs and schedules of a workspace (docs/contract/spec.md §4.4): members read, editors and admins write. */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const runsRoutes: FastifyPluginAsyncTypebox<RunsRoutesOptions> = async (app, { db, files, readRunLog, limits = DEFAULT_RUN_LIMITS, warmUp }) => {
  const tags = ['runs'];
  /** When each workspace was last readied (by this backend): a bounded map, swept as it grows. */
  const warmedAt = new Map<string, number>();

  app.post(
    '/:ws/runs/warm-up',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary:
          'Ready the workspace for a run about to be started (the web app asks when an editor opens the run form): its Jupyter server and a warm kernel start in the background; answers at once',
        params: Ws,
        response: { 202: Type.Object({}), ...errors(401, 403, 404) },
      },
    },
    async (req, reply) => {
      const ws = req.params.ws.toLowerCase();
      const now = Date.now();
      if (warmUp && now - (warmedAt.get(ws) ?? -Infinity) >= WARM_UP_EVERY_MS) {
        if (warmedAt.size >= 10_000) for (const [k, at] of warmedAt) if (now - at >= WARM_UP_EVERY_MS) warmedAt.delete(k);
        warmedAt.set(ws, now);
        // Nobody waits for it: a runtime that is down or keeps no warm kernels only loses the head start.
        void warmUp(ws, req.id).catch((err: unknown) => req.log.warn({ err, workspace_id: ws }, 'the runtime did not take the warm-up'));
      }
      return reply.code(202).send({});
    },
  );

  app.post(
    '/:ws/runs',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Run a workspace notebook now (queued for a worker, executed on the runtime)',
        params: Ws,
        body: Type.Object(
          { notebook_path: NotebookPath, parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
          { additionalProperties: false },
        ),
        response: { 202: Run, ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (req, reply) => {
      await requireNotebook(files, req.params.ws, req.body.notebook_path);
      const run = await createRun(
        db,
        req.params.ws,
        { notebookPath: req.body.notebook_path, parameters: req.body.parameters, createdBy: req.user.id },
        limits.maxQueuedRunsPerWorkspace,
      );
      return reply.code(202).send(run);
    },
  );

  app.post(
    '/:ws/runs/:id/cancel',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Cancel a queued or running run (a running run’s kernel is stopped); a finished run is 409',
        params: WsId,
        response: { 200: Run, ...errors(401, 403, 404, 409) },
      },
    },
    async (req) => {
      return cancelRun(db, req.params.ws, req.params.id);
    },
  );

  app.get(
    '/:ws/runs',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags,
        summary: 'List runs, newest first',
        params: Ws,
        querystring: Type.Composite([ListQuery, Type.Object({ schedule_id: Type.Optional(Type.String({ maxLength: 64 })), status: Type.Optional(RunStatus) })]),
        response: { 200: listResponse(Run), ...errors(400, 401, 404) },
      },
    },
    async (req) => {
      const q = req.query;
      return listRuns(db, req.params.ws, { scheduleId: q.schedule_id, status: q.status, limit: q.limit ?? 100, cursor: q.cursor });
    },
  );

  app.get(
    '/:ws/runs/:id',
    { config: { access: 'workspace-viewer' }, schema: { tags, summary: 'Read a run', params: WsId, response: { 200: Run, ...errors(401, 404) } } },
    async (req) => {
      return toRunDto(await getRun(db, req.params.ws, req.params.id));
    },
  );

  app.get(
    '/:ws/runs/:id/log',
    { config: { access: 'workspace-viewer' }, schema: { tags, summary: "The run's log: JSON lines of timestamped events", params: WsId } },
    async (req, reply) => {
      const run = await getRun(db, req.params.ws, req.params.id);
      const stream = run.log_key ? await readRunLog(run.log_key) : undefined;
      if (!stream) throw new NotFoundError(`run ${run.id} has no log yet (status ${run.status})`);
      return reply.type('application/x-ndjson; charset=utf-8').send(stream);
    },
  );

  app.post(
    '/:ws/schedules',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Schedule a notebook (cron with 5 fields, or 6 with leading seconds; IANA time zone)',
        params: Ws,
        body: Type.Object(
          { notebook_path: NotebookPath, cron: Cron, timezone: Type.Optional(Zone), enabled: Type.Optional(Type.Boolean()) },
          { additionalProperties: false },
        ),
        response: { 201: Schedule, ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (req, reply) => {
      const b = req.body;
      await requireNotebook(files, req.params.ws, b.notebook_path);
      const schedule = await createSchedule(
        db,
        req.params.ws,
        { notebookPath: b.notebook_path, cron: b.cron, timezone: b.timezone, enabled: b.enabled, createdBy: req.user.id },
        limits,
      );
      return reply.code(201).send(schedule);
    },
  );

  app.get(
    '/:ws/schedules',
    {
      config: { access: 'workspace-viewer' },
      schema: { tags, summary: 'List schedules', params: Ws, querystring: ListQuery, response: { 200: listResponse(Schedule), ...errors(400, 401, 404) } },
    },
    async (req) => {
      return listSchedules(db, req.params.ws, req.query.limit ?? 100, req.query.cursor);
    },
  );

  app.get(
    '/:ws/schedules/:id',
    { config: { access: 'workspace-viewer' }, schema: { tags, summary: 'Read a schedule', params: WsId, response: { 200: Schedule, ...errors(401, 404) } } },
    async (req) => {
      return getSchedule(db, req.params.ws, req.params.id);
    },
  );

  app.patch(
    '/:ws/schedules/:id',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Change a schedule',
        params: WsId,
        body: Type.Object(
          { notebook_path: Type.Optional(NotebookPath), cron: Type.Optional(Cron), timezone: Type.Optional(Zone), enabled: Type.Optional(Type.Boolean()) },
          { additionalProperties: false },
        ),
        response: { 200: Schedule, ...errors(400, 401, 403, 404) },
      },
    },
    async (req) => {
      const b = req.body;
      if (b.notebook_path !== undefined) await requireNotebook(files, req.params.ws, b.notebook_path);
      return updateSchedule(
        db,
        req.params.ws,
        req.params.id,
        { notebookPath: b.notebook_path, cron: b.cron, timezone: b.timezone, enabled: b.enabled },
        limits.scheduleMinIntervalSeconds,
        req.user.id,
      );
    },
  );

  app.delete(
    '/:ws/schedules/:id',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Delete a schedule (its queued runs are cancelled; other runs stay)',
        params: WsId,
        response: { 204: Type.Null(), ...errors(401, 403, 404) },
      },
    },
    async (req, reply) => {
      await deleteSchedule(db, req.params.ws, req.params.id);
      return reply.code(204).send(null);
    },
  );
};
