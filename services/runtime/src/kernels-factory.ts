import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '@codeagent/config';
import { SandboxUnavailableError, prepareSandbox, type PreparedSandbox, type Tools, type UidAllocator } from '@codeagent/sandbox';
import { KernelService } from './kernels.js';
import type { WorkspaceMounts } from './mounts.js';
import { SandboxedServers, externalServer, type JupyterPool, type LabHost } from './servers.js';

export interface KernelsOptions {
  sandbox: Config['sandbox'];
  python: string;
  cullIdleSeconds: number;
  /** Warm kernels for runs (KERNEL_POOL_SIZE, KERNEL_POOL_MAX, KERNEL_POOL_IDLE_SECONDS); none without it. */
  warmPool?: { size: number; max: number; idleSeconds: number } | undefined;
  /** false: execute through the Jupyter server's websocket only, never over ZeroMQ to the kernel (decision 0190). */
  directChannels?: boolean | undefined;
  log: FastifyBaseLogger;
  /** Per-workspace uids; chosen once the mode is known (root: from the database). */
  uids?: (prepared: PreparedSandbox) => Promise<UidAllocator | undefined>;
  /** KERNEL_SANDBOX=off only: an existing Jupyter server (JUPYTER_URL). */
  external?: { url: string; token: string } | undefined;
  startTimeoutMs?: number;
  /** The JupyterLab host each workspace's server serves (when built). */
  lab?: LabHost | undefined;
  /** Each workspace's files mounted as its server's /workspace (decision 0140); without it a tmpfs. */
  mounts?: WorkspaceMounts | undefined;
  /** Tests only: other paths for bwrap, setpriv, prlimit, sh. */
  tools?: Tools;
  /** Tests only: a shorter grace after a run's timeout than RUN_GRACE_SECONDS. */
  runGraceSeconds?: number;
}

export interface Kernels {
  kernels: KernelService;
  pool: JupyterPool;
  /** How user code runs here, or why it cannot (then every kernel start answers 503 with the fix). */
  prepared: PreparedSandbox | SandboxUnavailableError;
  stop(): Promise<void>;
}

/**
 * Decides at start how kernels are confined (prepareSandbox: refuse with the fix rather than run
 * unsandboxed), logs it, and builds the pool of per-workspace sandboxed Jupyter servers.
 */
export async function createKernels(opts: KernelsOptions): Promise<Kernels> {
  const { log, sandbox } = opts;
  let prepared: PreparedSandbox | SandboxUnavailableError;
  try {
    prepared = await prepareSandbox({
      enabled: sandbox.enabled,
      uidBase: sandbox.uidBase,
      cgroupParent: sandbox.cgroupParent,
      ...(opts.tools ? { tools: opts.tools } : {}),
    });
    for (const note of prepared.notes) log.info({ sandbox: prepared.mode }, note);
    for (const warning of prepared.warnings) log.warn({ sandbox: prepared.mode }, warning);
  } catch (err) {
    if (!(err instanceof SandboxUnavailableError)) throw err;
    prepared = err;
    log.error({ reason: err.message }, 'the kernel sandbox cannot work on this machine: kernels are refused until it is fixed');
  }
  let pool: JupyterPool;
  if (opts.external && !(prepared instanceof SandboxUnavailableError) && prepared.mode === 'off') {
    pool = externalServer(opts.external.url, opts.external.token);
    log.warn({ url: opts.external.url }, 'using the external Jupyter server of JUPYTER_URL (unsandboxed)');
  } else {
    pool = new SandboxedServers({
      launcher: prepared instanceof SandboxUnavailableError ? prepared : prepared.launcher,
      python: opts.python,
      uids: prepared instanceof SandboxUnavailableError ? undefined : await opts.uids?.(prepared),
      uidBase: sandbox.uidBase,
      limits: {
        sandbox: { memoryBytes: sandbox.memoryBytes, pids: sandbox.pidsMax, cpus: sandbox.cpus },
        kernel: { memoryBytes: sandbox.kernelMemoryBytes, pids: sandbox.kernelPidsMax },
        workspaceBytes: sandbox.diskBytes,
        tmpBytes: sandbox.tmpBytes,
      },
      maxServers: sandbox.maxServers,
      idleSeconds: sandbox.idleSeconds,
      cullIdleSeconds: opts.cullIdleSeconds,
      log,
      lab: opts.lab,
      mounts: opts.mounts,
      ...(opts.startTimeoutMs ? { startTimeoutMs: opts.startTimeoutMs } : {}),
    });
  }
  const kernels = new KernelService(pool, {
    filesMaxBytes: sandbox.filesMaxBytes,
    log,
    ...(opts.warmPool ? { warmPool: opts.warmPool } : {}),
    ...(opts.directChannels !== undefined ? { directChannels: opts.directChannels } : {}),
    ...(opts.runGraceSeconds !== undefined ? { runGraceSeconds: opts.runGraceSeconds } : {}),
  });
  return {
    kernels,
    pool,
    prepared,
    async stop() {
      await kernels.close();
      await pool.stop();
    },
  };
}
