import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';

/** The three resources the sandbox limits through cgroups. */
export type Controller = 'memory' | 'pids' | 'cpu';
export const CONTROLLERS: readonly Controller[] = ['memory', 'pids', 'cpu'];

export interface Limits {
  /** Hard memory limit (RAM; swap is not granted on top). */
  memoryBytes?: number;
  /** Processes and threads at once. */
  pids?: number;
  /** CPU time as a number of cores (0.5 = half a core). */
  cpus?: number;
}

/** Where each controller lives: the directory of this process's own cgroup, and its version. */
export interface CgroupSupport {
  controllers: Partial<Record<Controller, { version: 1 | 2; dir: string }>>;
  /** Why some or all controllers cannot be used (shown in the start-up log). */
  problems: string[];
}

interface Mount {
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

function parseMountinfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    mounts.push({ root: unescape(left[3] ?? '/'), mountPoint: unescape(left[4] ?? ''), fsType: right[0] ?? '', superOptions: (right[2] ?? '').split(',') });
  }
  return mounts;
}

/** Inputs of the detection, injectable so that v1, v2 and hybrid layouts are tested on any host. */
export interface CgroupProbeInput {
  /** Contents of /proc/self/cgroup. */
  procSelfCgroup: string;
  /** Contents of /proc/self/mountinfo. */
  mountinfo: string;
  /** Reads a file of the cgroup file system (cgroup.controllers, cgroup.procs). */
  readFile(path: string): string | undefined;
  /** For cgroup v2: an empty, delegated cgroup to use instead of this process's own (SANDBOX_CGROUP_PARENT). */
  v2Parent?: string | undefined;
}

export function hostProbeInput(v2Parent?: string): CgroupProbeInput {
  return {
    procSelfCgroup: readFileSync('/proc/self/cgroup', 'utf8'),
    mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'),
    readFile: (p) => {
      try {
        return readFileSync(p, 'utf8');
      } catch {
        return undefined;
      }
    },
    v2Parent,
  };
}

/**
 * Finds the memory, pids and cpu controllers: cgroup v1 (one hierarchy per controller), v2
 * (the unified hierarchy) or both (hybrid: here v1 wins for the controllers bound to it). Our
 * cgroups are created below this process's own cgroup, so whatever limits the platform keeps
 * applying to the sandboxes too.
 */
export function detectCgroups(input: CgroupProbeInput): CgroupSupport {
  const mounts = parseMountinfo(input.mountinfo);
  const own = new Map<string, string>(); // "1:memory" / "2" → path
  for (const line of input.procSelfCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, names, path] = m as unknown as [string, string, string, string];
    if (id === '0' && names === '') own.set('v2', path);
    for (const n of names.split(',')) if (n) own.set(`v1:${n}`, path);
  }
  const support: CgroupSupport = { controllers: {}, problems: [] };
  const within = (mount: Mount, path: string): string | undefined => {
    const rel = posix.relative(mount.root, path);
    if (rel.startsWith('..')) return undefined;
    return join(mount.mountPoint, rel);
  };
  for (const c of CONTROLLERS) {
    const v1 = mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(c));
    if (v1) {
      const path = own.get(`v1:${c}`);
      const dir = path === undefined ? undefined : within(v1, path);
      if (dir) support.controllers[c] = { version: 1, dir };
      else support.problems.push(`cgroup v1 ${c}: this process's cgroup is not inside the mount ${v1.mountPoint}`);
      continue;
    }
    const v2 = mounts.find((m) => m.fsType === 'cgroup2');
    const path = own.get('v2');
    if (!v2 || path === undefined) {
      support.problems.push(`no cgroup controller ${c} is mounted`);
      continue;
    }
    const dir = input.v2Parent ? join(v2.mountPoint, input.v2Parent) : within(v2, path);
    if (!dir) {
      support.problems.push(`cgroup v2: this process's cgroup is not inside the mount ${v2.mountPoint}`);
      continue;
    }
    const available = (input.readFile(join(dir, 'cgroup.controllers')) ?? '').trim().split(/\s+/);
    if (!available.includes(c)) {
      support.problems.push(`cgroup v2: controller ${c} is not delegated to ${dir}`);
      continue;
    }
    support.controllers[c] = { version: 2, dir };
  }
  return support;
}

const write = (path: string, value: string) => writeFileSync(path, value);
const tryRead = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};
const counter = (text: string, key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

/**
 * One logical cgroup (the same relative path in each controller's hierarchy). Layout of a
 * sandbox: `<tree>/<sandbox>` carries the sandbox's limits, `<tree>/<sandbox>/main` holds its
 * processes and `<tree>/<sandbox>/k-<kernel>` one kernel each (leaves only, as cgroup v2's
 * no-internal-processes rule wants; v1 uses the same layout).
 */
export class Cgroup {
  constructor(readonly dirs: ReadonlyMap<Controller, { version: 1 | 2; dir: string }>) {}

  child(name: string): Cgroup {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw new Error(`invalid cgroup name ${JSON.stringify(name)}`);
    return new Cgroup(new Map([...this.dirs].map(([c, d]) => [c, { version: d.version, dir: join(d.dir, name) }])));
  }

  /** Creates the directories and applies the limits (a missing limit leaves the parent's). */
  create(limits: Limits = {}, delegate = false): this {
    for (const [c, { version, dir }] of this.dirs) {
      mkdirSync(dir, { recursive: true });
      if (version === 2 && delegate) enableSubtree(dir);
      if (c === 'memory' && limits.memoryBytes !== undefined) {
        const bytes = String(Math.floor(limits.memoryBytes));
        if (version === 1) {
          write(join(dir, 'memory.limit_in_bytes'), bytes);
          if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) write(join(dir, 'memory.memsw.limit_in_bytes'), bytes);
        } else {
          write(join(dir, 'memory.max'), bytes);
          if (existsSync(join(dir, 'memory.swap.max'))) write(join(dir, 'memory.swap.max'), '0');
        }
      }
      if (c === 'pids' && limits.pids !== undefined) write(join(dir, 'pids.max'), String(Math.floor(limits.pids)));
      if (c === 'cpu' && limits.cpus !== undefined) {
        const period = 100_000;
        const quota = Math.max(1000, Math.round(limits.cpus * period));
        if (version === 1) {
          write(join(dir, 'cpu.cfs_period_us'), String(period));
          write(join(dir, 'cpu.cfs_quota_us'), String(quota));
        } else {
          write(join(dir, 'cpu.max'), `${quota} ${period}`);
        }
      }
    }
    return this;
  }

  /** The `cgroup.procs` files a process writes its pid into to join this cgroup (one per v1 hierarchy). */
  procsFiles(): string[] {
    return [...new Set([...this.dirs.values()].map((d) => join(d.dir, 'cgroup.procs')))];
  }

  addProcess(pid: number): void {
    for (const f of this.procsFiles()) write(f, String(pid));
  }

  /** Processes in this cgroup and below. */
  processes(): number[] {
    const pids = new Set<number>();
    const walk = (dir: string, depth: number) => {
      for (const p of tryRead(join(dir, 'cgroup.procs')).split('\n')) if (p.trim()) pids.add(Number(p));
      if (depth > 4) return;
      for (const child of subtree(dir).slice(1)) walk(child, depth + 5);
    };
    for (const { dir } of this.dirs.values()) walk(dir, 0);
    return [...pids];
  }

  /**
   * Counters that explain why a process died: OOM kills and refused forks. Cgroup v1 counts
   * them in the victim's own cgroup (so the subtree is summed); v2's files are hierarchical.
   */
  events(): { oomKills: number; pidsLimitHits: number } {
    let oomKills = 0;
    let pidsLimitHits = 0;
    for (const [c, { version, dir }] of this.dirs) {
      const dirs = version === 1 ? subtree(dir) : [dir];
      for (const d of dirs) {
        if (c === 'memory') oomKills += counter(tryRead(join(d, version === 1 ? 'memory.oom_control' : 'memory.events')), 'oom_kill');
        if (c === 'pids') pidsLimitHits += counter(tryRead(join(d, 'pids.events')), 'max');
      }
    }
    return { oomKills, pidsLimitHits };
  }

  /**
   * Kills every process in this cgroup and below (cgroup.kill on v2; otherwise SIGKILL rounds
   * until none is left, so that a fork bomb cannot outrun it: each round kills all it sees, and
   * pids.max bounds how many new ones can appear), then removes the directories.
   */
  async destroy(): Promise<void> {
    const kill = [...this.dirs.values()].find((d) => d.version === 2 && existsSync(join(d.dir, 'cgroup.kill')));
    if (kill) {
      try {
        write(join(kill.dir, 'cgroup.kill'), '1');
      } catch {
        // fall through to the signal rounds
      }
    }
    for (let round = 0; round < 200; round++) {
      const pids = this.processes();
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await new Promise((r) => setTimeout(r, round < 10 ? 10 : 50));
    }
    for (let attempt = 0; attempt < 50; attempt++) {
      let busy = false;
      for (const { dir } of this.dirs.values()) busy = !removeTree(dir) || busy;
      if (!busy) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

function subtree(dir: string, depth = 0): string[] {
  const out = [dir];
  if (depth > 4) return out;
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) out.push(...subtree(join(dir, e.name), depth + 1));
  } catch {
    // gone
  }
  return out;
}

function enableSubtree(dir: string): void {
  const available = tryRead(join(dir, 'cgroup.controllers')).trim().split(/\s+/);
  const wanted = CONTROLLERS.filter((c) => available.includes(c));
  if (wanted.length > 0) write(join(dir, 'cgroup.subtree_control'), wanted.map((c) => `+${c}`).join(' '));
}

/** rmdir of a cgroup and its children (deepest first); false while some are still busy. */
function removeTree(dir: string): boolean {
  if (!existsSync(dir)) return true;
  let ok = true;
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) ok = removeTree(join(dir, e.name)) && ok;
    rmdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') ok = false;
  }
  return ok;
}

/**
 * The runtime's own subtree: `<own cgroup>/codeagent-<pid>-<random>`, created at start and
 * removed at stop. Subtrees of runtimes that died (their pid is gone) are swept at start.
 */
export class CgroupTree {
  private constructor(readonly root: Cgroup) {}

  /** Creates the tree, or explains why cgroups cannot be used (then rlimits are the fallback). */
  static create(support: CgroupSupport): CgroupTree | { problem: string } {
    const entries = Object.entries(support.controllers) as [Controller, { version: 1 | 2; dir: string }][];
    if (entries.length < CONTROLLERS.length) return { problem: support.problems.join('; ') || 'cgroup controllers missing' };
    const name = `codeagent-${process.pid}-${randomBytes(3).toString('hex')}`;
    try {
      for (const [, { version, dir }] of entries) {
        sweepStale(dir);
        if (version === 2) enableSubtree(dir);
      }
      const root = new Cgroup(new Map(entries.map(([c, d]) => [c, { version: d.version, dir: join(d.dir, name) }]))).create({}, true);
      return new CgroupTree(root);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const hint =
        e.code === 'EBUSY'
          ? 'cgroup v2 does not let a cgroup that holds processes delegate controllers: give the runtime an empty delegated cgroup in SANDBOX_CGROUP_PARENT (systemd: Delegate=yes)'
          : 'the runtime may not create cgroups here (run it as root, or delegate a cgroup to its user)';
      return { problem: `${e.code ?? ''} ${e.message}; ${hint}`.trim() };
    }
  }

  /** A sandbox's cgroup with its limits; its processes go into `.child('main')`. */
  sandbox(name: string, limits: Limits): Cgroup {
    return this.root.child(name).create(limits, true);
  }

  async destroy(): Promise<void> {
    await this.root.destroy();
  }
}

function sweepStale(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent).filter((n) => /^codeagent-\d+-[0-9a-f]+$/.test(n));
  } catch {
    return;
  }
  for (const n of names) {
    const pid = Number(n.split('-')[1]);
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch (err) {
      alive = (err as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (!alive) removeTree(join(parent, n));
  }
}
