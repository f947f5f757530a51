import { KernelAPI, KernelConnection, ServerConnection, type Kernel, type KernelMessage } from '@jupyterlab/services';
import WebSocket from 'ws';
import { KernelUnavailableError, type JupyterEndpoint, type JupyterSource } from './jupyter-server.js';

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
}

export interface KernelInfo {
  kernel_id: string;
  kernel_name: string;
  execution_state: string;
  last_activity: string | null;
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

const INTERRUPT_GRACE_MS = 5000;

function settingsFor(endpoint: JupyterEndpoint): ServerConnection.ISettings {
  return ServerConnection.makeSettings({
    baseUrl: `${endpoint.url}/`,
    wsUrl: `${endpoint.url.replace(/^http/, 'ws')}/`,
    token: endpoint.token,
    appendToken: true,
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
  });
}

/** Appends an IOPub message to the outputs the way a notebook front end would. */
function collect(outputs: Output[], msg: KernelMessage.IIOPubMessage): number | undefined {
  const content = msg.content as Record<string, unknown>;
  switch (msg.header.msg_type) {
    case 'stream': {
      const name = content.name === 'stderr' ? 'stderr' : 'stdout';
      const text = String(content.text ?? '');
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
      outputs.push({ output_type: 'display_data', data: (content.data ?? {}) as Record<string, unknown>, metadata: (content.metadata ?? {}) as Record<string, unknown> });
      return undefined;
    case 'error':
      outputs.push({
        output_type: 'error',
        ename: String(content.ename ?? ''),
        evalue: String(content.evalue ?? ''),
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

/**
 * Kernels of one Jupyter server, driven with @jupyterlab/services. Executes on one kernel run
 * strictly one after another (a queue per kernel); different kernels run in parallel.
 */
export class KernelService {
  private readonly connections = new Map<string, KernelConnection>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly jupyter: JupyterSource) {}

  private async settings(): Promise<ServerConnection.ISettings> {
    return settingsFor(await this.jupyter.get());
  }

  async startKernel(kernelName = 'python3'): Promise<string> {
    const settings = await this.settings();
    try {
      const model = await KernelAPI.startNew({ name: kernelName }, settings);
      return model.id;
    } catch (err) {
      const status = (err as { response?: { status?: number } }).response?.status;
      throw new KernelUnavailableError(status ? `kernel ${kernelName} cannot start (HTTP ${status}); is its kernelspec installed?` : String(err));
    }
  }

  private async connection(kernelId: string): Promise<KernelConnection> {
    const known = this.connections.get(kernelId);
    if (known && !known.isDisposed && known.connectionStatus !== 'disconnected') return known;
    const settings = await this.settings();
    const model = /^[0-9a-f-]{36}$/i.test(kernelId) ? await KernelAPI.getKernelModel(kernelId, settings) : undefined;
    if (!model) throw new UnknownKernelError(kernelId);
    const conn = new KernelConnection({ model, serverSettings: settings, handleComms: false });
    this.connections.set(kernelId, conn);
    return conn;
  }

  /** Runs `code`; after `timeoutSeconds` the kernel is interrupted and the result says so. */
  execute(kernelId: string, code: string, timeoutSeconds = 300): Promise<ExecuteResult> {
    const previous = this.queues.get(kernelId) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => this.executeNow(kernelId, code, timeoutSeconds));
    this.queues.set(kernelId, run);
    void run.finally(() => {
      if (this.queues.get(kernelId) === run) this.queues.delete(kernelId);
    }).catch(() => undefined);
    return run;
  }

  private async executeNow(kernelId: string, code: string, timeoutSeconds: number): Promise<ExecuteResult> {
    const conn = await this.connection(kernelId);
    const outputs: Output[] = [];
    let executionCount: number | null = null;
    const future = conn.requestExecute({ code, stop_on_error: true, store_history: true, allow_stdin: false });
    future.onIOPub = (msg) => {
      const count = collect(outputs, msg);
      if (count !== undefined) executionCount = count;
    };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutSeconds * 1000);
    });
    try {
      const first = await Promise.race([future.done, timedOut]);
      if (first === 'timeout') {
        await conn.interrupt().catch(() => undefined);
        await Promise.race([future.done.catch(() => undefined), new Promise((r) => setTimeout(r, INTERRUPT_GRACE_MS))]);
        if (!outputs.some((o) => o.output_type === 'error')) {
          outputs.push({ output_type: 'error', ename: 'TimeoutError', evalue: `execution exceeded ${timeoutSeconds} s and was interrupted`, traceback: [] });
        }
        return { status: 'error', outputs, execution_count: executionCount, timed_out: true };
      }
      const reply = first as KernelMessage.IExecuteReplyMsg;
      const count = (reply.content as { execution_count?: number }).execution_count;
      return { status: reply.content.status === 'ok' ? 'ok' : 'error', outputs, execution_count: typeof count === 'number' ? count : executionCount };
    } catch (err) {
      // future.done rejects when the kernel answers with an error status in some versions.
      const content = (err as { content?: { status?: string; execution_count?: number } }).content;
      if (content?.status === 'error') return { status: 'error', outputs, execution_count: content.execution_count ?? executionCount };
      throw err;
    } finally {
      clearTimeout(timer);
      future.dispose();
    }
  }

  async interrupt(kernelId: string): Promise<KernelInfo> {
    await this.connection(kernelId);
    await KernelAPI.interruptKernel(kernelId, await this.settings());
    return this.info(kernelId);
  }

  async restart(kernelId: string): Promise<KernelInfo> {
    const conn = await this.connection(kernelId);
    await KernelAPI.restartKernel(kernelId, await this.settings());
    // A fresh connection for the restarted kernel: the old socket may still be reconnecting.
    conn.dispose();
    this.connections.delete(kernelId);
    return this.info(kernelId);
  }

  async shutdown(kernelId: string): Promise<void> {
    const conn = await this.connection(kernelId);
    await KernelAPI.shutdownKernel(kernelId, await this.settings());
    conn.dispose();
    this.connections.delete(kernelId);
  }

  private async info(kernelId: string): Promise<KernelInfo> {
    const model = await KernelAPI.getKernelModel(kernelId, await this.settings());
    if (!model) throw new UnknownKernelError(kernelId);
    return toInfo(model);
  }

  async list(): Promise<KernelInfo[]> {
    return (await KernelAPI.listRunning(await this.settings())).map(toInfo);
  }

  /**
   * Executes every code cell of a notebook, in order, on a fresh kernel that is shut down
   * afterwards. Stops at the first failing cell (like nbclient without allow_errors);
   * `timeoutSeconds` bounds the whole notebook.
   */
  async runNotebook(notebook: Notebook, timeoutSeconds = 600): Promise<{ status: 'ok' | 'error'; notebook: Notebook; duration_ms: number }> {
    const started = Date.now();
    const executed: Notebook = structuredClone(notebook);
    const kernelId = await this.startKernel(executed.metadata.kernelspec?.name ?? 'python3');
    let status: 'ok' | 'error' = 'ok';
    try {
      for (const cell of executed.cells) {
        if (cell.cell_type !== 'code') continue;
        const source = Array.isArray(cell.source) ? cell.source.join('') : cell.source;
        const remaining = timeoutSeconds - (Date.now() - started) / 1000;
        if (remaining <= 0) {
          cell.outputs = [{ output_type: 'error', ename: 'TimeoutError', evalue: `the notebook exceeded ${timeoutSeconds} s`, traceback: [] }];
          status = 'error';
          break;
        }
        const result = await this.execute(kernelId, source, remaining);
        cell.outputs = result.outputs;
        cell.execution_count = result.execution_count;
        if (result.status === 'error') {
          status = 'error';
          break;
        }
      }
    } finally {
      await this.shutdown(kernelId).catch(() => undefined);
    }
    return { status, notebook: executed, duration_ms: Date.now() - started };
  }

  async close(): Promise<void> {
    for (const conn of this.connections.values()) conn.dispose();
    this.connections.clear();
  }
}

function toInfo(model: Kernel.IModel): KernelInfo {
  return {
    kernel_id: model.id,
    kernel_name: model.name,
    execution_state: model.execution_state ?? 'unknown',
    last_activity: model.last_activity ?? null,
  };
}
