import { readFileSync } from 'node:fs';

/**
 * Sandbox uids: one unprivileged uid (gid = uid) per workspace, `base + 1 + n`, and `base`
 * itself for the scratch sandbox (kernels started without a workspace). The range must not
 * hold a real user or group of the machine, nor a range of /etc/subuid or /etc/subgid
 * (rootless containers of real users).
 */
export const DEFAULT_UID_BASE = 1_900_000_000;
export const UID_RANGE = 100_000_000;
export const MAX_UID = 2_147_483_646;

export class UidRangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UidRangeError';
  }
}

/** Files read by the range check; injectable for tests. */
export interface IdentityFiles {
  passwd: string;
  group: string;
  subuid: string;
  subgid: string;
}

export function hostIdentityFiles(): IdentityFiles {
  const read = (p: string) => {
    try {
      return readFileSync(p, 'utf8');
    } catch {
      return '';
    }
  };
  return { passwd: read('/etc/passwd'), group: read('/etc/group'), subuid: read('/etc/subuid'), subgid: read('/etc/subgid') };
}

/** Throws when [base, base + UID_RANGE) overlaps an id in use on the machine. */
export function checkUidRange(base: number, files: IdentityFiles = hostIdentityFiles()): void {
  const end = base + UID_RANGE;
  if (!Number.isInteger(base) || base < 65_536 || end > MAX_UID) {
    throw new UidRangeError(`SANDBOX_UID_BASE=${base} is outside 65536…${MAX_UID - UID_RANGE}; pick a base above every real user and subordinate id range`);
  }
  const clash = (what: string, id: number) =>
    new UidRangeError(`SANDBOX_UID_BASE=${base}: ${what} ${id} lies in the sandbox uid range ${base}…${end - 1}; choose another base`);
  for (const [what, text] of [
    ['user id', files.passwd],
    ['group id', files.group],
  ] as const) {
    for (const line of text.split('\n')) {
      const id = Number(line.split(':')[2]);
      if (line.trim() && Number.isInteger(id) && id >= base && id < end) throw clash(what, id);
    }
  }
  for (const [what, text] of [
    ['subordinate uid range starting at', files.subuid],
    ['subordinate gid range starting at', files.subgid],
  ] as const) {
    for (const line of text.split('\n')) {
      const [, start, count] = line.split(':').map(Number) as [number, number, number];
      if (Number.isInteger(start) && Number.isInteger(count) && start < end && start + count > base) throw clash(what, start);
    }
  }
}

/** Gives each workspace its own stable sandbox uid. */
export interface UidAllocator {
  uidFor(workspaceId: string): Promise<number>;
}

/** In-memory allocation (tests, and single processes without a database). */
export function memoryUidAllocator(base = DEFAULT_UID_BASE): UidAllocator {
  const uids = new Map<string, number>();
  return {
    uidFor(workspaceId) {
      let uid = uids.get(workspaceId);
      if (uid === undefined) {
        uid = base + 1 + uids.size;
        uids.set(workspaceId, uid);
      }
      return Promise.resolve(uid);
    },
  };
}

/** The generated /etc files of a sandbox: one user, its group, localhost, files-only lookups. */
export function etcFiles(uid: number, gid: number, home: string): Record<string, string> {
  return {
    '/etc/passwd': `user:x:${uid}:${gid}:sandbox user:${home}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    '/etc/group': `user:x:${gid}:\nnogroup:x:65534:\n`,
    '/etc/hosts': '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    '/etc/nsswitch.conf': 'passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nservices: files\nprotocols: files\n',
    '/etc/hostname': 'sandbox\n',
  };
}
