import { Readable } from 'node:stream';
import pino, { type LoggerOptions } from 'pino';
import type { Config } from '@codeagent/config';
import { migrate, openDatabase } from '@codeagent/db';
import { loggerOptions } from '@codeagent/service-kit';
import { WorkspaceFiles, createObjectStore } from '@codeagent/storage';
import { putInternalObject, runtimeClient } from './clients.js';
import { ScheduleWorker, type RunIO } from './worker.js';

/** Notebooks from the workspace files, run logs through the backend's internal route (SPEC §7). */
export function platformRunIO(files: WorkspaceFiles, backendUrl: string, internalServiceToken: string): RunIO {
  return {
    readNotebook: (workspaceId, path) => files.readAll(workspaceId, path),
    async writeExecutedNotebook(workspaceId, path, content) {
      await files.put(workspaceId, path, Readable.from([content]), { contentType: 'application/x-ipynb+json', actor: null });
    },
    async writeRunLog(workspaceId, runId, content) {
      const key = `${workspaceId}/${runId}.log`;
      await putInternalObject(backendUrl, internalServiceToken, 'run_log', key, content);
      return key;
    },
  };
}

/** Starts a schedule worker (`codeagent worker`); several may run against one database. */
export async function startWorker(config: Config): Promise<void> {
  const log = pino(loggerOptions(config.logLevel, 'worker') as LoggerOptions);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(database);
  const store = createObjectStore(config);
  await store.init();
  const worker = new ScheduleWorker({
    db: database.db,
    io: platformRunIO(new WorkspaceFiles(database.db, store, log), config.backendUrl, config.internalServiceToken),
    runtime: runtimeClient(config.runtimeUrl, config.internalServiceToken),
    log,
    leaseSeconds: config.worker.leaseSeconds,
    concurrency: config.worker.concurrency,
    pollMs: config.worker.pollMs,
    runTimeoutSeconds: config.worker.runTimeoutSeconds,
  });
  worker.start();
  log.info({ worker_id: worker.workerId }, 'schedule worker started');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping: finishing the runs in flight');
    await worker.stop(25_000);
    await database.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}
