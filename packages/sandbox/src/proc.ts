import { readFileSync, readdirSync } from 'node:fs';

/** Parent pid of a process (from /proc/<pid>/stat; the command name may hold spaces and parentheses). */
export function parentPid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[1]);
  } catch {
    return undefined;
  }
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
