import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { DB, RunRow } from '@codeagent/db';
import { claimRuns, completeRun, enqueueDueSchedules, failExpiredRuns, renewLease } from '@codeagent/runs';
import { executedNotebookPath, firstError, injectParameters, parseNotebook, type Notebook } from './notebook.js';

/** Where notebooks come from and where results go; implemented over storage and the internal route. */
export interface RunIO {
  readNotebook(workspaceId: string, path: string): Promise<Buffer>;
  writeExecutedNotebook(workspaceId: string, path: string, content: Buffer): Promise<void>;
  /** Stores the run log (area run_log, key `{workspace_id}/{run_id}.log`); returns the key. */
  writeRunLog(workspaceId: string, runId: string, content: Buffer): Promise<string>;
}

export interface NotebookRunner {
  runNotebook(notebook: Notebook, timeoutSeconds: number): Promise<{ status: 'ok' | 'error'; notebook: Notebook; duration_ms: number }>;
}

export interface WorkerOptions {
  db: Kysely<DB>;
  io: RunIO;
  runtime: NotebookRunner;
  log: Logger;
  workerId?: string;
  /** A run whose worker does not renew its claim within this time ends `failed`. */
  leaseSeconds?: number;
  pollMs?: number;
  /** Runs executed at once by this worker. */
  concurrency?: number;
  runTimeoutSeconds?: number;
}

interface LogEvent {
  time: string;
  event: string;
  [key: string]: unknown;
}

/**
 * The schedule worker (SPEC §7): each tick turns due schedules into runs, fails runs whose
 * lease expired, and claims queued runs up to its concurrency. Any number of workers may run
 * against one database.
 */
export class ScheduleWorker {
  readonly workerId: string;
  private readonly leaseSeconds: number;
  private readonly pollMs: number;
  private readonly concurrency: number;
  private readonly runTimeoutSeconds: number;
  private readonly inFlight = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly opts: WorkerOptions) {
    this.workerId = opts.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.leaseSeconds = opts.leaseSeconds ?? 30;
    this.pollMs = opts.pollMs ?? 1000;
    this.concurrency = opts.concurrency ?? 2;
    this.runTimeoutSeconds = opts.runTimeoutSeconds ?? 3600;
  }

  start(): void {
    const loop = () => {
      if (this.stopped) return;
      this.ticking = this.tick()
        .catch((err: unknown) => this.opts.log.error({ err }, 'worker tick failed'))
        .finally(() => {
          this.ticking = undefined;
          if (!this.stopped) this.timer = setTimeout(loop, this.pollMs);
        });
    };
    loop();
  }

  /** One round of work; returns when the claimed runs have been started (not finished). */
  async tick(): Promise<void> {
    const { db, log } = this.opts;
    const enqueued = await enqueueDueSchedules(db);
    if (enqueued.length > 0) log.info({ runs: enqueued.map((r) => r.id) }, 'enqueued scheduled runs');
    const expired = await failExpiredRuns(db);
    for (const r of expired) log.warn({ run_id: r.id, worker_id: r.worker_id }, 'run failed: its worker stopped renewing the lease');
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0 || this.stopped) return;
    for (const run of await claimRuns(db, this.workerId, free, this.leaseSeconds)) {
      const p = this.execute(run).finally(() => this.inFlight.delete(run.id));
      this.inFlight.set(run.id, p);
    }
  }

  /** Waits until every claimed run has finished. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()]);
  }

  /** Stops claiming, lets running runs finish (bounded by `graceMs`; their leases then expire). */
  async stop(graceMs = 30_000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.race([this.drain(), new Promise((r) => setTimeout(r, graceMs).unref())]);
  }

  private async execute(run: RunRow): Promise<void> {
    const { db, io, runtime, log } = this.opts;
    const events: LogEvent[] = [];
    const note = (event: string, fields: Record<string, unknown> = {}) => events.push({ time: new Date().toISOString(), event, ...fields });
    note('claimed', { worker_id: this.workerId, notebook_path: run.notebook_path, schedule_id: run.schedule_id });

    const heartbeat = setInterval(() => {
      renewLease(db, run.id, this.workerId, this.leaseSeconds).catch((err: unknown) => log.warn({ err, run_id: run.id }, 'lease renewal failed'));
    }, Math.max(200, (this.leaseSeconds * 1000) / 3));

    let status: 'succeeded' | 'failed' = 'failed';
    let error: string | undefined;
    let outputPath: string | undefined;
    try {
      const source = parseNotebook(await io.readNotebook(run.workspace_id, run.notebook_path));
      const notebook = injectParameters(source, run.parameters);
      note('started', { cells: notebook.cells.length });
      const result = await runtime.runNotebook(notebook, this.runTimeoutSeconds);
      note('executed', { status: result.status, duration_ms: result.duration_ms });
      outputPath = executedNotebookPath(run.notebook_path, run.id);
      await io.writeExecutedNotebook(run.workspace_id, outputPath, Buffer.from(JSON.stringify(result.notebook, null, 1)));
      note('stored', { output_path: outputPath });
      status = result.status === 'ok' ? 'succeeded' : 'failed';
      if (status === 'failed') error = firstError(result.notebook) ?? 'a cell failed';
    } catch (err) {
      error = (err as Error).message;
      note('error', { message: error });
    } finally {
      clearInterval(heartbeat);
    }
    note('finished', { status, ...(error ? { error } : {}) });

    let logKey: string | undefined;
    try {
      logKey = await io.writeRunLog(run.workspace_id, run.id, Buffer.from(events.map((e) => JSON.stringify(e)).join('\n') + '\n'));
    } catch (err) {
      log.error({ err, run_id: run.id }, 'could not store the run log');
    }
    const recorded = await completeRun(db, run.id, this.workerId, { status, error: error ?? null, logKey: logKey ?? null, outputPath: outputPath ?? null });
    if (!recorded) log.warn({ run_id: run.id }, 'run finished after its lease expired; its result was not recorded');
    else log.info({ run_id: run.id, status }, 'run finished');
  }
}
