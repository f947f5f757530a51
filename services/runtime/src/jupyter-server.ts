import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

/** How to reach a Jupyter server: base URL and its token. */
export interface JupyterEndpoint {
  url: string;
  token: string;
}

export const INSTALL_HINT =
  'no Jupyter kernel can run on this machine: install one with `apt-get install -y python3-jupyter-server python3-ipykernel` ' +
  '(Debian/Ubuntu), or point JUPYTER_URL and JUPYTER_TOKEN at a running Jupyter server';

export class KernelUnavailableError extends Error {
  constructor(detail: string) {
    super(`${INSTALL_HINT} (${detail})`);
    this.name = 'KernelUnavailableError';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

export interface ManagedJupyterOptions {
  python: string;
  rootDir: string;
  cullIdleSeconds: number;
  log: FastifyBaseLogger;
  startTimeoutMs?: number;
}

/**
 * A Jupyter server (Debian's jupyter_server) started and watched by the runtime, on a loopback
 * port with a random token. It is started on first use and again after it died; its kernel
 * culler stops kernels idle for `cullIdleSeconds`.
 */
export class ManagedJupyterServer {
  private child: ChildProcess | undefined;
  private starting: Promise<JupyterEndpoint> | undefined;
  private endpoint: JupyterEndpoint | undefined;

  constructor(private readonly opts: ManagedJupyterOptions) {}

  /** The running server, started if needed; rejects with KernelUnavailableError when it cannot run. */
  async get(): Promise<JupyterEndpoint> {
    if (this.endpoint && this.child && this.child.exitCode === null) return this.endpoint;
    this.starting ??= this.start().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async start(): Promise<JupyterEndpoint> {
    const port = await freePort();
    const token = randomBytes(24).toString('hex');
    mkdirSync(this.opts.rootDir, { recursive: true });
    const args = [
      '-m', 'jupyter_server',
      '--ServerApp.ip=127.0.0.1',
      `--ServerApp.port=${port}`,
      '--ServerApp.port_retries=0',
      '--ServerApp.open_browser=False',
      `--ServerApp.token=${token}`,
      `--ServerApp.root_dir=${this.opts.rootDir}`,
      ...(this.opts.cullIdleSeconds > 0
        ? [`--MappingKernelManager.cull_idle_timeout=${this.opts.cullIdleSeconds}`, '--MappingKernelManager.cull_interval=60']
        : []),
    ];
    if (process.getuid?.() === 0) args.push('--allow-root');
    const child = spawn(this.opts.python, args, {
      env: { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: '1', JUPYTER_PLATFORM_DIRS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    const keep = (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-4000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const spawnError = new Promise<never>((_, reject) => {
      child.once('error', (err) => reject(new KernelUnavailableError(`cannot run ${this.opts.python}: ${err.message}`)));
      child.once('exit', (code) => {
        const missing = /No module named '?(jupyter_server|ipykernel)/.exec(stderr)?.[1];
        reject(new KernelUnavailableError(missing ? `python module ${missing} is missing` : `the Jupyter server exited with code ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`));
      });
    });
    spawnError.catch(() => undefined);
    this.child = child;
    const endpoint = { url: `http://127.0.0.1:${port}`, token };
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 30_000);
    const ready = (async () => {
      while (Date.now() < deadline) {
        try {
          const res = await fetch(`${endpoint.url}/api/status`, { headers: { authorization: `token ${token}` }, signal: AbortSignal.timeout(1000) });
          await res.body?.cancel();
          if (res.ok) return endpoint;
        } catch {
          // not up yet
        }
        if (child.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      child.kill('SIGKILL');
      throw new KernelUnavailableError('the Jupyter server did not start in time');
    })();
    const result = await Promise.race([ready, spawnError]);
    child.once('exit', (code, signal) => {
      this.opts.log.warn({ code, signal }, 'the Jupyter server stopped; it is started again on the next action');
      this.endpoint = undefined;
    });
    this.opts.log.info({ url: endpoint.url }, 'Jupyter server started');
    this.endpoint = result;
    return result;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** Source of the Jupyter endpoint: a managed server, or a fixed external one (JUPYTER_URL). */
export interface JupyterSource {
  get(): Promise<JupyterEndpoint>;
  stop(): Promise<void>;
}

export function externalJupyter(endpoint: JupyterEndpoint): JupyterSource {
  return { get: async () => endpoint, stop: async () => undefined };
}
