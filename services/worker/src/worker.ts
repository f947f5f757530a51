import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { DB, Database, Listener, RunRow } from '@codeagent/db';
import {
  RUNS_CHANNEL,
  claimRuns,
  completeRun,
  enqueueDueSchedules,
  failExpiredRuns,
  nextDeadlines,
  recordEndedRunResults,
  renewLease,
  schedulesDueSoon,
} from '@codeagent/runs';
import { isOutOfSpace } from '@codeagent/service-kit/http';
import { executedNotebookPath, firstError, injectParameters, parseNotebook, type Notebook } from './notebook.js';

/**
 * With LISTEN/NOTIFY connected, the worker's fallback tick comes after this many times
 * WORKER_POLL_MS without news (decision 0202): what it would notice there, it is told of or
 * knows the time of.
 */
const IDLE_POLL_FACTOR = 10;

/** A workspace file going into a run's sandbox, or one the run created or changed. */
export interface WorkspaceFile {
  path: string;
  content: Buffer;
}

/** Where notebooks come from and where results go; implemented over storage and the internal route. */
export interface RunIO {
  readNotebook(workspaceId: string, path: string): Promise<Buffer>;
  /** The workspace's files a run sees (copied into its sandbox); throws beyond `maxBytes` together. */
  readWorkspaceFiles?(workspaceId: string, maxBytes: number): Promise<WorkspaceFile[]>;
  /** Stores a file the run created or changed through the storage layer: a new version. */
  writeResultFile?(workspaceId: string, path: string, content: Buffer, actor: string | null): Promise<void>;
  writeExecutedNotebook(workspaceId: string, path: string, content: Buffer): Promise<void>;
  /** Stores the run log (area run_log, key `{workspace_id}/{run_id}.log`); returns the key. */
  writeRunLog(workspaceId: string, runId: string, content: Buffer): Promise<string>;
}

/** Which workspace a run belongs to, and its files (the runtime runs it in that workspace's sandbox). */
export interface RunContext {
  workspaceId: string;
  notebookPath: string;
  files?: WorkspaceFile[] | undefined;
  /** Instead of `files`: read only if the runtime copies them (it does not mount the workspace). */
  loadFiles?: (() => Promise<WorkspaceFile[] | undefined>) | undefined;
}

export interface NotebookRunner {
  /** Executes the notebook in its workspace's sandbox; `signal` aborts the call (the runtime then stops the kernel). */
  runNotebook(
    notebook: Notebook,
    timeoutSeconds: number,
    context?: RunContext,
    signal?: AbortSignal,
    /** Goes into the runtime's logs as x-request-id. */
    requestId?: string,
  ): Promise<{ status: 'ok' | 'error'; notebook: Notebook; duration_ms: number; files?: WorkspaceFile[]; files_error?: string; files_sent?: number }>;
  /** Readies a workspace for its next run (the runtime's `warm_up`: its warm pool fills); answers at once. */
  warmUp?(workspaceId: string, requestId?: string): Promise<boolean>;
}

/**
 * How long before a schedule fires the worker asks the runtime to ready its workspace (decision
 * 0212): a kernel starts in 1–3 s (with the workspace's server and mount, 3 s), and the warm pool
 * keeps it for KERNEL_POOL_IDLE_SECONDS (600 by default), so a scheduled run finds it waiting.
 */
export const WARM_AHEAD_MS = 20_000;

/** Periodic work besides runs (retention), at most one at a time per worker. */
export interface Maintenance {
  intervalMs: number;
  run(): Promise<void>;
}

export interface WorkerOptions {
  db: Kysely<DB>;
  io: RunIO;
  runtime: NotebookRunner;
  log: Logger;
  workerId?: string;
  /** A run whose worker does not renew its claim within this time ends `failed`. */
  leaseSeconds?: number;
  /**
   * The longest sleep between two ticks while no `listen` connection is up (WORKER_POLL_MS).
   * With one, a queued run starts at once, a schedule fires when due and an expired lease is
   * failed when it expires, whatever this is; the worker then also ticks after IDLE_POLL_FACTOR
   * times this (at most half a lease) without news, in case a notification was lost.
   */
  pollMs?: number;
  /** LISTEN on the runs channel (Database.listen): the backend's NOTIFY wakes the worker at once. */
  listen?: Database['listen'];
  /** Runs executed at once by this worker. */
  concurrency?: number;
  /**
   * Runs of one workspace running at once on all workers together (MAX_RUNNING_RUNS_PER_WORKSPACE,
   * decision 0234); unset: no cap.
   */
  maxRunningPerWorkspace?: number;
  runTimeoutSeconds?: number;
  /** A run's files copied into and out of its sandbox, each way (SANDBOX_FILES_MAX_BYTES). */
  filesMaxBytes?: number;
  /** SCHEDULE_MIN_INTERVAL_SECONDS and MAX_QUEUED_RUNS_PER_WORKSPACE, applied to schedule ticks. */
  limits?: { scheduleMinIntervalSeconds?: number; maxQueuedRunsPerWorkspace?: number };
  maintenance?: Maintenance;
  /** Called once per run this worker ends (metrics): how it ended. */
  onFinished?: (status: 'succeeded' | 'failed' | 'cancelled' | 'lost') => void;
}

/** The x-request-id of a run's calls to the runtime and the backend: one run, one id in every log. */
export function runRequestId(runId: string): string {
  return `run-${runId}`;
}

/** Why a worker stops executing a run before it ends. */
type StopReason = 'cancelled' | 'lost';

interface InFlight {
  done: Promise<void>;
  abort: AbortController;
}

interface LogEvent {
  time: string;
  event: string;
  [key: string]: unknown;
}

/**
 * The schedule worker (docs/contract/spec.md §7): each tick turns due schedules into runs, fails runs whose
 * lease expired, and claims queued runs up to its concurrency. Any number of workers may run
 * against one database.
 */
export class ScheduleWorker {
  readonly workerId: string;
  private readonly leaseSeconds: number;
  private readonly pollMs: number;
  private readonly concurrency: number;
  private readonly runTimeoutSeconds: number;
  private readonly inFlight = new Map<string, InFlight>();
  /** Runs whose execution is over (only their log and status are being recorded): not stopped. */
  private readonly finishing = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** A wake-up came during a tick: tick again right after it. */
  private wakeAgain = false;
  private listener: Listener | undefined;
  /** When the next schedule is due (or WARM_AHEAD_MS before it) or the first lease of a running run expires, as of the last tick. */
  private nextDue: Date | undefined;
  /** The fire time each workspace was last warmed for: one warm-up per workspace and fire time. */
  private readonly warmedFor = new Map<string, number>();
  private tickCount = 0;
  private maintaining: Promise<void> | undefined;
  private lastMaintenance = 0;
  private stopped = false;

  constructor(private readonly opts: WorkerOptions) {
    this.workerId = opts.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.leaseSeconds = opts.leaseSeconds ?? 30;
    this.pollMs = opts.pollMs ?? 1000;
    this.concurrency = opts.concurrency ?? 2;
    this.runTimeoutSeconds = opts.runTimeoutSeconds ?? 3600;
  }

  start(): void {
    // Every (re)connection of the listener may have missed notifications: it wakes the worker too.
    this.listener = this.opts.listen?.(RUNS_CHANNEL, { onNotify: () => this.wake(), onConnect: () => this.wake() });
    this.loop();
  }

  private loop(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.ticking = this.tick()
      .catch((err: unknown) => this.opts.log.error({ err }, 'worker tick failed'))
      .finally(() => {
        this.ticking = undefined;
        this.tickCount++;
        if (this.stopped) return;
        if (this.wakeAgain) {
          this.wakeAgain = false;
          this.loop();
          return;
        }
        this.timer = setTimeout(() => this.loop(), this.sleepMs());
      });
  }

  /**
   * Until the next schedule is due or lease expires, at most pollMs (without a listener) or the
   * idle poll (with one: notifications wake the worker for everything else). A time already past
   * (a schedule another worker holds, or one that failed to enqueue) waits the full pollMs: no
   * busy loop.
   */
  private sleepMs(): number {
    const left = this.nextDue ? this.nextDue.getTime() - Date.now() : Infinity;
    if (left <= 0) return this.pollMs;
    const longest = this.listening ? Math.max(this.pollMs, Math.min(IDLE_POLL_FACTOR * this.pollMs, (this.leaseSeconds * 1000) / 2)) : this.pollMs;
    return Math.min(longest, left + 5);
  }

  /**
   * Ticks now (a run was queued or cancelled, a schedule changed, a slot became free), or right
   * after the tick in progress; wake-ups during a tick collapse into one more tick.
   */
  wake(): void {
    if (this.stopped) return;
    if (this.ticking) this.wakeAgain = true;
    else if (this.timer) this.loop();
  }

  /** One round of work; returns when the claimed runs have been started (not finished). */
  async tick(): Promise<void> {
    const { db, log, limits } = this.opts;
    const tick = await enqueueDueSchedules(db, {
      ...(limits?.scheduleMinIntervalSeconds !== undefined ? { minIntervalSeconds: limits.scheduleMinIntervalSeconds } : {}),
      ...(limits?.maxQueuedRunsPerWorkspace !== undefined ? { maxQueuedPerWorkspace: limits.maxQueuedRunsPerWorkspace } : {}),
    });
    if (tick.enqueued.length > 0) log.info({ runs: tick.enqueued.map((r) => r.id) }, 'enqueued scheduled runs');
    for (const s of tick.stopped) {
      log.warn(
        { schedule_id: s.scheduleId, workspace_id: s.workspaceId, user_id: s.createdBy },
        'schedule switched off: the member it runs for is no longer an editor or admin of the workspace, or is disabled; an editor who turns it on again takes it over',
      );
    }
    for (const s of tick.skipped) {
      log.warn(
        { schedule_id: s.scheduleId, workspace_id: s.workspaceId, queued: s.queued },
        'schedule tick skipped: the workspace has MAX_QUEUED_RUNS_PER_WORKSPACE runs queued',
      );
    }
    const expired = await failExpiredRuns(db);
    for (const r of expired) log.warn({ run_id: r.id, worker_id: r.worker_id }, 'run failed: its worker stopped renewing the lease');
    await this.stopRunsNoLongerHeld();
    const warmedUntil = await this.warmAhead();
    const { schedule, lease, warm } = await nextDeadlines(db, warmedUntil);
    // The next schedule's run, the first lease to expire, and WARM_AHEAD_MS before the first
    // schedule not yet warmed: whichever comes first.
    const times = [schedule, lease, warm && new Date(warm.getTime() - WARM_AHEAD_MS)].filter((d): d is Date => d !== undefined);
    this.nextDue = times.length === 0 ? undefined : new Date(Math.min(...times.map((d) => d.getTime())));
    this.maybeMaintain();
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0 || this.stopped) return;
    const cap = this.opts.maxRunningPerWorkspace;
    for (const run of await claimRuns(db, this.workerId, free, this.leaseSeconds, cap === undefined ? {} : { maxRunningPerWorkspace: cap })) {
      const abort = new AbortController();
      const done = this.execute(run, abort.signal)
        .catch((err: unknown) => this.opts.log.error({ err, run_id: run.id }, 'a run ended with an error of the worker'))
        .finally(() => {
          this.inFlight.delete(run.id);
          this.finishing.delete(run.id);
          // A slot is free: the next queued run need not wait for the poll.
          this.wake();
        });
      this.inFlight.set(run.id, { done, abort });
    }
  }

  /**
   * Asks the runtime to ready the workspaces whose schedules fire within WARM_AHEAD_MS (decision
   * 0212), once per workspace and fire time, without waiting for it: a scheduled run then takes a
   * warm kernel instead of starting one (and, after idle, the workspace's server and mount).
   * Returns the end of the window it warmed (undefined when the runtime warms nothing).
   */
  private async warmAhead(): Promise<Date | undefined> {
    const { runtime, db, log } = this.opts;
    if (!runtime.warmUp) return undefined;
    const now = Date.now();
    const until = new Date(now + WARM_AHEAD_MS);
    for (const [ws, at] of this.warmedFor) if (at <= now) this.warmedFor.delete(ws);
    for (const { workspaceId, at } of await schedulesDueSoon(db, new Date(now), until)) {
      if (this.warmedFor.get(workspaceId) === at.getTime()) continue;
      this.warmedFor.set(workspaceId, at.getTime());
      void runtime.warmUp(workspaceId).catch((err: unknown) => log.debug({ err, workspace_id: workspaceId }, 'the runtime did not take the warm-up'));
    }
    return until;
  }

  /**
   * Aborts the runs in flight that are no longer this worker's: cancelled through the API, or
   * failed by another worker after a lost lease. Aborting the runtime call makes the runtime
   * stop the kernel, and frees the slot for the next run.
   */
  private async stopRunsNoLongerHeld(): Promise<void> {
    const ids = [...this.inFlight.keys()];
    if (ids.length === 0) return;
    const rows = await this.opts.db.selectFrom('runs').select(['id', 'status', 'worker_id']).where('id', 'in', ids).execute();
    for (const r of rows) {
      if (r.status === 'running' && r.worker_id === this.workerId) continue;
      this.stopRun(r.id, r.status === 'cancelled' && r.worker_id === this.workerId ? 'cancelled' : 'lost');
    }
  }

  private stopRun(runId: string, reason: StopReason): void {
    const run = this.inFlight.get(runId);
    if (run && !run.abort.signal.aborted && !this.finishing.has(runId)) {
      this.opts.log.info({ run_id: runId, reason }, reason === 'cancelled' ? 'run cancelled: stopping it' : 'run no longer held by this worker: stopping it');
      run.abort.abort(reason);
    }
  }

  private maybeMaintain(): void {
    const m = this.opts.maintenance;
    if (!m || this.maintaining || this.stopped || Date.now() - this.lastMaintenance < m.intervalMs) return;
    this.lastMaintenance = Date.now();
    this.maintaining = m
      .run()
      .catch((err: unknown) => this.opts.log.error({ err }, 'maintenance (retention) failed'))
      .finally(() => (this.maintaining = undefined));
  }

  /** Whether the runs channel is being listened on (notifications wake the worker). */
  get listening(): boolean {
    return this.listener?.connected ?? false;
  }

  /** Ticks done since start (metrics, tests). */
  get ticks(): number {
    return this.tickCount;
  }

  /** Resolves once no tick runs and none is pending. */
  async idle(): Promise<void> {
    while (this.ticking || this.wakeAgain) await this.ticking;
  }

  /** Runs this worker is executing now. */
  get running(): number {
    return this.inFlight.size;
  }

  /** Waits until every claimed run has finished. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()].map((r) => r.done));
  }

  /** Stops claiming, lets running runs finish (bounded by `graceMs`; their leases then expire). */
  async stop(graceMs = 30_000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.listener?.close();
    await this.ticking;
    await this.maintaining;
    await Promise.race([this.drain(), new Promise((r) => setTimeout(r, graceMs).unref())]);
  }

  /** What the run wrote goes back through the storage layer, one new version per file; returns the refusals. */
  private async storeResultFiles(run: RunRow, files: WorkspaceFile[], note: (event: string, fields: Record<string, unknown>) => void): Promise<string[]> {
    const { io } = this.opts;
    if (files.length === 0 || !io.writeResultFile) return [];
    const written: string[] = [];
    const refused: string[] = [];
    for (const f of files) {
      try {
        await io.writeResultFile(run.workspace_id, f.path, f.content, run.created_by);
        written.push(f.path);
      } catch (err) {
        refused.push(`${JSON.stringify(f.path.slice(0, 200))}: ${(err as Error).message}`);
      }
    }
    note('files', { written, ...(refused.length ? { refused } : {}) });
    return refused;
  }

  private async execute(run: RunRow, signal: AbortSignal): Promise<void> {
    const { db, io, runtime, log } = this.opts;
    const events: LogEvent[] = [];
    const note = (event: string, fields: Record<string, unknown> = {}) => events.push({ time: new Date().toISOString(), event, ...fields });
    note('claimed', { worker_id: this.workerId, notebook_path: run.notebook_path, schedule_id: run.schedule_id });

    const heartbeat = setInterval(
      () => {
        renewLease(db, run.id, this.workerId, this.leaseSeconds)
          .then((held) => {
            if (!held) void this.stopRunsNoLongerHeld().catch(() => this.stopRun(run.id, 'lost'));
          })
          .catch((err: unknown) => log.warn({ err, run_id: run.id }, 'lease renewal failed'));
      },
      Math.max(200, (this.leaseSeconds * 1000) / 3),
    );

    let status: 'succeeded' | 'failed' = 'failed';
    let error: string | undefined;
    let outputPath: string | undefined;
    const stopped = () => (signal.aborted ? (signal.reason as StopReason) : undefined);
    try {
      const source = parseNotebook(await io.readNotebook(run.workspace_id, run.notebook_path));
      const notebook = injectParameters(source, run.parameters);
      note('started', { cells: notebook.cells.length });
      // The workspace's files are read only for a runtime that copies them into the run; one that
      // mounts the workspace (decision 0141) runs on them in place, whatever their size.
      const readFiles = io.readWorkspaceFiles?.bind(io);
      const loadFiles = readFiles ? () => readFiles(run.workspace_id, this.opts.filesMaxBytes ?? 128 * 1024 * 1024) : undefined;
      // The run's id names its requests in the runtime's and the backend's logs.
      const result = await runtime.runNotebook(
        notebook,
        this.runTimeoutSeconds,
        { workspaceId: run.workspace_id, notebookPath: run.notebook_path, loadFiles },
        signal,
        runRequestId(run.id),
      );
      if (stopped()) throw new Error('stopped');
      note('executed', {
        status: result.status,
        duration_ms: result.duration_ms,
        ...(result.files_sent !== undefined ? { files_copied_in: result.files_sent } : {}),
      });
      const target = executedNotebookPath(run.notebook_path, run.id);
      await io.writeExecutedNotebook(run.workspace_id, target, Buffer.from(JSON.stringify(result.notebook, null, 1)));
      outputPath = target; // only once stored (a write refused for quota stores nothing)
      note('stored', { output_path: outputPath });
      const refused = await this.storeResultFiles(run, result.files ?? [], note);
      status = result.status === 'ok' ? 'succeeded' : 'failed';
      // A cell's error comes first; why the run's files were not stored (a mount that stopped answering) is said too.
      if (status === 'failed') error = [firstError(result.notebook) ?? 'a cell failed', result.files_error].filter(Boolean).join('; ');
      else if (result.files_error) [status, error] = ['failed', result.files_error];
      else if (refused.length > 0) [status, error] = ['failed', `${refused.length} file(s) the run wrote were not stored: ${refused.slice(0, 3).join('; ')}`];
    } catch (err) {
      if (!stopped()) {
        // (A full disk is the operator's to fix: said so, not as the file system's code.)
        error = isOutOfSpace(err)
          ? "the platform's disk is full: the run's results could not be stored; ask an administrator to free space"
          : (err as Error).message;
        note('error', { message: error });
      }
    } finally {
      clearInterval(heartbeat);
      this.finishing.add(run.id);
    }
    const reason = stopped();
    if (reason)
      note(
        reason === 'cancelled' ? 'cancelled' : 'lost',
        reason === 'cancelled' ? { message: 'cancelled while running; the kernel was stopped' } : { message: 'another worker ended this run (lease expired)' },
      );
    else note('finished', { status, ...(error ? { error } : {}) });

    let logKey: string | undefined;
    try {
      logKey = await io.writeRunLog(run.workspace_id, run.id, Buffer.from(events.map((e) => JSON.stringify(e)).join('\n') + '\n'));
    } catch (err) {
      log.error({ err, run_id: run.id }, 'could not store the run log');
    }
    this.opts.onFinished?.(reason ?? status);
    const results = { logKey: logKey ?? null, outputPath: outputPath ?? null };
    // A database that does not answer for a moment loses no result: a few tries, then the log
    // says so (the run ends `failed` when its lease expires). Never a rejection: nothing awaits
    // this but the worker's drain, and an unhandled one would end the worker and every run in it.
    const recorded = await recordWithRetries(log, run.id, async () => {
      if (!reason && (await completeRun(db, run.id, this.workerId, { status, error: error ?? null, ...results }))) return 'finished';
      // Cancelled, or failed when its lease expired, while it was finishing here: it keeps that
      // end, and gets the log and notebook stored meanwhile.
      await recordEndedRunResults(db, run.id, this.workerId, results);
      return 'ended meanwhile';
    });
    if (recorded === 'finished') log.info({ run_id: run.id, status }, 'run finished');
    else if (reason === 'cancelled') log.info({ run_id: run.id }, 'run cancelled; its kernel was stopped');
    else if (recorded === 'ended meanwhile')
      log.warn({ run_id: run.id }, 'run ended (cancelled, or its lease expired) while it was finishing; its log and notebook were kept');
  }
}

const RECORD_TRIES = 4;

/** Runs `record` up to RECORD_TRIES times, 0.5, 1, 2 s apart; undefined (logged) when every try failed. */
async function recordWithRetries<T>(log: Logger, runId: string, record: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await record();
    } catch (err) {
      if (attempt === RECORD_TRIES) {
        log.error({ err, run_id: runId }, 'could not record the end of a run; it ends failed when its lease expires');
        return undefined;
      }
      log.warn({ err, run_id: runId, attempt }, 'recording the end of a run failed; trying again');
      await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
    }
  }
}
