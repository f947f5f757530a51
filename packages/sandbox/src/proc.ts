import { readFileSync, readdirSync } from 'node:fs';

/**
 * The fields of /proc/<pid>/stat after the command name (which may hold spaces and
 * parentheses): index 0 is field 3 (the state), or undefined when the process is gone.
 */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Parent pid of a process (field 4 of /proc/<pid>/stat). */
export function parentPid(pid: number): number | undefined {
  const fields = statFields(pid);
  return fields === undefined ? undefined : Number(fields[1]);
}

/** Every live process below `root` (not `root` itself). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const ppid = parentPid(pid);
    if (ppid === undefined) continue;
    const list = children.get(ppid) ?? [];
    list.push(pid);
    children.set(ppid, list);
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0 && out.length < 100_000) {
    for (const c of children.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** NUL-separated arguments of a process, or undefined when it is gone. */
export function commandLine(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '');
  } catch {
    return undefined;
  }
}

/** The first process below `root` one of whose arguments equals or ends with `suffix`. */
export function findDescendant(root: number, suffix: string): number | undefined {
  for (const pid of descendants(root)) {
    if (commandLine(pid)?.some((a) => a === suffix || a.endsWith(`/${suffix}`))) return pid;
  }
  return undefined;
}

/** A process as seen at one moment: its pid and its start time (a later process may get the same pid). */
export interface ProcessRef {
  pid: number;
  /** Clock ticks after boot (field 22 of /proc/<pid>/stat). */
  started: string;
}

/** State (field 3) and start time (field 22) of a process, or undefined when it is gone. */
function stateOf(pid: number): { state: string; started: string } | undefined {
  const fields = statFields(pid);
  return fields === undefined ? undefined : { state: fields[0]!, started: fields[19]! };
}

/** The processes `pids` as they are now (those already gone are left out). */
export function snapshot(pids: Iterable<number>): ProcessRef[] {
  const refs = new Map<number, ProcessRef>();
  for (const pid of pids) {
    const now = stateOf(pid);
    if (now !== undefined) refs.set(pid, { pid, started: now.started });
  }
  return [...refs.values()];
}

/** Whether the process still runs: not gone, not a zombie (it only waits for its reaper), its pid not taken by a later one. */
export function stillRunning(ref: ProcessRef): boolean {
  const now = stateOf(ref.pid);
  return now !== undefined && now.started === ref.started && now.state !== 'Z' && now.state !== 'X';
}

/** Resolves once every process of `refs` has ended, or after `ms`: with those still running then. */
export async function waitEnded(refs: readonly ProcessRef[], ms: number): Promise<ProcessRef[]> {
  const deadline = Date.now() + ms;
  for (let round = 0; ; round++) {
    const running = refs.filter(stillRunning);
    if (running.length === 0 || Date.now() >= deadline) return running;
    await new Promise((r) => setTimeout(r, round < 10 ? 10 : 50));
  }
}
