import { randomUUID, createHash } from 'node:crypto';
import { lstatSync } from 'node:fs';
import { KernelAPI, KernelConnection, type Kernel, type KernelMessage, type ServerConnection } from '@jupyterlab/services';
import type { FastifyBaseLogger } from 'fastify';
import { Contents, FilesLimitError, FilesRequiredError, SandboxFilesError, isSafeRelativePath, type CollectedFile, type SandboxFile } from './contents.js';
import { KeyedLock } from '@codeagent/service-kit';
import { KernelUnavailableError } from './jupyter-server.js';
import { withMessageGate } from './transport.js';
import { ENVELOPE_BYTES, KernelChannels, readConnection } from './kernel-channels.js';
import { MountUnresponsiveError, type FailedTransfer } from './workspace-mount.js';
import type { JupyterPool, JupyterServerRef } from './servers.js';
import { WarmKernelPool, type WarmKernelSource, type WarmPoolOptions } from './warm-pool.js';

/** nbformat v4 output. */
export type Output =
  | { output_type: 'stream'; name: 'stdout' | 'stderr'; text: string }
  | { output_type: 'execute_result'; data: Record<string, unknown>; metadata: Record<string, unknown>; execution_count: number | null }
  | { output_type: 'display_data'; data: Record<string, unknown>; metadata: Record<string, unknown> }
  | { output_type: 'error'; ename: string; evalue: string; traceback: string[] };

export interface ExecuteResult {
  status: 'ok' | 'error';
  outputs: Output[];
  execution_count: number | null;
  /** True when the time limit was reached and the kernel was interrupted. */
  timed_out?: boolean;
  /** True when the kernel died during the execution (out of memory, a limit, killed) and was restarted or is gone. */
  kernel_died?: boolean;
}

export interface KernelInfo {
  kernel_id: string;
  kernel_name: string;
  execution_state: string;
  last_activity: string | null;
  /** The workspace whose sandbox runs the kernel; null for the scratch sandbox. */
  workspace_id: string | null;
}

export class UnknownKernelError extends Error {
  constructor(id: string) {
    super(`kernel ${id} not found`);
    this.name = 'UnknownKernelError';
  }
}

export interface NotebookCell {
  cell_type: string;
  source: string | string[];
  outputs?: Output[];
  execution_count?: number | null;
  metadata?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface Notebook {
  nbformat: number;
  nbformat_minor: number;
  metadata: { kernelspec?: { name?: string }; [key: string]: unknown };
  cells: NotebookCell[];
}

export interface RunNotebookOptions {
  /** The workspace whose sandbox runs the notebook; none: the scratch sandbox. */
  workspaceId?: string | undefined;
  /** Where the notebook lives in the workspace: the kernel starts in its directory. */
  notebookPath?: string | undefined;
  /** The workspace's files, copied into a fresh directory of the sandbox for this run. */
  files?: SandboxFile[] | undefined;
  /**
   * No `files` given, and they are to be sent only if needed: where the workspace's server does
   * not mount its files, the run is refused with FilesRequiredError before anything runs, and the
   * caller sends them. A mounted workspace runs on its files in place and needs no copy.
   */
  filesOnRequest?: boolean | undefined;
  /** Aborted when the caller gives up (the worker cancelled the run): the kernel is stopped. */
  signal?: AbortSignal | undefined;
}

/** Where a run stands (for the message of a run that outlived its hard deadline). */
interface RunState {
  server: JupyterServerRef | undefined;
  /** The cell being executed. */
  cell: NotebookCell | undefined;
  phase: string;
}

export interface RunNotebookResult {
  status: 'ok' | 'error';
  notebook: Notebook;
  duration_ms: number;
  /** Files the run created or changed (only when `files` were given). */
  files?: CollectedFile[];
  /** Why the run's files could not be collected (then `files` is empty). */
  files_error?: string;
}

const INTERRUPT_GRACE_MS = 5000;
/** How long an execute over ZeroMQ waits for the kernel's websocket (its deaths are told there) to be connected. */
const CONNECT_WAIT_MS = 10_000;

/** When and where a file was last written ('' when it cannot be read): tells a rewritten file from the one seen before. */
function fileStamp(path: string): string {
  try {
    // (Of the file itself: a symlink the kernel put there is not followed out of the sandbox.)
    const s = lstatSync(path);
    return `${s.ino}:${s.mtimeMs}:${s.size}`;
  } catch {
    return '';
  }
}

/** Resolves once the connection is connected, or after `ms` whatever it is. */
function whenConnected(conn: KernelConnection, ms: number): Promise<void> {
  if (conn.connectionStatus === 'connected') return Promise.resolve();
  return new Promise((resolve) => {
    const on = (_: unknown, status: Kernel.ConnectionStatus) => {
      if (status === 'connected') done();
    };
    const done = () => {
      clearTimeout(timer);
      conn.connectionStatusChanged.disconnect(on);
      resolve();
    };
    const timer = setTimeout(done, ms);
    conn.connectionStatusChanged.connect(on);
  });
}
/**
 * How long a run may take beyond its timeout before the runtime gives up on it: ending its kernel
 * and uploading what it wrote (the mount's flush, at most 60 s) fit in it. A run still going then
 * is stuck on something that never answers (a workspace mount whose rclone stopped: user code, the
 * kernel's shutdown and the flush all wait on it for ever): its workspace's server is force-stopped
 * (mount killed first) and the run answered as failed. The worker waits longer than this (the
 * runtime client's time-out is the timeout plus 90 s), so it gets this answer, not a time-out of its own.
 */
export const RUN_GRACE_SECONDS = 60;
/** Within the grace: what ending the kernel and the flush leave for the server's forced stop and the answer. */
const RUN_GRACE_RESERVE_MS = 10_000;
/** A kernel starts in about a second (three in its sandbox on a loaded machine). */
const KERNEL_START_TIMEOUT_MS = 60_000;
/** Output one execution may produce (text and data together); beyond it the cell is interrupted, so no cell can flood the runtime's memory. */
export const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;
/**
 * Output one run keeps over all its cells (decision 0230): the runtime holds the executed notebook
 * whole until it answers, and the worker reads that answer whole, so a run of many cells each
 * under MAX_OUTPUT_BYTES must not add up to gigabytes. The cell that reaches it is interrupted and
 * the run fails there.
 */
export const MAX_RUN_OUTPUT_BYTES = 64 * 1024 * 1024;

/** Approximate size of a value as kept (the length of its strings, 8 for anything else). */
function sizeOf(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (v === null || v === undefined) return 0;
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + sizeOf(x), 0);
  if (typeof v === 'object') return Object.values(v).reduce((n: number, x) => n + sizeOf(x), 0);
  return 8;
}

/** Approximate size of an IOPub message's output (what `collect` would keep: data and metadata alike). */
function outputSize(msg: KernelMessage.IIOPubMessage): number {
  const content = msg.content as Record<string, unknown>;
  switch (msg.header.msg_type) {
    case 'stream':
      return sizeOf(content.text);
    case 'execute_result':
    case 'display_data':
      return sizeOf(content.data) + sizeOf(content.metadata);
    case 'error':
      return sizeOf(content.traceback) + sizeOf(content.evalue) + sizeOf(content.ename);
    default:
      return 0;
  }
}

/**
 * After a kernel restarts (the OOM killer, a limit), @jupyterlab/services reconnects by itself,
 * in a promise nobody awaits; when the kernel or its whole server is gone meanwhile, that
 * promise rejects and would crash the runtime as an unhandled rejection. The execution that
 * was waiting fails on its own (statusChanged, the server's exit), so a failed reconnect is
 * swallowed here.
 */
class RuntimeKernelConnection extends KernelConnection {
  override async reconnect(): Promise<void> {
    try {
      await super.reconnect();
    } catch {
      // the kernel or its server is gone
    }
  }

  // Sent by the library itself on every (re)connection, in a promise nobody awaits: a restart
  // that cancels it would otherwise be an unhandled rejection.
  override async requestKernelInfo(): Promise<KernelMessage.IInfoReplyMsg | undefined> {
    try {
      return await super.requestKernelInfo();
    } catch {
      return undefined;
    }
  }
}
const RUNS_DIR = '.codeagent-runs';
/**
 * The largest message the runtime reads from a kernel's websocket unless an execution goes through
 * it: the kernel's status (a few hundred bytes), the kernel_info and shutdown replies; no output.
 */
export const STATUS_MESSAGE_MAX_BYTES = 64 * 1024;
/** What a kernel's websocket may drop while the kernel executes nothing before the runtime closes it (decision 0247). */
const IDLE_DROPPED_MAX_BYTES = 32 * 1024 * 1024;

/** Appends an IOPub message to the outputs the way a notebook front end would. */
function collect(outputs: Output[], msg: KernelMessage.IIOPubMessage): number | undefined {
  const content = msg.content as Record<string, unknown>;
  switch (msg.header.msg_type) {
    case 'stream': {
      const name = content.name === 'stderr' ? 'stderr' : 'stdout';
      const text = typeof content.text === 'string' ? content.text : '';
      const last = outputs[outputs.length - 1];
      if (last && last.output_type === 'stream' && last.name === name) last.text += text;
      else outputs.push({ output_type: 'stream', name, text });
      return undefined;
    }
    case 'execute_result':
      outputs.push({
        output_type: 'execute_result',
        data: (content.data ?? {}) as Record<string, unknown>,
        metadata: (content.metadata ?? {}) as Record<string, unknown>,
        execution_count: (content.execution_count as number | null) ?? null,
      });
      return undefined;
    case 'display_data':
      outputs.push({
        output_type: 'display_data',
        data: (content.data ?? {}) as Record<string, unknown>,
        metadata: (content.metadata ?? {}) as Record<string, unknown>,
      });
      return undefined;
    case 'error':
      outputs.push({
        output_type: 'error',
        ename: typeof content.ename === 'string' ? content.ename : '',
        evalue: typeof content.evalue === 'string' ? content.evalue : '',
        traceback: Array.isArray(content.traceback) ? content.traceback.map(String) : [],
      });
      return undefined;
    case 'clear_output':
      outputs.length = 0;
      return undefined;
    case 'execute_input':
      return typeof content.execution_count === 'number' ? content.execution_count : undefined;
    default:
      return undefined;
  }
}

/** How long `list` waits for one server's kernels (under the backend's health ping of 1.5 s). */
export const LIST_SERVER_MS = 1000;

/**
 * Kernels of the sandboxed Jupyter servers, driven with @jupyterlab/services. A kernel belongs
 * to the server of its workspace (or the scratch sandbox). Executes on one kernel run strictly
 * one after another (a queue per kernel); different kernels run in parallel. A kernel that dies
 * mid-execution (OOM killer, a limit, its server stopped) fails that execution with a clear
 * error instead of leaving it waiting.
 */
export class KernelService implements WarmKernelSource {
  /** Warm kernels per workspace for runs (KERNEL_POOL_SIZE); absent: every run starts its kernel. */
  readonly warm: WarmKernelPool | undefined;
  private readonly owners = new Map<string, JupyterServerRef>();
  private readonly connections = new Map<string, KernelConnection>();
  /** Shell and IOPub over ZeroMQ straight to the kernel, where its server lets the runtime reach them (decision 0190). */
  private readonly channels = new Map<string, { channels: KernelChannels; unwatch: () => void; stamp: string }>();
  /** Kernels whose channels could not be opened: they execute through the Jupyter server until restarted. */
  private readonly noChannels = new Set<string>();
  /** Kernels executing right now (one execution at a time: `queues`), and the way: over ZeroMQ or through their server's websocket. */
  private readonly executing = new Map<string, 'channels' | 'server'>();
  private readonly queues = new KeyedLock();
  /** Jupyter shutdowns of run kernels already killed (endRunKernel), still under way. */
  private readonly ending = new Set<Promise<void>>();
  /** Who waits for each server's stop: one reaction per server, not one per execution (they would pile up on a promise that may never settle). */
  private readonly stopWatchers = new WeakMap<JupyterServerRef, Set<(reason: string) => void>>();

  constructor(
    private readonly pool: JupyterPool,
    private readonly opts: {
      filesMaxBytes?: number;
      /** How long a run waits for a new kernel to answer kernel_info before starting another. */
      startTimeoutMs?: number;
      log?: Pick<FastifyBaseLogger, 'warn' | 'info'>;
      /** Warm kernels for runs (docs/decisions/0125-warm-kernel-pool.md). */
      warmPool?: Omit<WarmPoolOptions, 'log'>;
      /**
       * Executes over ZeroMQ straight to the kernel's sockets where its server allows it (the
       * sandboxed servers do), instead of through the Jupyter server's websocket (default true;
       * decision 0190).
       */
      directChannels?: boolean;
      /** Tests: another grace than RUN_GRACE_SECONDS (at least 15 s: the reserve and a flush fit in it). */
      runGraceSeconds?: number;
    } = {},
  ) {
    if (opts.warmPool && opts.warmPool.size > 0) this.warm = new WarmKernelPool(this, { ...opts.warmPool, log: opts.log });
  }

  private get log(): Pick<FastifyBaseLogger, 'warn'> | undefined {
    return this.opts.log;
  }

  get filesMaxBytes(): number {
    return this.opts.filesMaxBytes ?? 128 * 1024 * 1024;
  }

  async startKernel(kernelName = 'python3', workspaceId?: string, path?: string): Promise<string> {
    const server = await this.pool.server(workspaceId);
    let model: Kernel.IModel;
    try {
      // `path` (the kernel's working directory, relative to the server root) is passed through to jupyter_server.
      model = await KernelAPI.startNew({ name: kernelName, ...(path ? { path } : {}) }, server.settings);
    } catch (err) {
      const status = (err as { response?: { status?: number } }).response?.status;
      throw new KernelUnavailableError(status ? `kernel ${kernelName} cannot start (HTTP ${status}); is its kernelspec installed?` : String(err));
    }
    this.owners.set(model.id, server);
    server.kernelStarted(model.id);
    void server.stopped.then(() => this.forget(model.id));
    return model.id;
  }

  private forget(kernelId: string): void {
    this.owners.delete(kernelId);
    this.connections.get(kernelId)?.dispose();
    this.connections.delete(kernelId);
    this.dropChannels(kernelId);
    this.noChannels.delete(kernelId);
  }

  /** Closes the kernel's websocket connection `conn` if it is still the one in use; the next request opens another. */
  private dropConnection(kernelId: string, conn: KernelConnection): void {
    if (this.connections.get(kernelId) !== conn || this.executing.has(kernelId)) return;
    this.connections.delete(kernelId);
    conn.dispose();
  }

  /** Closes the kernel's ZeroMQ channels; the next execute opens them again (after a restart: a new process). */
  private dropChannels(kernelId: string): void {
    const open = this.channels.get(kernelId);
    this.channels.delete(kernelId);
    open?.unwatch();
    open?.channels.close();
  }

  /** The kernel's ZeroMQ channels, opened on first use; undefined where they cannot be had (then the websocket serves). */
  private async channelsFor(kernelId: string, server: JupyterServerRef, conn: KernelConnection): Promise<KernelChannels | undefined> {
    if (this.opts.directChannels === false || this.noChannels.has(kernelId)) return undefined;
    const where = server.kernelSockets?.(kernelId);
    if (!where) return undefined;
    // Every restart (the runtime's, JupyterLab's, Jupyter's own after a crash) writes the
    // connection file again: a new stamp means a new process, whose IOPub must be joined anew.
    const stamp = fileStamp(where.connectionFile);
    const known = this.channels.get(kernelId);
    if (known?.channels.isOpen && known.stamp === stamp) return known.channels;
    if (known) this.dropChannels(kernelId);
    try {
      const channels = await KernelChannels.open(await readConnection(where.connectionFile, where.inside), where.host);
      // A stopped server's sockets are gone: stop reconnecting to them. A kernel restarted by
      // anyone (JupyterLab's menu too) is a new process whose IOPub must be joined again.
      const unwatchStop = this.whenStopped(server, () => this.dropChannels(kernelId));
      // After the current turn: an execute under way first learns of the death (and reports it) from the same status.
      const onRestart = (_: unknown, status: Kernel.Status) => {
        if (status !== 'restarting' && status !== 'autorestarting' && status !== 'dead') return;
        setTimeout(() => {
          if (this.channels.get(kernelId)?.channels === channels) this.dropChannels(kernelId);
        }, 0);
      };
      conn.statusChanged.connect(onRestart);
      const unwatch = () => {
        unwatchStop();
        conn.statusChanged.disconnect(onRestart);
      };
      this.channels.set(kernelId, { channels, unwatch, stamp });
      return channels;
    } catch (err) {
      this.noChannels.add(kernelId);
      this.log?.warn({ err, kernel_id: kernelId }, "the kernel's ZeroMQ channels could not be opened: it executes through its Jupyter server");
      return undefined;
    }
  }

  private owner(kernelId: string): JupyterServerRef {
    const server = this.owners.get(kernelId);
    // A warm kernel is nobody's until a run takes it: acting on it would hand that run a used kernel.
    if (!server || !server.running || this.warm?.holds(kernelId)) throw new UnknownKernelError(kernelId);
    server.touch();
    return server;
  }

  private async connection(kernelId: string): Promise<KernelConnection> {
    const server = this.owner(kernelId);
    const known = this.connections.get(kernelId);
    if (known && !known.isDisposed && known.connectionStatus !== 'disconnected') return known;
    const model = /^[0-9a-f-]{36}$/i.test(kernelId) ? await KernelAPI.getKernelModel(kernelId, server.settings) : undefined;
    if (!model) {
      this.forget(kernelId);
      throw new UnknownKernelError(kernelId);
    }
    // Outputs come here only while an execution goes through the server; otherwise the kernel's
    // status and small replies are all this connection reads (decision 0247). What it drops while
    // the kernel executes nothing (a background thread's flood) ends it beyond a budget: the next
    // request opens another.
    let dropped = 0;
    const serverSettings = withMessageGate(server.settings, (bytes) => {
      const path = this.executing.get(kernelId);
      if (bytes <= STATUS_MESSAGE_MAX_BYTES || path === 'server') return true;
      if (path === undefined && (dropped += bytes) > IDLE_DROPPED_MAX_BYTES) {
        dropped = 0;
        setImmediate(() => this.dropConnection(kernelId, conn));
      }
      return false;
    });
    const conn = new RuntimeKernelConnection({ model, serverSettings, handleComms: false });
    this.connections.set(kernelId, conn);
    return conn;
  }

  /**
   * Runs `code`; after `timeoutSeconds` the kernel is interrupted and the result says so.
   * `onStray`: told the bytes of messages that were no output of it, counted against `outputLimit`
   * with its output (a run counts them against its whole budget too).
   */
  execute(
    kernelId: string,
    code: string,
    timeoutSeconds = 300,
    signal?: AbortSignal,
    outputLimit = MAX_OUTPUT_BYTES,
    onStray?: (bytes: number) => void,
  ): Promise<ExecuteResult> {
    return this.queues.run(kernelId, async () => {
      // (Over ZeroMQ unless executeNow finds no channels.)
      this.executing.set(kernelId, 'channels');
      try {
        return await this.executeNow(kernelId, code, timeoutSeconds, signal, outputLimit, onStray);
      } finally {
        this.executing.delete(kernelId);
      }
    });
  }

  /** Calls `onStop` when the server stops; returns the function that cancels this. */
  private whenStopped(server: JupyterServerRef, onStop: (reason: string) => void): () => void {
    let watchers = this.stopWatchers.get(server);
    if (!watchers) {
      const set = new Set<(reason: string) => void>();
      watchers = set;
      this.stopWatchers.set(server, set);
      void server.stopped.then((reason) => {
        for (const w of set) w(reason);
      });
    }
    const own = watchers;
    own.add(onStop);
    return () => own.delete(onStop);
  }

  /** Why the kernel died, from its cgroup counters compared with before the execution. */
  private deathReason(server: JupyterServerRef, kernelId: string, before: { oomKills: number; pidsLimitHits: number }, fallback: string): string {
    const after = server.kernelEvents(kernelId);
    if (after.oomKills > before.oomKills) return `the kernel ran out of memory and was killed (limits: ${server.limitsText}); its state is lost`;
    if (after.pidsLimitHits > before.pidsLimitHits) return `the kernel died after reaching its process limit (limits: ${server.limitsText}); its state is lost`;
    return fallback;
  }

  /** `outputLimit`: MAX_OUTPUT_BYTES, or less for a run's cell (what is left of MAX_RUN_OUTPUT_BYTES). */
  private async executeNow(
    kernelId: string,
    code: string,
    timeoutSeconds: number,
    signal?: AbortSignal,
    outputLimit = MAX_OUTPUT_BYTES,
    reportStray?: (bytes: number) => void,
  ): Promise<ExecuteResult> {
    const limit = Math.min(outputLimit, MAX_OUTPUT_BYTES);
    const server = this.owner(kernelId);
    const conn = await this.connection(kernelId);
    const before = server.kernelEvents(kernelId);
    const outputs: Output[] = [];
    let executionCount: number | null = null;
    // What the cell made the runtime read, against `limit`: its output by the size kept, and over
    // ZeroMQ (kernel-channels.ts) every other byte the kernel sent meanwhile: messages for no
    // request of this cell's (its own code holds the kernel's key: it can sign a flood of them),
    // refused ones, and what its own messages carry beyond their output (padding no output needs).
    let outputBytes = 0;
    /** Of outputBytes: the bytes of messages that were no output (named in the error). */
    let strayBytes = 0;
    let flooded: (() => void) | undefined;
    /** Closes the cell's ZeroMQ channels when flooded: nothing more of what the kernel sends is read (the next execute opens them again). */
    let closeChannels: (() => void) | undefined;
    const charge = (output: number, stray: number): boolean => {
      if (outputBytes > limit) return false;
      outputBytes += output + stray;
      strayBytes += stray;
      if (stray > 0) reportStray?.(stray);
      if (outputBytes > limit) {
        flooded?.();
        closeChannels?.();
        return false;
      }
      return true;
    };
    const onIOPub = (msg: KernelMessage.IIOPubMessage, wireBytes = 0) => {
      const size = outputSize(msg);
      // No output takes more than 6 bytes a character on the wire (`\u0001`): beyond that and the envelope, padding.
      if (!charge(size, Math.max(0, wireBytes - 6 * size - ENVELOPE_BYTES))) return;
      const count = collect(outputs, msg);
      if (count !== undefined) executionCount = count;
    };
    // Each execute stands alone: with Jupyter's stop_on_error the kernel, after a cell's error,
    // aborts every execute that reaches it in the moment after its reply, and this runtime sends
    // the next queued one (another caller's, or the same caller's next cell) exactly then
    // (ipykernel 6's `_abort_queues`; seen in CI as an execute answered 'aborted' in 34 ms).
    const content = { code, stop_on_error: false, store_history: true, allow_stdin: false };
    const channels = await this.channelsFor(kernelId, server, conn);
    // The kernel's deaths and restarts are told on the server's websocket: it must be open before
    // the request goes out (a cell that kills its kernel at once would otherwise go unnoticed
    // until its timeout; through the websocket itself, a request waits for that anyway).
    if (channels) await whenConnected(conn, CONNECT_WAIT_MS);
    let future: { done: Promise<KernelMessage.IExecuteReplyMsg>; dispose(): void };
    if (!channels) this.executing.set(kernelId, 'server');
    if (channels) {
      future = channels.execute(content, onIOPub, (bytes) => charge(0, bytes));
      closeChannels = () => {
        if (this.channels.get(kernelId)?.channels === channels) this.dropChannels(kernelId);
        else channels.close();
      };
    } else {
      const viaServer = conn.requestExecute(content);
      viaServer.onIOPub = (msg) => onIOPub(msg);
      future = viaServer;
    }
    let timer: NodeJS.Timeout | undefined;
    let onStatus: ((_: unknown, status: Kernel.Status) => void) | undefined;
    let onAbort: (() => void) | undefined;
    let unwatch: (() => void) | undefined;
    const interrupted = new Promise<{ kind: 'timeout' } | { kind: 'died'; reason: string } | { kind: 'aborted' } | { kind: 'flooded' }>((resolve) => {
      flooded = () => resolve({ kind: 'flooded' });
      timer = setTimeout(() => resolve({ kind: 'timeout' }), timeoutSeconds * 1000);
      onStatus = (_: unknown, status: Kernel.Status) => {
        if (status === 'autorestarting' || status === 'dead') {
          resolve({
            kind: 'died',
            reason: this.deathReason(
              server,
              kernelId,
              before,
              status === 'dead' ? 'the kernel died and could not be restarted' : 'the kernel died unexpectedly and was restarted; its state is lost',
            ),
          });
        }
      };
      conn.statusChanged.connect(onStatus);
      unwatch = this.whenStopped(server, (reason) => resolve({ kind: 'died', reason: this.deathReason(server, kernelId, before, reason) }));
      if (signal) {
        onAbort = () => resolve({ kind: 'aborted' });
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
    });
    try {
      const first = await Promise.race([future.done, interrupted]);
      if ('kind' in first) {
        if (first.kind === 'died') {
          outputs.push({ output_type: 'error', ename: 'DeadKernelError', evalue: first.reason, traceback: [] });
          // A restarted kernel is a new process: it goes into the kernel's cgroup again.
          if (server.running) server.kernelStarted(kernelId);
          // The next execute goes over a new connection: one made before the restart may still
          // be reconnecting and lose a request sent in that window (seen under load: an execute
          // right after an OOM restart never answered). A new one queues until kernel_info.
          this.connections.get(kernelId)?.dispose();
          this.connections.delete(kernelId);
          this.dropChannels(kernelId);
          return { status: 'error', outputs, execution_count: executionCount, kernel_died: true };
        }
        // Both bounded: the interrupt goes through the Jupyter server, which may itself be stuck (on a mount that stopped answering).
        await Promise.race([conn.interrupt().catch(() => undefined), new Promise((r) => setTimeout(r, INTERRUPT_GRACE_MS))]);
        await Promise.race([future.done.catch(() => undefined), new Promise((r) => setTimeout(r, INTERRUPT_GRACE_MS))]);
        if (first.kind === 'aborted') {
          outputs.push({ output_type: 'error', ename: 'CancelledError', evalue: 'the execution was cancelled', traceback: [] });
          return { status: 'error', outputs, execution_count: executionCount };
        }
        if (first.kind === 'flooded') {
          const stray =
            strayBytes > 0
              ? `; ${(strayBytes / 1024 / 1024).toFixed(1)} MiB of it were messages that were no output of this cell (signed by the kernel for no request of the runtime's, refused, or padding), which count as output`
              : '';
          outputs.push({
            output_type: 'error',
            ename: 'OutputLimitError',
            evalue:
              limit < MAX_OUTPUT_BYTES
                ? `the run's output exceeded ${MAX_RUN_OUTPUT_BYTES / 1024 / 1024} MiB over all its cells; this cell's rest was dropped and the cell interrupted (write large results to files instead)${stray}`
                : `the cell's output exceeded ${MAX_OUTPUT_BYTES / 1024 / 1024} MiB; the rest was dropped and the cell interrupted${stray}`,
            traceback: [],
          });
          return { status: 'error', outputs, execution_count: executionCount };
        }
        if (!outputs.some((o) => o.output_type === 'error')) {
          outputs.push({ output_type: 'error', ename: 'TimeoutError', evalue: `execution exceeded ${timeoutSeconds} s and was interrupted`, traceback: [] });
        }
        return { status: 'error', outputs, execution_count: executionCount, timed_out: true };
      }
      const reply = first;
      const count = (reply.content as { execution_count?: number }).execution_count;
      return { status: reply.content.status === 'ok' ? 'ok' : 'error', outputs, execution_count: typeof count === 'number' ? count : executionCount };
    } catch (err) {
      // future.done rejects when the kernel answers with an error status in some versions.
      const content = (err as { content?: { status?: string; execution_count?: number } }).content;
      if (content?.status === 'error') return { status: 'error', outputs, execution_count: content.execution_count ?? executionCount };
      // The server stopped under us: its connection was disposed before the stop was noticed
      // here, or the connection broke first (user code killed every process it could see) and
      // the server's exit is noticed a moment later: wait for it briefly before calling it a failure.
      const lost = "the kernel's connection was lost";
      const stop =
        !server.running || conn.isDisposed
          ? undefined
          : await Promise.race([server.stopped, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000))]);
      if (!server.running || conn.isDisposed || stop !== undefined) {
        const reason = await Promise.race([server.stopped, new Promise<string>((r) => setTimeout(() => r(lost), 2000))]);
        outputs.push({ output_type: 'error', ename: 'DeadKernelError', evalue: this.deathReason(server, kernelId, before, reason), traceback: [] });
        return { status: 'error', outputs, execution_count: executionCount, kernel_died: true };
      }
      throw err;
    } finally {
      clearTimeout(timer);
      unwatch?.();
      if (onStatus) conn.statusChanged.disconnect(onStatus);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      future.dispose();
    }
  }

  async interrupt(kernelId: string): Promise<KernelInfo> {
    const server = this.owner(kernelId);
    await this.connection(kernelId);
    await KernelAPI.interruptKernel(kernelId, server.settings);
    return this.info(kernelId);
  }

  async restart(kernelId: string): Promise<KernelInfo> {
    const server = this.owner(kernelId);
    const conn = await this.connection(kernelId);
    await KernelAPI.restartKernel(kernelId, server.settings);
    // A fresh connection for the restarted kernel: the old socket may still be reconnecting.
    conn.dispose();
    this.connections.delete(kernelId);
    this.dropChannels(kernelId);
    this.noChannels.delete(kernelId);
    server.kernelStarted(kernelId);
    return this.info(kernelId);
  }

  async shutdown(kernelId: string): Promise<void> {
    const server = this.owner(kernelId);
    await this.connection(kernelId);
    try {
      await KernelAPI.shutdownKernel(kernelId, server.settings);
    } catch (err) {
      // jupyter_client answers 500 to a shutdown while it is restarting the kernel (after an OOM
      // kill): once more, after a moment.
      if ((err as { response?: { status?: number } }).response?.status === 404) return;
      await new Promise((r) => setTimeout(r, 1000));
      await KernelAPI.shutdownKernel(kernelId, server.settings).catch((again: unknown) => {
        if ((again as { response?: { status?: number } }).response?.status !== 404) throw again;
      });
    } finally {
      this.forget(kernelId);
      // Whatever the kernel left behind dies with its cgroup, even when Jupyter did not answer.
      await server.kernelGone(kernelId);
    }
  }

  private async info(kernelId: string): Promise<KernelInfo> {
    const server = this.owner(kernelId);
    const model = await KernelAPI.getKernelModel(kernelId, server.settings);
    if (!model) throw new UnknownKernelError(kernelId);
    return this.withOwnState(toInfo(model, server.workspaceId));
  }

  /**
   * jupyter_server's execution_state comes from its own iopub watcher, which can stay at
   * 'starting' while the kernel runs (seen in CI); where the runtime holds a live connection to
   * the kernel, the status that connection saw is the truth.
   */
  private withOwnState(info: KernelInfo): KernelInfo {
    const conn = this.connections.get(info.kernel_id);
    if (conn && !conn.isDisposed && conn.connectionStatus === 'connected' && conn.status !== 'unknown') return { ...info, execution_state: conn.status };
    return info;
  }

  /**
   * The kernels of every running server, asked all at once, each within LIST_SERVER_MS: a server
   * that does not answer (stopped by its own user code, whose uid it shares) lists none, and does
   * not hold up the answer or the backend's public health check, which asks this.
   */
  async list(): Promise<KernelInfo[]> {
    const perServer = await Promise.all(
      this.pool.running().map(async (server) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          // The request itself ends at the deadline too, so none is left waiting on the server.
          const signal = AbortSignal.timeout(LIST_SERVER_MS);
          const settings: ServerConnection.ISettings = { ...server.settings, fetch: (input, init) => server.settings.fetch(input, { ...init, signal }) };
          const models = await Promise.race([
            KernelAPI.listRunning(settings),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error('no answer')), LIST_SERVER_MS);
            }),
          ]);
          // Warm kernels are not listed: no caller can act on them (see owner()).
          return models.filter((model) => !this.warm?.holds(model.id)).map((model) => this.withOwnState(toInfo(model, server.workspaceId)));
        } catch {
          // a server that stopped meanwhile, or does not answer, has no kernels to list
          return [];
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    return perServer.flat();
  }

  /**
   * Executes every code cell of a notebook, in order, on a fresh kernel that is shut down
   * afterwards. Stops at the first failing cell (like nbclient without allow_errors);
   * `timeoutSeconds` bounds the whole notebook. With `files`, the workspace's files are copied
   * into a fresh directory of the workspace's sandbox, the kernel starts in the notebook's
   * directory there, and the files the run created or changed come back in `files`.
   */
  /**
   * A kernel for a run that has answered kernel_info. A kernel that does not answer within
   * KERNEL_START_TIMEOUT_MS (a start that hangs) is shut down and started once more, so that a
   * run never holds its worker's slot on a kernel that will never run a cell.
   */
  async startReadyKernel(kernelName: string, workspaceId: string | undefined, cwd?: string, signal?: AbortSignal): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      const kernelId = await this.startKernel(kernelName, workspaceId, cwd);
      const conn = await this.connection(kernelId);
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      const outcome = await Promise.race([
        conn.info.then(() => 'ready' as const),
        new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.startTimeoutMs))),
        new Promise<'aborted'>((resolve) => {
          onAbort = () => resolve('aborted');
          if (signal?.aborted) onAbort();
          else signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      if (outcome === 'ready') return kernelId;
      await this.shutdown(kernelId).catch(() => undefined);
      if (outcome === 'aborted') throw new Error('the run was cancelled while its kernel started');
      if (attempt >= 2) {
        throw new KernelUnavailableError(
          `the ${kernelName} kernel did not answer within ${Math.round(this.startTimeoutMs / 1000)} s of its start, twice; see the runtime's log`,
        );
      }
      this.log?.warn({ kernel_id: kernelId, workspace_id: workspaceId ?? null }, 'a kernel did not answer after its start: shut down, starting another');
    }
  }

  /**
   * Ends a run's kernel before the run's files are collected and the run answers. Jupyter's
   * graceful shutdown (IPython's exit, jupyter_client polling for it) took 0.6–3 s of a one-cell
   * run here and gives a throw-away kernel nothing: once the server has begun the shutdown (the
   * kernel reports the shutdown_request on IOPub; the server has stopped its restarter by then,
   * so it will not start the kernel again), the kernel's cgroup is killed, with everything the
   * kernel started, and Jupyter finishes its bookkeeping in the background. Without a cgroup
   * the shutdown is awaited as before.
   */
  private async endRunKernel(kernelId: string): Promise<void> {
    const server = this.owners.get(kernelId);
    const conn = this.connections.get(kernelId);
    let onIOPub: ((_: unknown, msg: KernelMessage.IIOPubMessage) => void) | undefined;
    const begun = new Promise<void>((resolve) => {
      onIOPub = (_, msg) => {
        if ((msg.parent_header as { msg_type?: string } | undefined)?.msg_type === 'shutdown_request') resolve();
      };
      conn?.iopubMessage.connect(onIOPub);
    });
    const deleting = this.shutdown(kernelId).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([begun, deleting, new Promise((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
    if (onIOPub && conn && !conn.isDisposed) conn.iopubMessage.disconnect(onIOPub);
    const killed = server?.running ? await server.kernelGone(kernelId).catch(() => false) : false;
    if (!killed) {
      await deleting;
      return;
    }
    const forgotten: Promise<void> = deleting.finally(() => this.ending.delete(forgotten));
    this.ending.add(forgotten);
  }

  /** Resolves when every run's kernel has been shut down in Jupyter too (tests, close). */
  async kernelsEnded(): Promise<void> {
    while (this.ending.size > 0) await Promise.allSettled([...this.ending]);
  }

  /** A kernel that can be handed to a run now: known, its server running, connected and idle. */
  async isReady(kernelId: string): Promise<boolean> {
    const server = this.owners.get(kernelId);
    const conn = this.connections.get(kernelId);
    if (!server?.running || !conn || conn.isDisposed || conn.connectionStatus !== 'connected' || conn.status !== 'idle') return false;
    // The server's word too (one request on its socket): a kernel deleted there a moment ago
    // (Jupyter's culler) may not have closed its websocket here yet.
    const model = await KernelAPI.getKernelModel(kernelId, server.settings);
    return model !== undefined && model.execution_state !== 'dead';
  }

  /**
   * Readies the workspace for its next run (decision 0209): its warm pool fills in the background,
   * starting the workspace's Jupyter server first when it is not running. Answers at once; false
   * when this runtime keeps no warm kernels (KERNEL_POOL_SIZE=0).
   */
  warmUp(workspaceId: string, kernelName = 'python3'): boolean {
    if (!this.warm) return false;
    this.warm.fill(workspaceId, kernelName);
    return true;
  }

  /**
   * The kernel of one run: a warm one of the workspace's pool when there is one (moved into the
   * run's directory), or the one the pool is starting, else one started for the run. Either way
   * it has executed nothing before.
   */
  private async kernelForRun(kernelName: string, workspaceId: string | undefined, cwd: string | undefined, signal?: AbortSignal): Promise<string> {
    const warm = await this.warm?.take(workspaceId, kernelName, Date.now(), signal);
    if (warm !== undefined) {
      try {
        if (cwd) await this.changeDirectory(warm, cwd);
        return warm;
      } catch (err) {
        this.log?.warn({ err, kernel_id: warm }, "a warm kernel could not enter the run's directory: starting a new one");
        await this.shutdown(warm).catch(() => undefined);
      }
    }
    return this.startReadyKernel(kernelName, workspaceId, cwd, signal);
  }

  /**
   * Moves a fresh kernel into `dir` (relative to its server's root, where it started) the way a
   * kernel started there would be: silent, outside the history and the execution count, and
   * binding no name in the user's namespace.
   */
  private async changeDirectory(kernelId: string, dir: string): Promise<void> {
    const conn = await this.connection(kernelId);
    const future = conn.requestExecute({
      code: `__import__('os').chdir(${JSON.stringify(dir)})`,
      silent: true,
      store_history: false,
      allow_stdin: false,
      stop_on_error: true,
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const reply = await Promise.race([
        future.done,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no answer within 30 s')), 30_000))),
      ]);
      if (reply.content.status !== 'ok') throw new Error(`chdir failed: ${reply.content.status}`);
    } finally {
      clearTimeout(timer);
      future.dispose();
    }
  }

  private get graceSeconds(): number {
    return Math.max(15, this.opts.runGraceSeconds ?? RUN_GRACE_SECONDS);
  }

  private get startTimeoutMs(): number {
    return this.opts.startTimeoutMs ?? KERNEL_START_TIMEOUT_MS;
  }

  /**
   * Runs a notebook (runNotebookNow), answering within `timeoutSeconds` plus RUN_GRACE_SECONDS
   * whatever happens: past that, the run's workspace server is force-stopped (its mount killed
   * first) and the run answered as failed with a TimeoutError that says so.
   */
  async runNotebook(notebook: Notebook, timeoutSeconds = 600, opts: RunNotebookOptions = {}): Promise<RunNotebookResult> {
    const started = Date.now();
    const hardDeadline = started + (timeoutSeconds + this.graceSeconds) * 1000;
    const executed: Notebook = structuredClone(notebook);
    const state: RunState = { server: undefined, cell: undefined, phase: 'starting' };
    const running = this.runNotebookNow(executed, timeoutSeconds, opts, started, hardDeadline, state);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((r) => (timer = setTimeout(() => r('expired'), Math.max(0, hardDeadline - Date.now()))));
    try {
      const first = await Promise.race([running, expired]);
      if (first !== 'expired') return first;
    } finally {
      clearTimeout(timer);
    }
    // Stuck: never on user code alone (cells are bounded by the timeout), but on something that does not answer.
    running.catch(() => undefined);
    const message =
      `the run did not end within its timeout (${timeoutSeconds} s) plus ${this.graceSeconds} s while ${state.phase}: ` +
      `the workspace's Jupyter server or its file mount stopped answering, so the server was stopped (with its kernels and its mount; ` +
      `files not uploaded yet are lost); the next run starts a fresh one`;
    this.log?.warn({ workspace_id: opts.workspaceId ?? null, phase: state.phase }, 'a run outlived its timeout and grace: force-stopping its server');
    // Stuck before it had a server: the server's start is bounded by its own time-outs, nothing to stop.
    const server = state.server;
    if (server?.forceStop) {
      await Promise.race([server.forceStop(message).catch(() => undefined), new Promise((r) => setTimeout(r, RUN_GRACE_RESERVE_MS).unref())]);
    }
    const error: Output = { output_type: 'error', ename: 'TimeoutError', evalue: message, traceback: [] };
    // The error goes where the run stood: the cell being executed, the first cell (before any ran),
    // or after the last cell's outputs (ending the kernel, uploading the files).
    const code = executed.cells.filter((c) => c.cell_type === 'code');
    const ran = state.phase === 'ending its kernel' || state.phase === "uploading the run's files";
    const cell = state.cell ?? (ran ? code.at(-1) : code[0]);
    if (cell) cell.outputs = ran && !state.cell ? [...(cell.outputs ?? []), error] : [error];
    const result: RunNotebookResult = { status: 'error', notebook: executed, duration_ms: Date.now() - started };
    if (state.server?.files) [result.files, result.files_error] = [[], message];
    return result;
  }

  private async runNotebookNow(
    executed: Notebook,
    timeoutSeconds: number,
    opts: RunNotebookOptions,
    started: number,
    hardDeadline: number,
    state: RunState,
  ): Promise<RunNotebookResult> {
    const server = await this.pool.server(opts.workspaceId);
    state.server = server;
    const contents = new Contents(server.settings);
    let runDir: string | undefined;
    let stamps = new Map<string, string>();
    const hashes = new Map<string, string>();
    // The workspace's files mounted as /workspace (decision 0140): the run works on them in place,
    // its writes become versions through the mount; nothing is copied in or collected.
    const live = server.files;
    // Uploads the mount fails from here on are this run's to report (their writers never saw them).
    const transfersSince = new Date();
    if (!live && opts.filesOnRequest && opts.files === undefined && opts.workspaceId !== undefined) throw new FilesRequiredError();
    if (live) await live.refresh().catch((err: unknown) => this.log?.warn({ err }, 'could not refresh the workspace mount before a run'));
    if (opts.files && !live) {
      const total = opts.files.reduce((n, f) => n + Math.floor((f.content_base64.length * 3) / 4), 0);
      if (total > this.filesMaxBytes)
        throw new FilesLimitError(
          `the workspace's files (${Math.round(total / 1024 / 1024)} MiB) exceed SANDBOX_FILES_MAX_BYTES (${Math.round(this.filesMaxBytes / 1024 / 1024)} MiB)`,
        );
      runDir = `${RUNS_DIR}/${randomUUID()}`;
      try {
        stamps = await contents.upload(runDir, opts.files);
      } catch (err) {
        await contents.remove(runDir).catch(() => undefined);
        if (err instanceof FilesLimitError) throw err;
        throw new SandboxFilesError(
          `the workspace's files could not be copied into its sandbox (SANDBOX_DISK_MB may be too small, or the workspace's own code filled it): ${(err as Error).message}`,
        );
      }
      for (const f of opts.files) hashes.set(f.path, createHash('sha256').update(Buffer.from(f.content_base64, 'base64')).digest('hex'));
    }
    const notebookDir = opts.notebookPath && isSafeRelativePath(opts.notebookPath) ? opts.notebookPath.split('/').slice(0, -1).join('/') : '';
    const cwd = runDir ? [runDir, notebookDir].filter(Boolean).join('/') : live && notebookDir ? notebookDir : undefined;
    state.phase = 'starting its kernel';
    if (cwd && notebookDir) await contents.mkdirs(cwd, new Set());
    let status: 'ok' | 'error' = 'ok';
    try {
      const kernelId = await this.kernelForRun(executed.metadata.kernelspec?.name ?? 'python3', opts.workspaceId, cwd, opts.signal);
      try {
        /** Output the run's cells keep so far, and the bytes of messages that were no output of them (MAX_RUN_OUTPUT_BYTES in all). */
        let kept = 0;
        for (const cell of executed.cells) {
          if (cell.cell_type !== 'code') continue;
          [state.cell, state.phase] = [cell, 'running a cell'];
          const source = Array.isArray(cell.source) ? cell.source.join('') : cell.source;
          const remaining = timeoutSeconds - (Date.now() - started) / 1000;
          if (remaining <= 0) {
            cell.outputs = [{ output_type: 'error', ename: 'TimeoutError', evalue: `the notebook exceeded ${timeoutSeconds} s`, traceback: [] }];
            status = 'error';
            break;
          }
          let stray = 0;
          const result = await this.execute(kernelId, source, remaining, opts.signal, Math.max(0, MAX_RUN_OUTPUT_BYTES - kept), (bytes) => (stray += bytes));
          kept += sizeOf(result.outputs) + stray;
          cell.outputs = result.outputs;
          cell.execution_count = result.execution_count;
          if (result.status === 'error') {
            status = 'error';
            break;
          }
        }
      } finally {
        [state.cell, state.phase] = [undefined, 'ending its kernel'];
        await this.endRunKernel(kernelId);
      }
      const result: RunNotebookResult = { status, notebook: executed, duration_ms: Date.now() - started };
      if (live) {
        // What the run wrote is a version before the run is reported finished: at most 60 s, and
        // never past the run's hard deadline (less what the forced stop needs).
        state.phase = "uploading the run's files";
        result.files = [];
        const flushMs = Math.min(60_000, hardDeadline - RUN_GRACE_RESERVE_MS - Date.now());
        try {
          await live.flush(Math.max(1000, flushMs));
          const failed = await live.failedTransfers(transfersSince);
          if (failed.length > 0) result.files_error = failedTransfersError(failed);
        } catch (err) {
          result.files_error = `the run's files could not be stored: ${(err as Error).message}`;
          if (err instanceof MountUnresponsiveError && server.forceStop) {
            // rclone does not answer: every later use of the mount (the next run's kernel start
            // in the notebook's folder) would hang on it too. A fresh server and mount instead.
            result.files_error += "; the workspace's Jupyter server and its file mount were stopped (the next run starts fresh ones)";
            const stop = server.forceStop(result.files_error).catch(() => undefined);
            await Promise.race([stop, new Promise((r) => setTimeout(r, Math.max(1000, hardDeadline - 2000 - Date.now())).unref())]);
          }
        }
      }
      if (runDir) {
        const skip = (p: string) => p === opts.notebookPath || p.split('/').some((s) => s.endsWith('.runs'));
        try {
          result.files = server.running ? await contents.changedFiles(runDir, stamps, hashes, this.filesMaxBytes, skip) : [];
          if (!server.running) result.files_error = "the workspace's Jupyter server stopped before the run's files could be collected";
        } catch (err) {
          result.files = [];
          result.files_error = err instanceof FilesLimitError ? err.message : `the run's files could not be collected: ${(err as Error).message}`;
        }
      }
      return result;
    } finally {
      if (runDir && server.running) await contents.remove(runDir).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.warm?.close();
    await this.kernelsEnded();
    for (const conn of this.connections.values()) conn.dispose();
    this.connections.clear();
  }
}

/** How many failed files a run's error names (the rest are counted). */
const FAILED_NAMED = 5;

/** A run's error for the files of the workspace the mount could not store while it ran. */
export function failedTransfersError(failed: readonly FailedTransfer[]): string {
  const named = failed.slice(0, FAILED_NAMED).map((f) => `${f.path}: ${f.reason}`);
  const more = failed.length > FAILED_NAMED ? ` (and ${failed.length - FAILED_NAMED} more)` : '';
  return `files of the workspace could not be stored while the run ran, and are not in the workspace: ${named.join(' | ')}${more}`;
}

function toInfo(model: Kernel.IModel, workspaceId: string | undefined): KernelInfo {
  return {
    kernel_id: model.id,
    kernel_name: model.name,
    execution_state: model.execution_state ?? 'unknown',
    last_activity: model.last_activity ?? null,
    workspace_id: workspaceId ?? null,
  };
}
