import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '@codeagent/config';
import { memoryUidAllocator, type Tools, type UidAllocator } from '@codeagent/sandbox';
import { createKernels, type Kernels } from './kernels-factory.js';
import type { ExecuteResult, KernelInfo, RunNotebookResult } from './kernels.js';
import type { WorkspaceMounts } from './mounts.js';
import type { LabHost } from './servers.js';

const MiB = 1024 * 1024;

/** An nbformat output as tests read it: the fields of every kind of `Output`, optional, so no narrowing is needed. */
export interface AnyOutput {
  output_type: string;
  name?: string;
  text?: string;
  data?: Record<string, unknown>;
  ename?: string;
  evalue?: string;
  traceback?: string[];
}
/** The answer of `execute`, with `AnyOutput`s. */
export type ExecuteAnswer = Omit<ExecuteResult, 'outputs'> & { outputs: AnyOutput[] };
/** The answer of `run_notebook`, with `AnyOutput`s in the executed notebook's cells. */
export type RunNotebookAnswer = Omit<RunNotebookResult, 'notebook'> & { notebook: { cells: { outputs: AnyOutput[]; execution_count?: number | null }[] } };
/** The answers of `start_kernel` and `list_kernels`. */
export type StartKernelAnswer = { kernel_id: string };
export type ListKernelsAnswer = { kernels: KernelInfo[] };

/** Sandbox settings for tests: real sandboxes with small limits. */
export function testSandboxSettings(over: Partial<Config['sandbox']> = {}): Config['sandbox'] {
  return {
    enabled: true,
    uidBase: 1_900_000_000,
    memoryBytes: 2048 * MiB,
    pidsMax: 256,
    cpus: 1,
    kernelMemoryBytes: 1024 * MiB,
    kernelPidsMax: 128,
    diskBytes: 256 * MiB,
    tmpBytes: 128 * MiB,
    maxServers: 8,
    idleSeconds: 600,
    filesMaxBytes: 16 * MiB,
    cgroupParent: undefined,
    ...over,
  };
}

/**
 * Kernels in real sandboxes, as the runtime starts them (tests only). Uids come from `uids`
 * (default: in memory), so no database is needed.
 */
export async function startTestKernels(
  opts: {
    sandbox?: Partial<Config['sandbox']>;
    python?: string;
    uids?: UidAllocator;
    log?: FastifyBaseLogger;
    tools?: Tools;
    warmPool?: { size: number; max: number; idleSeconds: number };
    lab?: LabHost;
    /** Mount each workspace's files as /workspace (needs a backend serving the WebDAV tree). */
    mounts?: WorkspaceMounts;
    /** false: execute through the Jupyter server only (decision 0190). */
    directChannels?: boolean;
    /** A shorter grace after a run's timeout than RUN_GRACE_SECONDS. */
    runGraceSeconds?: number;
  } = {},
): Promise<Kernels> {
  const sandbox = testSandboxSettings(opts.sandbox);
  return createKernels({
    sandbox,
    python: opts.python ?? '/usr/bin/python3',
    cullIdleSeconds: 0,
    log: opts.log ?? pino({ level: 'silent' }),
    uids: () => Promise.resolve(opts.uids ?? memoryUidAllocator(sandbox.uidBase)),
    ...(opts.tools ? { tools: opts.tools } : {}),
    ...(opts.warmPool ? { warmPool: opts.warmPool } : {}),
    ...(opts.lab ? { lab: opts.lab } : {}),
    ...(opts.mounts ? { mounts: opts.mounts } : {}),
    ...(opts.directChannels !== undefined ? { directChannels: opts.directChannels } : {}),
    ...(opts.runGraceSeconds !== undefined ? { runGraceSeconds: opts.runGraceSeconds } : {}),
  });
}
