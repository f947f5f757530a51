import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CgroupTree, detectCgroups, hostProbeInput, type CgroupProbeInput } from './cgroups.js';
import { checkUidRange, type IdentityFiles } from './identity.js';
import { DEFAULT_TOOLS, Launcher, buildChain, type SandboxMode, type Tools } from './launcher.js';

/** The sandbox cannot work here; `message` names the fix. Kernels are refused, never run unsandboxed. */
export class SandboxUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxUnavailableError';
  }
}

export const INSTALL_BWRAP = 'install bubblewrap (`apt-get install -y bubblewrap`, or `scripts/system-deps.sh kernels`)';
export const OFF_HINT = 'or, for a single developer on their own machine only, set KERNEL_SANDBOX=off';

export interface PrepareOptions {
  /** KERNEL_SANDBOX. */
  enabled: boolean;
  uidBase: number;
  /** SANDBOX_CGROUP_PARENT: an empty delegated cgroup v2 (relative to the cgroup2 mount). */
  cgroupParent?: string | undefined;
  tools?: Tools;
  /** Off mode: where each sandbox's directories go (default: a new directory in the OS temp dir). */
  offRoot?: string;
  /** Injectable for tests. */
  cgroupInput?: CgroupProbeInput;
  identityFiles?: IdentityFiles;
  isRoot?: boolean;
}

export interface PreparedSandbox {
  launcher: Launcher;
  mode: SandboxMode;
  /** Start-up log lines: what is isolated and what is not, and why. */
  notes: string[];
  /** Warnings to print at every start (KERNEL_SANDBOX=off, missing cgroups). */
  warnings: string[];
}

function executable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs `true` in a minimal sandbox exactly as kernels will run, to learn whether namespaces are allowed. */
async function trial(mode: SandboxMode, tools: Tools, uid: number): Promise<string | undefined> {
  const chain = buildChain(
    { name: 'trial', uid, command: ['/usr/bin/true'], workspaceBytes: 1024 * 1024, tmpBytes: 1024 * 1024 },
    { mode, tools, cgroup: undefined, offDir: undefined },
  );
  const maxFd = Math.max(chain.infoFd ?? 2, ...chain.dataFds.keys());
  const stdio: ('ignore' | 'pipe')[] = ['ignore', 'ignore', 'pipe'];
  for (let fd = 3; fd <= maxFd; fd++) stdio.push('pipe');
  return new Promise((resolve) => {
    const child = spawn(chain.file, chain.args, { env: chain.env, cwd: chain.cwd, stdio });
    for (const stream of child.stdio) stream?.on('error', () => undefined);
    for (const [fd, content] of chain.dataFds) (child.stdio[fd] as NodeJS.WritableStream | null)?.end(content);
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
    child.stdio[chain.infoFd!]?.on('data', () => undefined);
    child.once('error', (err) => resolve(err.message));
    child.once('exit', (code) => resolve(code === 0 ? undefined : stderr.trim() || `exit code ${code}`));
  });
}

/**
 * Decides at start how user code runs on this machine, and refuses (SandboxUnavailableError
 * naming the fix) rather than silently running it unsandboxed. Root: a uid per workspace.
 * Not root: bubblewrap's user namespace only (said in the notes). Cgroups v1 or v2 when they
 * can be used, otherwise rlimits (said in the warnings).
 */
export async function prepareSandbox(opts: PrepareOptions): Promise<PreparedSandbox> {
  const tools = opts.tools ?? DEFAULT_TOOLS;
  const isRoot = opts.isRoot ?? process.getuid?.() === 0;
  const notes: string[] = [];
  const warnings: string[] = [];
  const cgroupsFor = () => {
    const tree = CgroupTree.create(detectCgroups(opts.cgroupInput ?? hostProbeInput(opts.cgroupParent)));
    if (tree instanceof CgroupTree) {
      notes.push('limits: cgroups (memory, pids, cpu) per sandbox and per kernel');
      return tree;
    }
    warnings.push(`cgroups cannot be used (${tree.problem}): memory and process limits fall back to rlimits (prlimit --as/--nproc), which are weaker`);
    return undefined;
  };

  if (!opts.enabled) {
    warnings.push(
      'KERNEL_SANDBOX=off: user code runs UNSANDBOXED as the platform user and can read every secret and file of the platform. Use this only as a single developer on your own machine.',
    );
    const offRoot = opts.offRoot ?? mkdtempSync(join(tmpdir(), 'cas-'));
    return {
      launcher: new Launcher({ mode: 'off', tools, cgroups: isRoot ? cgroupsFor() : undefined, offRoot, ownsOffRoot: opts.offRoot === undefined }),
      mode: 'off',
      notes,
      warnings,
    };
  }

  for (const [name, path] of Object.entries(tools) as [keyof Tools, string][]) {
    if (!executable(path)) {
      const fix = name === 'bwrap' ? INSTALL_BWRAP : `install util-linux (${path})`;
      throw new SandboxUnavailableError(`the kernel sandbox cannot start: ${path} is missing; ${fix}, ${OFF_HINT}`);
    }
  }
  const mode: SandboxMode = isRoot ? 'root' : 'rootless';
  if (isRoot) {
    try {
      checkUidRange(opts.uidBase, opts.identityFiles);
    } catch (err) {
      throw new SandboxUnavailableError(`the kernel sandbox cannot start: ${(err as Error).message}`);
    }
    notes.push(`mode: root; each workspace's sandbox runs as its own uid from ${opts.uidBase + 1} (scratch sandbox: ${opts.uidBase})`);
  } else {
    notes.push(
      "mode: not root; sandboxes use bubblewrap's user namespace and all run as the platform's own user (no per-workspace uid: run the runtime as root for that)",
    );
  }
  const failed = await trial(mode, tools, isRoot ? opts.uidBase : (process.getuid?.() ?? 1000));
  if (failed !== undefined) {
    const userns = /namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(failed);
    const fix = userns
      ? 'allow user namespaces (Debian: `sysctl -w kernel.unprivileged_userns_clone=1`; Ubuntu 24.04+: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; in a container: run it with a seccomp/AppArmor profile that permits unshare)'
      : INSTALL_BWRAP;
    throw new SandboxUnavailableError(`the kernel sandbox cannot start: bubblewrap failed (${failed.split('\n').slice(-2).join(' ')}); ${fix}, ${OFF_HINT}`);
  }
  const cgroups = isRoot || opts.cgroupParent ? cgroupsFor() : undefined;
  if (!cgroups && !isRoot && !opts.cgroupParent)
    warnings.push('not root: no cgroups; memory and process limits are rlimits (prlimit --as/--nproc), counted per user');
  return { launcher: new Launcher({ mode, tools, cgroups }), mode, notes, warnings };
}
