import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { notebookSizeProblem } from '@codeagent/runs';
import type { Config } from '@codeagent/config';
import { migrate, openPlatformDatabase } from '@codeagent/db';
import { createLogger } from '@codeagent/service-kit';
import { createObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from '@codeagent/files';
import { sql } from 'kysely';
import { Metrics, startOpsServer } from '@codeagent/service-kit';
import { putInternalObject, runtimeClient } from '@codeagent/clients';
import { ScheduleWorker, runRequestId, type RunIO, type WorkspaceFile } from './worker.js';
import { applyRetention } from './retention.js';
import { InvalidNotebookError, type Notebook } from './notebook.js';

/** How often a worker applies retention (RUN_RETENTION_DAYS, VERSION_RETENTION_*). */
const RETENTION_INTERVAL_MS = 10 * 60 * 1000;

/** Executed notebooks live in `{stem}.runs/` folders: they are outputs, not inputs of later runs. */
const isRunOutput = (path: string) =>
  path
    .split('/')
    .slice(0, -1)
    .some((segment) => segment.endsWith('.runs'));
const MAX_RUN_FILES = 10_000;

/**
 * Notebooks and the files a run sees from the workspace files; what the run writes back through
 * the same storage layer (new versions); run logs through the backend's internal route (docs/contract/spec.md §7).
 */
export function platformRunIO(files: WorkspaceFiles, backendUrls: string | readonly string[], internalServiceToken: string): RunIO {
  return {
    async readNotebook(workspaceId, path) {
      // The size of the version opened first: a notebook too large to run is never read (decision 0230).
      const { object, body } = await files.open(workspaceId, path);
      const tooLarge = notebookSizeProblem(object.size);
      if (tooLarge) {
        body.destroy();
        throw new InvalidNotebookError(tooLarge);
      }
      return buffer(body);
    },
    async readWorkspaceFiles(workspaceId, maxBytes) {
      const out: WorkspaceFile[] = [];
      let total = 0;
      let cursor: string | undefined;
      do {
        const page = await files.list(workspaceId, '', 1000, cursor);
        for (const object of page.items) {
          if (isRunOutput(object.path)) continue;
          total += object.size;
          if (total > maxBytes) {
            throw new Error(
              `the workspace's files exceed SANDBOX_FILES_MAX_BYTES (${Math.round(maxBytes / 1024 / 1024)} MiB), which a run copies into its sandbox; remove large files or raise the setting`,
            );
          }
          if (out.length >= MAX_RUN_FILES) throw new Error(`the workspace holds more than ${MAX_RUN_FILES} files, more than a run copies into its sandbox`);
          out.push({ path: object.path, content: await files.readAll(workspaceId, object.path) });
        }
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      return out;
    },
    async writeResultFile(workspaceId, path, content, actor) {
      await files.put(workspaceId, path, Readable.from([content]), { actor });
    },
    async writeExecutedNotebook(workspaceId, path, content) {
      await files.put(workspaceId, path, Readable.from([content]), { contentType: 'application/x-ipynb+json', actor: null });
    },
    async writeRunLog(workspaceId, runId, content) {
      const key = `${workspaceId}/${runId}.log`;
      await putInternalObject(backendUrls, internalServiceToken, 'run_log', key, content, runRequestId(runId));
      return key;
    },
  };
}

/** Starts a schedule worker (`codeagent worker`); several may run against one database. */
export async function startWorker(config: Config): Promise<void> {
  const log = createLogger({ level: config.logLevel, format: config.logFormat }, 'worker');
  const database = await openPlatformDatabase(config, 'worker');
  await migrate(database);
  const store = await createObjectStore(config);
  await store.init();
  const files = new WorkspaceFiles(database.db, store, log, { quotaBytes: config.workspaceQuotaBytes });
  // What the worker counts (metrics, below).
  const metrics = new Metrics('worker');
  const finished = metrics.counter(
    'codeagent_worker_runs_total',
    'Runs this worker ended, by status (lost: another worker failed it after its lease expired)',
    ['status'],
  );
  const worker = new ScheduleWorker({
    db: database.db,
    io: platformRunIO(files, config.backendUrls, config.internalServiceToken),
    runtime: runtimeClient<Notebook>(config.runtimeUrl, config.internalServiceToken),
    log,
    leaseSeconds: config.worker.leaseSeconds,
    concurrency: config.worker.concurrency,
    maxRunningPerWorkspace: config.worker.maxRunningPerWorkspace,
    pollMs: config.worker.pollMs,
    listen: database.listen.bind(database),
    runTimeoutSeconds: config.worker.runTimeoutSeconds,
    filesMaxBytes: config.sandbox.filesMaxBytes,
    limits: { scheduleMinIntervalSeconds: config.runLimits.scheduleMinIntervalSeconds, maxQueuedRunsPerWorkspace: config.runLimits.maxQueuedRunsPerWorkspace },
    onFinished: (status) => finished.inc({ status }),
    maintenance: {
      intervalMs: RETENTION_INTERVAL_MS,
      run: async () => void (await applyRetention({ db: database.db, files, store, log, settings: config.retention })),
    },
  });
  // Metrics and probes on WORKER_METRICS_PORT when set (the worker has no port otherwise).
  metrics.gauge('codeagent_worker_runs_in_flight', 'Runs this worker is executing now', [], (g) => g.set(worker.running));
  const ops =
    config.workerMetricsPort === undefined
      ? undefined
      : await startOpsServer(metrics, config.componentHost, config.workerMetricsPort, {
          database: async () => (await sql`SELECT 1`.execute(database.db), true),
        });
  worker.start();
  log.info({ worker_id: worker.workerId }, 'schedule worker started');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    ops?.stopping();
    log.info({ signal }, 'stopping: finishing the runs in flight');
    await worker.stop(25_000);
    await ops?.app.close();
    await database.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}
