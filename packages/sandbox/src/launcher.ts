import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Cgroup, CgroupTree, Limits } from './cgroups.js';
import { etcFiles } from './identity.js';
import { descendants, findDescendant, snapshot, waitEnded, type ProcessRef } from './proc.js';

/**
 * How user code is confined on this machine:
 * - `root`: the platform runs as root; each sandbox runs as its own unprivileged uid
 *   (setpriv), inside bubblewrap's namespaces, in its own cgroup;
 * - `rootless`: the platform runs as an ordinary user; bubblewrap's user namespace gives the
 *   same view, but every sandbox runs as that user (no uid per workspace);
 * - `off`: KERNEL_SANDBOX=off, one developer on their own machine: no namespaces at all.
 */
export type SandboxMode = 'root' | 'rootless' | 'off';

export interface Tools {
  bwrap: string;
  setpriv: string;
  prlimit: string;
  sh: string;
  unshare: string;
  mount: string;
}

export const DEFAULT_TOOLS: Tools = {
  bwrap: '/usr/bin/bwrap',
  setpriv: '/usr/bin/setpriv',
  prlimit: '/usr/bin/prlimit',
  sh: '/bin/sh',
  unshare: '/usr/bin/unshare',
  mount: '/usr/bin/mount',
};

/** A host path shown inside the sandbox. */
export interface Bind {
  source: string;
  dest: string;
}

export interface SandboxSpec {
  /** Unique among the launcher's running sandboxes; names its cgroup (letters, digits, `-`). */
  name: string;
  /** Its uid and gid (root mode: the real, unprivileged uid the processes run as). */
  uid: number;
  /** Program and arguments as seen inside; never put a secret here (`ps` shows it). */
  command: string[];
  /** Environment besides PATH, HOME, LANG, TMPDIR; may hold the sandbox's own token, never a platform secret. */
  env?: Record<string, string>;
  /** Limits of the whole sandbox (all its processes together). */
  limits?: Limits;
  /** Size of the private /workspace (tmpfs) and /tmp. */
  workspaceBytes: number;
  tmpBytes: number;
  /** Host files or directories shown read-only (e.g. the JupyterLab host's static files). */
  readOnly?: Bind[];
  /** A host directory to use as /workspace instead of a tmpfs (JupyterLab host only: its notebooks persist). */
  workspaceDir?: string;
  /**
   * Read-only files given by content, by path relative to the layout's `run` directory (e.g. a
   * Jupyter server extension). No host path is shared: the content goes through a pipe (bwrap
   * --ro-bind-data), or is written into the sandbox's own directory in off mode.
   */
  files?: Record<string, string>;
}

/** Paths as the sandboxed command sees them. */
export interface Layout {
  home: string;
  tmp: string;
  run: string;
}

export interface LauncherOptions {
  mode: SandboxMode;
  tools?: Tools;
  /** The runtime's cgroup subtree; without it limits fall back to rlimits (prlimit). */
  cgroups?: CgroupTree | undefined;
  /** Off mode only: the host directory that holds each sandbox's directories. */
  offRoot?: string;
  /** The launcher made `offRoot` and removes it when it closes. */
  ownsOffRoot?: boolean;
}

const SANDBOX_LAYOUT: Layout = { home: '/workspace', tmp: '/tmp', run: '/run' };
/**
 * How long `stop()` waits, once the cgroup is empty, for the processes it saw to finish exiting
 * (milliseconds are the rule; short, so that a stop's bounds in the runtime stay as they were).
 */
const STOP_SETTLE_MS = 2000;
const PATH = '/usr/local/bin:/usr/bin:/bin';

/** Read-only system directories shown in every sandbox (beside /usr), when they exist. */
function systemBinds(): string[] {
  const out: string[] = [];
  for (const d of ['/etc/ld.so.cache', '/etc/alternatives', '/etc/ssl', '/etc/ca-certificates']) if (existsSync(d)) out.push(d);
  try {
    for (const n of readdirSync('/etc')) if (/^python3(\.\d+)?$/.test(n)) out.push(`/etc/${n}`);
  } catch {
    // no /etc
  }
  return out;
}

/** The pieces of a launch: what runs on the host, with which environment and extra file descriptors. */
export interface Chain {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** Contents written to the extra pipes, by file-descriptor number (bwrap --ro-bind-data). */
  dataFds: Map<number, string>;
  /** File descriptor on which bwrap reports the sandbox's pid; undefined in off mode. */
  infoFd: number | undefined;
}

/**
 * Builds the launch chain (pure: no process started). Host side, in order: `sh` moves itself
 * into the sandbox's cgroup (when there is one), `prlimit` sets rlimits (no core dumps; the
 * memory and process limits when cgroups are missing), `setpriv` drops to the sandbox uid with
 * no supplementary groups, no new privileges, and dies with its parent, then `bwrap` builds
 * the namespaces. The environment is replaced, not inherited: nothing of the platform's
 * reaches the sandbox, and bwrap's own environment (/proc/1/environ inside) is this one too.
 */
export function buildChain(
  spec: SandboxSpec,
  opts: { mode: SandboxMode; tools: Tools; cgroup: Cgroup | undefined; offDir: string | undefined; stageDir?: string | undefined },
): Chain {
  const { mode, tools } = opts;
  if (!/^[a-z0-9][a-z0-9-]{0,40}$/.test(spec.name)) throw new Error(`invalid sandbox name ${JSON.stringify(spec.name)}`);
  const layout = mode === 'off' ? offLayout(opts.offDir!) : SANDBOX_LAYOUT;
  const env: Record<string, string> = { PATH, HOME: layout.home, LANG: 'C.UTF-8', TMPDIR: layout.tmp, ...spec.env };
  const args: string[] = [];
  const chain: string[] = [];
  if (opts.cgroup) {
    // Join the cgroup before anything else runs, so that no process of the sandbox escapes it.
    chain.push(tools.sh, '-c', 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 97; shift; done; shift; exec "$@"', 'sh', ...opts.cgroup.procsFiles(), '--');
  }
  // bwrap resolves bind sources as the sandbox uid, which may not traverse to a host directory
  // (DATA_DIR is 0700). As root, the directory is first bound onto an empty, traversable stage
  // directory inside a private mount namespace of this chain only: no mount is left on the host.
  const staged = mode === 'root' && spec.workspaceDir !== undefined && opts.stageDir !== undefined;
  if (staged) {
    chain.push(
      tools.unshare,
      '--mount',
      '--propagation',
      'private',
      '--',
      tools.sh,
      '-c',
      `${tools.mount} --bind "$1" "$2" && shift 2 && exec "$@"`,
      'sh',
      spec.workspaceDir!,
      opts.stageDir!,
    );
  }
  const rlimits = ['--core=0'];
  if (!opts.cgroup && spec.limits?.pids) rlimits.push(`--nproc=${spec.limits.pids}`);
  if (!opts.cgroup && spec.limits?.memoryBytes) rlimits.push(`--as=${Math.floor(spec.limits.memoryBytes)}`);
  chain.push(tools.prlimit, ...rlimits, '--');
  const drop = mode === 'root' ? [`--reuid=${spec.uid}`, `--regid=${spec.uid}`, '--clear-groups'] : [];
  chain.push(tools.setpriv, ...drop, '--no-new-privs', '--pdeathsig', 'KILL', '--');

  const dataFds = new Map<number, string>();
  let infoFd: number | undefined;
  if (mode === 'off') {
    chain.push(...spec.command);
  } else {
    let fd = 3;
    infoFd = fd++;
    const b: string[] = [
      '--unshare-user',
      '--uid',
      String(spec.uid),
      '--gid',
      String(spec.uid),
      '--disable-userns',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--unshare-net',
      '--hostname',
      'sandbox',
      '--die-with-parent',
      '--new-session',
      '--ro-bind',
      '/usr',
      '/usr',
      '--symlink',
      'usr/bin',
      '/bin',
      '--symlink',
      'usr/lib',
      '/lib',
      '--symlink',
      'usr/lib64',
      '/lib64',
      '--symlink',
      'usr/sbin',
      '/sbin',
    ];
    for (const [path, content] of Object.entries(etcFiles(spec.uid, spec.uid, layout.home))) {
      dataFds.set(fd, content);
      b.push('--ro-bind-data', String(fd++), path);
    }
    for (const d of systemBinds()) b.push('--ro-bind', d, d);
    try {
      b.push('--symlink', readlinkSync('/etc/localtime'), '/etc/localtime');
    } catch {
      // no time zone configured: UTC
    }
    b.push('--proc', '/proc', '--dev', '/dev', '--size', String(64 * 1024 * 1024), '--tmpfs', '/dev/shm');
    if (spec.workspaceDir) {
      b.push('--bind', staged ? opts.stageDir! : spec.workspaceDir, layout.home);
    } else {
      b.push('--size', String(spec.workspaceBytes), '--tmpfs', layout.home);
    }
    b.push('--size', String(spec.tmpBytes), '--tmpfs', layout.tmp, '--size', String(1024 * 1024), '--tmpfs', layout.run);
    for (const [rel, content] of Object.entries(spec.files ?? {})) {
      dataFds.set(fd, content);
      b.push('--ro-bind-data', String(fd++), `${layout.run}/${checkedFilePath(rel)}`);
    }
    // Read-only sources must be reachable by the sandbox uid (like /usr); bwrap checks that.
    for (const bind of spec.readOnly ?? []) b.push('--ro-bind', bind.source, bind.dest);
    // Nothing else is writable: the root and /dev (both tmpfs of bwrap) become read-only.
    b.push('--remount-ro', '/dev', '--remount-ro', '/', '--chdir', layout.home, '--info-fd', String(infoFd));
    chain.push(tools.bwrap, ...b, '--', ...spec.command);
  }
  const file = chain[0]!;
  args.push(...chain.slice(1));
  return { file, args, env, cwd: mode === 'off' ? layout.home : '/', dataFds, infoFd };
}

/** A path of SandboxSpec.files: relative, plain names, no `..`. */
function checkedFilePath(rel: string): string {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$/.test(rel)) throw new Error(`invalid sandbox file path ${JSON.stringify(rel)}`);
  return rel;
}

// Short names: Unix socket paths (Jupyter's, the kernels' ipc channels) must stay under 108 bytes.
function offLayout(dir: string): Layout {
  return { home: join(dir, 'w'), tmp: join(dir, 't'), run: join(dir, 'r') };
}

function offDirName(name: string): string {
  return createHash('sha256').update(name).digest('hex').slice(0, 8);
}

export class SandboxStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxStartError';
  }
}

/** A running sandbox. */
export class Sandbox {
  private tail = '';
  private innerPid: number | undefined;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly layout: Layout,
    readonly cgroup: Cgroup | undefined,
    private readonly mode: SandboxMode,
    private readonly offDir: string | undefined,
    private readonly stageDir?: string | undefined,
  ) {
    const keep = (c: Buffer) => {
      // Only a bounded tail is kept: user code can write to these pipes.
      this.tail = (this.tail + c.toString('utf8')).slice(-8192);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    if (mode === 'off') this.innerPid = child.pid;
  }

  /** The last output of the sandboxed command (bounded), for error messages. */
  output(): string {
    return this.tail;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves the sandbox's first process (bwrap --info-fd). */
  async ready(): Promise<void> {
    if (this.innerPid !== undefined) return;
    const info = this.child.stdio[3];
    if (!info) throw new SandboxStartError('no info pipe');
    this.innerPid = await new Promise<number>((resolve, reject) => {
      let text = '';
      const onData = (c: Buffer) => {
        text += c.toString();
        try {
          const pid = (JSON.parse(text) as { 'child-pid'?: number })['child-pid'];
          if (typeof pid === 'number') {
            info.off('data', onData);
            resolve(pid);
          }
        } catch {
          // incomplete JSON
        }
      };
      info.on('data', onData);
      void this.exited.then(({ code, signal }) =>
        reject(new SandboxStartError(`the sandbox exited before it started (${code ?? signal}): ${this.output().trim().split('\n').slice(-5).join(' | ')}`)),
      );
    });
  }

  /** Host path of a path inside the sandbox (through /proc/<pid>/root: no host directory is shared). */
  hostPath(inside: string): string {
    if (this.mode === 'off') return inside;
    if (this.innerPid === undefined) throw new Error('sandbox not ready');
    return `/proc/${this.innerPid}/root${inside}`;
  }

  /** Host pid of the sandboxed process whose argument ends with `suffix` (e.g. a kernel's connection file). */
  findProcess(suffix: string): number | undefined {
    return this.child.pid === undefined ? undefined : findDescendant(this.child.pid, suffix);
  }

  /** Stops every process of the sandbox: SIGTERM, then SIGKILL after `graceMs`, then whatever is left in its cgroup. */
  async stop(graceMs = 3000): Promise<void> {
    const pid = this.child.pid;
    let seen: ProcessRef[] = [];
    if (this.running && pid !== undefined) {
      const rest = descendants(pid);
      seen = snapshot([pid, ...rest, ...(this.cgroup?.processes() ?? [])]);
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
      // Off mode has no PID namespace that takes every process with it: kill what was below.
      for (const p of rest) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    await this.cgroup?.destroy();
    // The cgroup can look empty while a process of it has not finished exiting (the PID
    // namespace's init still reaping the namespace: CI saw the sandbox's bwrap running after
    // stop()). Return once every process seen before the stop has ended; bounded, as a process
    // stuck on a file mount ends only when the runtime kills the mount (SANDBOX_STOP_WAIT_MS).
    await waitEnded(seen, STOP_SETTLE_MS);
    if (this.offDir) rmSync(this.offDir, { recursive: true, force: true });
    // Only an empty mount point on the host (the mount lived in the sandbox's own namespace).
    // rmdir, never a recursive removal: should it still be a mount point, nothing below is touched.
    if (this.stageDir) {
      try {
        rmdirSync(this.stageDir);
      } catch {
        // busy or gone
      }
    }
  }
}

/** Starts sandboxes. One per runtime; it knows the machine's mode and cgroup subtree. */
export class Launcher {
  readonly mode: SandboxMode;
  private readonly tools: Tools;
  private readonly cgroups: CgroupTree | undefined;
  private starts = 0;
  private readonly offRoot: string | undefined;
  private stageRoot: string | undefined;
  private readonly ownsOffRoot: boolean;

  constructor(opts: LauncherOptions) {
    this.mode = opts.mode;
    this.tools = opts.tools ?? DEFAULT_TOOLS;
    this.cgroups = opts.cgroups;
    this.offRoot = opts.offRoot;
    this.ownsOffRoot = opts.ownsOffRoot ?? false;
    if (this.mode === 'off' && !this.offRoot) throw new Error('off mode needs offRoot');
  }

  get hasCgroups(): boolean {
    return this.cgroups !== undefined;
  }

  /** The paths the command of sandbox `name` will see. */
  layout(name: string): Layout {
    return this.mode === 'off' ? offLayout(join(this.offRoot!, offDirName(name))) : SANDBOX_LAYOUT;
  }

  async start(spec: SandboxSpec): Promise<Sandbox> {
    const offDir = this.mode === 'off' ? join(this.offRoot!, offDirName(spec.name)) : undefined;
    if (offDir) {
      rmSync(offDir, { recursive: true, force: true });
      const layout = offLayout(offDir);
      for (const d of Object.values(layout) as string[]) mkdirSync(d, { recursive: true, mode: 0o700 });
      for (const [rel, content] of Object.entries(spec.files ?? {})) {
        const path = join(layout.run, checkedFilePath(rel));
        mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
        writeFileSync(path, content, { mode: 0o400 });
      }
    }
    let stageDir: string | undefined;
    // The cgroup and the staging directory are this start's own: a stopped sandbox of the same
    // name may still be cleaning up (killing its cgroup, removing its mount point) while the
    // next one starts, and must never take the new one with it.
    const instance = `${spec.name}-${++this.starts}`;
    if (this.mode === 'root' && spec.workspaceDir) {
      this.stageRoot ??= mkdtempSync(join(tmpdir(), 'cas-stage-'));
      chmodSync(this.stageRoot, 0o755);
      stageDir = join(this.stageRoot, instance);
      mkdirSync(stageDir, { recursive: true, mode: 0o755 });
    }
    const cgroup = this.cgroups?.sandbox(instance, spec.limits ?? {});
    const main = cgroup?.child('main').create();
    const chain = buildChain(spec, { mode: this.mode, tools: this.tools, cgroup: main, offDir, stageDir });
    const maxFd = Math.max(2, chain.infoFd ?? 2, ...chain.dataFds.keys());
    const stdio: ('ignore' | 'pipe')[] = ['ignore', 'pipe', 'pipe'];
    for (let fd = 3; fd <= maxFd; fd++) stdio.push('pipe');
    try {
      const child = spawn(chain.file, chain.args, { env: chain.env, cwd: chain.cwd, stdio, detached: this.mode === 'off' });
      // A sandbox that fails early closes its ends of these pipes: that is reported through its exit, not as a stream error.
      for (const stream of child.stdio) stream?.on('error', () => undefined);
      for (const [fd, content] of chain.dataFds) {
        const pipe = child.stdio[fd] as NodeJS.WritableStream | null;
        pipe?.end(content);
      }
      const sandbox = new Sandbox(spec.name, child, this.layout(spec.name), cgroup, this.mode, offDir, stageDir);
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', (err) => reject(new SandboxStartError(`cannot start ${chain.file}: ${err.message}`)));
      });
      try {
        await sandbox.ready();
      } catch (err) {
        await sandbox.stop(0);
        throw err;
      }
      return sandbox;
    } catch (err) {
      await cgroup?.destroy();
      throw err;
    }
  }

  /** Removes the runtime's cgroup subtree (after every sandbox stopped). */
  async close(): Promise<void> {
    await this.cgroups?.destroy();
    // Off mode: the directory prepareSandbox made for the sandboxes (each removed at its stop).
    if (this.offRoot && this.ownsOffRoot) rmSync(this.offRoot, { recursive: true, force: true });
    if (this.stageRoot) {
      try {
        rmdirSync(this.stageRoot);
      } catch {
        // a stage directory is still in use
      }
    }
  }
}
