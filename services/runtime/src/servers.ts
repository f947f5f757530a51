import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { KernelAPI, ServerConnection } from '@jupyterlab/services';
import type { FastifyBaseLogger } from 'fastify';
import type { Cgroup, Launcher, Limits, Sandbox, UidAllocator } from '@codeagent/sandbox';
import { SandboxUnavailableError } from '@codeagent/sandbox';
import { KernelUnavailableError } from './jupyter-server.js';
import { SANDBOX_EXTENSIONS_DIR, SANDBOX_LAB_DIR, type LabFiles } from './lab-answers.js';
import type { LiveMount, WorkspaceMounts } from './mounts.js';
import { serverModules } from './server-modules.js';
import { tcpSettings, unixSocketSettings } from './transport.js';

/** One Jupyter server: a workspace's (in its sandbox), the scratch sandbox's, or an external one. */
export interface JupyterServerRef {
  /** Workspace id, or undefined for the scratch sandbox (kernels started without a workspace). */
  readonly workspaceId: string | undefined;
  readonly settings: ServerConnection.ISettings;
  /** Resolves with the reason once the server has stopped. */
  readonly stopped: Promise<string>;
  readonly running: boolean;
  touch(): void;
  /** Puts a new (or restarted) kernel's process into its own cgroup with the kernel limits. */
  kernelStarted(kernelId: string): void;
  /** Kills whatever is left in the kernel's cgroup and removes it; true when there was one (its processes are gone now). */
  kernelGone(kernelId: string): Promise<boolean>;
  /** Why a kernel of this server may have died: cgroup counters (OOM kills, refused forks). */
  kernelEvents(kernelId: string): { oomKills: number; pidsLimitHits: number };
  /** Text for messages: the limits that apply. */
  readonly limitsText: string;
  /**
   * How the lab proxy reaches a sandboxed server: its Unix socket (host path), its own random
   * token and its base URL (`/jupyter/<workspace id>/`). Undefined for an external server.
   */
  readonly socket?: { path: string; token: string; basePath: string } | undefined;
  /**
   * Present when the workspace's own files are mounted as the server's /workspace (decision
   * 0140): what is written there becomes workspace versions, no copy in or out is needed.
   */
  readonly files?: Pick<LiveMount, 'refresh' | 'flush' | 'failedTransfers' | 'uploadOf'> | undefined;
  /**
   * Where a kernel's connection file and ZeroMQ `ipc` sockets are, as host paths, and the socket
   * prefix the server writes into that file (decision 0190). Undefined for an external server.
   */
  kernelSockets?(kernelId: string): { connectionFile: string; inside: string; host: string } | undefined;
  /**
   * Stops a server that stopped answering (a run past its hard deadline): its file mount is killed
   * first (processes stuck on it are freed), then the sandbox; `reason` is what the server's
   * kernels report. Bounded; the next action starts a fresh server.
   */
  forceStop?(reason: string): Promise<void>;
}

/** Where a workspace's server stands, for the spawn progress page. */
export type ServerStatus = { state: 'running' } | { state: 'starting'; sinceMs: number } | { state: 'stopped' } | { state: 'failed'; message: string };

export interface JupyterPool {
  /** The workspace's server (started on demand), or the scratch sandbox's for `undefined`. */
  server(workspaceId: string | undefined): Promise<JupyterServerRef>;
  running(): JupyterServerRef[];
  /** Whether the workspace's server runs, is starting, or why its last start failed (starts nothing). */
  status(workspaceId: string): ServerStatus;
  stop(): Promise<void>;
  /** The built JupyterLab host the workspaces' servers serve (none: Jupyter's REST API only). */
  readonly lab?: LabHost | undefined;
}

/** The built JupyterLab host (extensions/lab-host: `main.py`, `build/`) and the prebuilt extensions' directory (the bridge's `labextension/`), if built. */
export type LabHost = LabFiles;

/** The base URL of a workspace's server: the path the gateway routes to it (`/jupyter/<id>/`). */
export const labBasePath = (workspaceId: string): string => `/jupyter/${workspaceId}/`;

/** Whether the host at `lab` is built (else workspace servers serve Jupyter's REST API only). */
export const labHostBuilt = (lab: LabHost | undefined): lab is LabHost => lab !== undefined && existsSync(join(lab.hostDir, 'build', 'static', 'index.html'));

/** SANDBOX_MAX_SERVERS reached and none of the running servers is idle. */
export class ServerCapError extends KernelUnavailableError {
  constructor(max: number) {
    super(`${max} workspaces already have a running Jupyter server (SANDBOX_MAX_SERVERS=${max}) and none is idle; try again when a run finished`, false);
    this.name = 'ServerCapError';
  }
}

export interface SandboxLimits {
  /** The whole sandbox of a workspace (server and all its kernels). */
  sandbox: Limits;
  /** One kernel. */
  kernel: Limits;
  workspaceBytes: number;
  tmpBytes: number;
}

export interface SandboxedServersOptions {
  /** The launcher, or why the sandbox cannot work here (then every start is refused with that fix). */
  launcher: Launcher | SandboxUnavailableError;
  python: string;
  /** Per-workspace uids (root mode); without it every sandbox uses `uidBase + 1`. */
  uids?: UidAllocator | undefined;
  uidBase: number;
  limits: SandboxLimits;
  maxServers: number;
  /** A server with no kernel stops after this long without use (JUPYTER_IDLE_TIMEOUT). */
  idleSeconds: number;
  /** Jupyter's own culler stops kernels idle this long (KERNEL_CULL_IDLE_SECONDS; 0 = never). */
  cullIdleSeconds: number;
  log: FastifyBaseLogger;
  startTimeoutMs?: number;
  /** The JupyterLab host served by each workspace's server at `/jupyter/<id>/` (when built). */
  lab?: LabHost | undefined;
  /** Mount each workspace's files as its server's /workspace (root and rootless modes; decision 0140). */
  mounts?: WorkspaceMounts | undefined;
}

const MiB = 1024 * 1024;
/**
 * How long a sandbox may take to stop beyond its grace before its file mount is killed: a process
 * killed while a FUSE request of it waits on a mount that stopped answering stays in D state
 * (FUSE's flush on close waits uninterruptibly), and so does the sandbox's PID namespace with it.
 */
export const SANDBOX_STOP_WAIT_MS = 10_000;

/** Whether `p` settles within `ms`. */
const settlesWithin = (p: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref()),
  ]);

const describeLimits = (l: SandboxLimits) =>
  [
    l.kernel.memoryBytes ? `memory ${Math.round(l.kernel.memoryBytes / MiB)} MiB per kernel (KERNEL_MEMORY_MB)` : undefined,
    l.sandbox.memoryBytes ? `${Math.round(l.sandbox.memoryBytes / MiB)} MiB per workspace (SANDBOX_MEMORY_MB)` : undefined,
    l.kernel.pids ? `${l.kernel.pids} processes per kernel (KERNEL_PIDS_MAX)` : undefined,
  ]
    .filter(Boolean)
    .join(', ');

/** A workspace's Jupyter server inside its sandbox, reached over a Unix socket. */
class SandboxedServer implements JupyterServerRef {
  lastUsed = Date.now();
  readonly kernels = new Map<string, Cgroup | undefined>();
  readonly stopped: Promise<string>;
  private resolveStopped!: (reason: string) => void;
  private stopping = false;
  /** Why the server was force-stopped (forceStop): what its kernels report. */
  private forced: string | undefined;

  constructor(
    readonly workspaceId: string | undefined,
    readonly sandbox: Sandbox,
    readonly settings: ServerConnection.ISettings,
    private readonly closeTransport: () => Promise<void>,
    private readonly limits: SandboxLimits,
    private readonly log: FastifyBaseLogger,
    readonly socket: { path: string; token: string; basePath: string },
    readonly files: LiveMount | undefined,
    /** The server's runtime directory inside the sandbox (JUPYTER_RUNTIME_DIR): connection files and ipc sockets. */
    private readonly runDir: string,
  ) {
    this.stopped = new Promise((r) => (this.resolveStopped = r));
    void sandbox.exited.then(({ code, signal }) => {
      const { oomKills } = sandbox.cgroup?.events() ?? { oomKills: 0 };
      const reason =
        this.forced ??
        (this.stopping
          ? 'the Jupyter server was stopped'
          : `the workspace's Jupyter server stopped unexpectedly (${signal ?? `exit code ${code}`}${oomKills > 0 ? ', out of memory' : ''}); every kernel of it ended, the next action starts it again`);
      if (!this.stopping) log.warn({ workspace_id: workspaceId ?? null, code, signal }, 'a sandboxed Jupyter server stopped');
      void this.closeTransport().catch(() => undefined);
      // The mount goes after the last process that could hold a file open in it.
      void this.stopSandbox(0)
        .then(() => files?.unmount())
        .catch((err: unknown) => log.warn({ err, workspace_id: workspaceId ?? null }, 'unmounting the workspace files failed'))
        .finally(() => this.resolveStopped(reason));
    });
  }

  get running(): boolean {
    return this.sandbox.running;
  }

  kernelSockets(kernelId: string): { connectionFile: string; inside: string; host: string } | undefined {
    if (!/^[0-9a-f-]{36}$/.test(kernelId) || !this.running) return undefined;
    const inside = `${this.runDir}/kernel-${kernelId}-ipc`;
    const host = this.sandbox.hostPath(inside);
    // A Unix socket's path has room for 107 bytes (with the `-<port>` suffix).
    if (Buffer.byteLength(host) > 100) return undefined;
    return { connectionFile: this.sandbox.hostPath(`${this.runDir}/kernel-${kernelId}.json`), inside, host };
  }

  get limitsText(): string {
    return describeLimits(this.limits);
  }

  touch(): void {
    this.lastUsed = Date.now();
  }

  kernelStarted(kernelId: string): void {
    this.touch();
    const parent = this.sandbox.cgroup;
    let group = this.kernels.get(kernelId);
    if (parent) {
      const pid = this.sandbox.findProcess(`kernel-${kernelId}.json`);
      try {
        group ??= parent.child(`k-${kernelId}`).create(this.limits.kernel);
        if (pid !== undefined) group.addProcess(pid);
        else this.log.warn({ kernel_id: kernelId }, 'kernel process not found; it keeps only the workspace limits');
      } catch (err) {
        this.log.warn({ err, kernel_id: kernelId }, 'could not put the kernel into its cgroup; it keeps only the workspace limits');
      }
    }
    this.kernels.set(kernelId, group);
  }

  async kernelGone(kernelId: string): Promise<boolean> {
    const group = this.kernels.get(kernelId);
    this.kernels.delete(kernelId);
    // Whatever the kernel left behind (a fork bomb's children in a new session) dies with its cgroup.
    await group?.destroy();
    return group !== undefined;
  }

  kernelEvents(kernelId: string): { oomKills: number; pidsLimitHits: number } {
    const own = this.kernels.get(kernelId)?.events() ?? { oomKills: 0, pidsLimitHits: 0 };
    return own;
  }

  /**
   * Stops the sandbox, bounded: a sandbox that has not stopped SANDBOX_STOP_WAIT_MS after its
   * grace has a process stuck on its file mount (D state, see SANDBOX_STOP_WAIT_MS): the mount is
   * killed, which frees it, and the stop is awaited once more (bounded too).
   */
  private async stopSandbox(graceMs: number): Promise<void> {
    const stop = this.sandbox.stop(graceMs).catch(() => undefined);
    if (await settlesWithin(stop, graceMs + SANDBOX_STOP_WAIT_MS)) return;
    if (this.files) {
      this.log.warn({ workspace_id: this.workspaceId ?? null }, 'the sandbox did not stop (a process is stuck on its file mount): killing the mount');
      await this.files.kill();
      if (await settlesWithin(stop, SANDBOX_STOP_WAIT_MS)) return;
    }
    this.log.error({ workspace_id: this.workspaceId ?? null }, 'the sandbox did not stop; giving up on it');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.stopSandbox(3000);
    // Bounded as well: the unmount after the stop ends within its own bounds (rclone SIGKILLed after 30 s).
    await settlesWithin(this.stopped, SANDBOX_STOP_WAIT_MS + 40_000);
  }

  async forceStop(reason: string): Promise<void> {
    this.forced ??= reason;
    this.log.warn({ workspace_id: this.workspaceId ?? null, reason }, 'force-stopping a Jupyter server that stopped answering');
    // The mount first: whatever waits on it (the kernel, the server, a save) fails at once and can end.
    await this.files?.kill();
    await this.stop();
  }
}

/**
 * One sandboxed Jupyter server per workspace, started on demand, reached over a Unix socket
 * inside its sandbox, its kernels on ZMQ ipc inside the same sandbox. Servers with no kernel
 * stop after `idleSeconds`; at most `maxServers` run at once (an idle one is stopped to make room).
 */
export class SandboxedServers implements JupyterPool {
  private readonly servers = new Map<string, SandboxedServer>();
  private readonly starting = new Map<string, Promise<SandboxedServer>>();
  private readonly startedAt = new Map<string, number>();
  /** Why the last start of a workspace's server failed (cleared by the next start). */
  private readonly failures = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: SandboxedServersOptions) {
    const period = Math.max(1000, Math.min(60_000, (opts.idleSeconds * 1000) / 2));
    this.timer = setInterval(() => void this.cullIdle().catch((err: unknown) => opts.log.warn({ err }, 'idle culling failed')), period);
    this.timer.unref();
  }

  get lab(): LabHost | undefined {
    return labHostBuilt(this.opts.lab) ? this.opts.lab : undefined;
  }

  running(): JupyterServerRef[] {
    return [...this.servers.values()].filter((s) => s.running);
  }

  status(workspaceId: string): ServerStatus {
    if (this.servers.get(workspaceId)?.running) return { state: 'running' };
    if (this.starting.has(workspaceId)) return { state: 'starting', sinceMs: Date.now() - (this.startedAt.get(workspaceId) ?? Date.now()) };
    const failure = this.failures.get(workspaceId);
    return failure !== undefined ? { state: 'failed', message: failure } : { state: 'stopped' };
  }

  async server(workspaceId: string | undefined): Promise<JupyterServerRef> {
    if (this.closed) throw new KernelUnavailableError('the runtime is stopping', false);
    const { launcher } = this.opts;
    if (launcher instanceof SandboxUnavailableError) throw launcher;
    const key = workspaceId ?? 'scratch';
    const known = this.servers.get(key);
    if (known?.running) {
      known.touch();
      return known;
    }
    let pending = this.starting.get(key);
    if (!pending) {
      this.failures.delete(key);
      this.startedAt.set(key, Date.now());
      pending = this.start(launcher, workspaceId)
        .catch((err: unknown) => {
          this.failures.set(key, (err as Error).message);
          throw err;
        })
        .finally(() => this.starting.delete(key));
      this.starting.set(key, pending);
    }
    return pending;
  }

  private async makeRoom(key: string): Promise<void> {
    const live = [...this.servers.values()].filter((s) => s.running);
    // Other starts under way count; this one may or may not be in `starting` yet.
    const othersStarting = [...this.starting.keys()].filter((k) => k !== key).length;
    if (live.length + othersStarting < this.opts.maxServers) return;
    // Kernels started in JupyterLab are not in `kernels` (only the runtime's own are): ask the server.
    let idle: SandboxedServer | undefined;
    for (const candidate of live.filter((s) => s.kernels.size === 0).sort((a, b) => a.lastUsed - b.lastUsed)) {
      const running = await KernelAPI.listRunning(candidate.settings).then(
        (list) => list.length,
        () => 0,
      );
      if (running === 0) {
        idle = candidate;
        break;
      }
    }
    if (!idle) throw new ServerCapError(this.opts.maxServers);
    this.opts.log.info({ workspace_id: idle.workspaceId ?? null }, 'stopping an idle Jupyter server to make room');
    this.servers.delete(idle.workspaceId ?? 'scratch');
    await idle.stop();
  }

  private async start(launcher: Launcher, workspaceId: string | undefined): Promise<SandboxedServer> {
    const { python, log, limits } = this.opts;
    const uid = workspaceId === undefined ? this.opts.uidBase : ((await this.opts.uids?.uidFor(workspaceId)) ?? this.opts.uidBase + 1);
    await this.makeRoom(workspaceId ?? 'scratch');
    if (!existsSync(python)) throw new KernelUnavailableError(`cannot run ${python}: it does not exist`);
    const name = workspaceId === undefined ? 'scratch' : `w-${workspaceId.replace(/-/g, '').slice(0, 24).toLowerCase()}`;
    const layout = launcher.layout(name);
    const token = randomBytes(24).toString('hex');
    const modules = serverModules(layout.run);
    // A workspace's server serves JupyterLab (when the host is built) under the path the gateway
    // routes to it; the scratch sandbox's serves kernels only.
    const basePath = workspaceId === undefined ? '/' : labBasePath(workspaceId);
    const lab = workspaceId !== undefined && labHostBuilt(this.opts.lab) ? this.opts.lab : undefined;
    const off = launcher.mode === 'off';
    // The workspace's files as /workspace (not in off mode: no sandbox to bind them into).
    let mount: LiveMount | undefined;
    if (workspaceId !== undefined && this.opts.mounts && !off) {
      try {
        mount = await this.opts.mounts.mount(workspaceId, launcher.mode === 'root' ? { uid, gid: uid } : undefined, launcher.mode === 'root');
      } catch (err) {
        throw new KernelUnavailableError(`the workspace's files could not be mounted: ${(err as Error).message}`, false);
      }
    }
    const labMain = lab ? (off ? join(lab.hostDir, 'main.py') : `${SANDBOX_LAB_DIR}/main.py`) : undefined;
    const labExtensions = lab?.extensionsDir !== undefined && existsSync(lab.extensionsDir) ? (off ? lab.extensionsDir : SANDBOX_EXTENSIONS_DIR) : undefined;
    const command = [
      python,
      ...(labMain ? [labMain] : ['-m', 'jupyter_server']),
      `--ServerApp.sock=${layout.run}/jupyter.sock`,
      `--ServerApp.base_url=${basePath}`,
      // A save writes the file in place: on the workspace mount an atomic save's temporary copy
      // would become a version and a trash item of its own (decision 0071).
      '--FileContentsManager.use_atomic_writing=False',
      ...(labExtensions ? [`--LabServerApp.extra_labextensions_path=${labExtensions}`] : []),
      '--ServerApp.sock_mode=0600',
      `--ServerApp.root_dir=${layout.home}`,
      '--ServerApp.open_browser=False',
      '--KernelManager.transport=ipc',
      '--ContentsManager.allow_hidden=True',
      '--FileContentsManager.delete_to_trash=False',
      '--FileContentsManager.always_delete_dir=True',
      // Checkpoints stay out of the workspace's files (they would become versioned objects).
      ...(mount ? [`--FileCheckpoints.checkpoint_dir=${layout.tmp}/.ipynb_checkpoints`] : []),
      // The lab host's main.py loads the no-delay patch itself (it is on PYTHONPATH).
      ...(labMain ? [] : modules.extensionArgs),
      // A chunked upload (JupyterLab's file browser, files over 1 MiB) written as one file: on
      // the mount each close is an upload and a version (decision 0219).
      ...modules.contentsArgs,
      ...(this.opts.cullIdleSeconds > 0
        ? [`--MappingKernelManager.cull_idle_timeout=${this.opts.cullIdleSeconds}`, '--MappingKernelManager.cull_interval=60']
        : []),
      ...(launcher.mode === 'off' && process.getuid?.() === 0 ? ['--allow-root'] : []),
    ];
    // The token goes through the environment (never the command line); it is this server's own
    // random value, so user code that reads it (same uid) learns nothing of the platform.
    const env: Record<string, string> = {
      JUPYTER_TOKEN: token,
      IPYTHONDIR: `${layout.tmp}/.ipython`,
      // Kernel connection files and ipc sockets: short paths (Unix sockets), inside the sandbox only.
      JUPYTER_RUNTIME_DIR: layout.run,
      JUPYTER_DATA_DIR: `${layout.tmp}/.jupyter-data`,
      JUPYTER_CONFIG_DIR: `${layout.tmp}/.jupyter`,
      MPLCONFIGDIR: `${layout.tmp}/.mpl`,
      PYDEVD_DISABLE_FILE_VALIDATION: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      PYTHONPATH: modules.pythonPath,
      ...(lab ? { CODEAGENT_LAB_STATE_DIR: `${layout.tmp}/.jupyterlab-state` } : {}),
    };
    // An interpreter outside /usr (a virtual environment) is shown read-only with its prefix.
    const prefix = dirname(dirname(python));
    const readOnly = python.startsWith('/usr/') || off ? [] : [{ source: prefix, dest: prefix }];
    if (lab && !off) {
      readOnly.push(
        { source: join(lab.hostDir, 'main.py'), dest: `${SANDBOX_LAB_DIR}/main.py` },
        { source: join(lab.hostDir, 'build'), dest: `${SANDBOX_LAB_DIR}/build` },
      );
      if (labExtensions) readOnly.push({ source: lab.extensionsDir!, dest: SANDBOX_EXTENSIONS_DIR });
    }
    let sandbox: Sandbox;
    try {
      sandbox = await launcher.start({
        name,
        uid,
        command,
        env,
        files: modules.files,
        limits: limits.sandbox,
        workspaceBytes: limits.workspaceBytes,
        tmpBytes: limits.tmpBytes,
        readOnly,
        ...(mount ? { workspaceDir: mount.dir } : {}),
      });
    } catch (err) {
      await mount?.unmount().catch(() => undefined);
      throw new KernelUnavailableError(`the sandbox did not start: ${(err as Error).message}`, false);
    }
    const socket = sandbox.hostPath(`${layout.run}/jupyter.sock`);
    const transport = await unixSocketSettings(socket, token, basePath);
    const server = new SandboxedServer(
      workspaceId,
      sandbox,
      transport.settings,
      transport.close.bind(transport),
      limits,
      log,
      {
        path: socket,
        token,
        basePath,
      },
      mount,
      layout.run,
    );
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 60_000);
    for (;;) {
      if (!sandbox.running) {
        await transport.close().catch(() => undefined);
        const out = sandbox.output();
        const missing = /No module named '?(jupyter_server|ipykernel)/.exec(out)?.[1];
        throw new KernelUnavailableError(
          missing ? `python module ${missing} is missing` : `the Jupyter server exited: ${out.trim().split('\n').slice(-3).join(' | ')}`,
        );
      }
      if (existsSync(socket)) {
        try {
          const res = await ServerConnection.makeRequest(`${transport.settings.baseUrl}api/status`, {}, transport.settings);
          await res.text();
          if (res.ok) break;
        } catch {
          // not answering yet
        }
      }
      if (Date.now() > deadline) {
        await server.stop();
        throw new KernelUnavailableError('the Jupyter server did not start in time', false);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    this.servers.set(workspaceId ?? 'scratch', server);
    void server.stopped.then(() => {
      if (this.servers.get(workspaceId ?? 'scratch') === server) this.servers.delete(workspaceId ?? 'scratch');
    });
    log.info({ workspace_id: workspaceId ?? null, uid: launcher.mode === 'root' ? uid : undefined, mode: launcher.mode }, 'sandboxed Jupyter server started');
    return server;
  }

  /** Stops servers that have had no kernel and no use for `idleSeconds`. */
  async cullIdle(now = Date.now()): Promise<void> {
    for (const [key, server] of this.servers) {
      if (!server.running || now - server.lastUsed < this.opts.idleSeconds * 1000) continue;
      // Kernels culled by Jupyter itself are gone: forget them (and their cgroups).
      try {
        // Bounded: a server stuck on its file mount never answers, and would hold the culler of every server.
        const listed = KernelAPI.listRunning(server.settings);
        if (!(await settlesWithin(listed, 10_000))) throw new Error('no answer');
        const live = new Set((await listed).map((k) => k.id));
        for (const id of [...server.kernels.keys()]) if (!live.has(id)) await server.kernelGone(id);
        if (live.size > 0) continue;
      } catch {
        // the server does not answer: stop it
      }
      this.servers.delete(key);
      this.opts.log.info({ workspace_id: server.workspaceId ?? null }, 'stopping an idle Jupyter server');
      await server.stop();
    }
  }

  async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.allSettled([...this.starting.values()]);
    await Promise.allSettled([...this.servers.values()].map((s) => s.stop()));
    this.servers.clear();
    if (!(this.opts.launcher instanceof SandboxUnavailableError)) await this.opts.launcher.close();
  }
}

/** The Jupyter server at JUPYTER_URL (KERNEL_SANDBOX=off only): every workspace shares it. */
export function externalServer(url: string, token: string): JupyterPool {
  const ref: JupyterServerRef = {
    workspaceId: undefined,
    settings: tcpSettings(url, token),
    stopped: new Promise(() => undefined),
    running: true,
    touch: () => undefined,
    kernelStarted: () => undefined,
    kernelGone: () => Promise.resolve(false),
    kernelEvents: () => ({ oomKills: 0, pidsLimitHits: 0 }),
    limitsText: '',
  };
  return { server: () => Promise.resolve(ref), running: () => [ref], status: () => ({ state: 'running' }), stop: () => Promise.resolve() };
}
