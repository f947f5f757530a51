import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

/** Debian's rclone (`scripts/system-deps.sh webdav` installs it with fuse3). */
export const RCLONE = '/usr/bin/rclone';
export const INSTALL_MOUNT_HINT = 'install rclone and fuse3 (`scripts/system-deps.sh webdav`, or `apt-get install -y rclone fuse3`); FUSE needs /dev/fuse';

export interface WorkspaceMountOptions {
  /** The workspace's WebDAV tree, e.g. `http://127.0.0.1:8091/api/v1/dav/{ws}/`. */
  davUrl: string;
  /** A token the backend accepts for the workspace; handed over in the environment, never on a command line. */
  token?: string;
  /**
   * Instead of `token`: a file holding the current token, which the caller renews before it
   * expires; rclone reads it at start and again when the tree answers 401 (its
   * `bearer_token_command`, here `cat <file>`), so a renewed token is used without a remount.
   */
  tokenFile?: string;
  /** Owner of every file and folder in the mount (`--uid/--gid`), mode 0700 (`--umask 077`). */
  owner?: { uid: number; gid: number };
  /**
   * Let other users than rclone's reach the mount (`--allow-other`), each checked against the
   * owner and mode above (`--default-permissions`): a sandbox uid needs it (notes: trap 5).
   */
  allowOther?: boolean;
  /** An empty directory to mount on (created when missing). */
  mountpoint: string;
  /** rclone's VFS cache (a directory of its own per mount). */
  cacheDir: string;
  /** Serve rclone's remote control on loopback, with generated credentials (default: off). */
  remoteControl?: boolean;
  /** How long a listing is believed before the tree is asked again (default 5 s). */
  dirCacheSeconds?: number;
  rclone?: string;
  /** How long the mount may take to appear (default 20 s). */
  readyTimeoutMs?: number;
}

export interface RemoteControl {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  user: string;
  password: string;
}

export interface WorkspaceMount {
  mountpoint: string;
  pid: number;
  /** Present when `remoteControl` was asked for. */
  remoteControl?: RemoteControl;
  /** Forgets cached listings so that changes made through the API show at once (needs the remote control). */
  refresh(): Promise<void>;
  /**
   * Lists `folder` again (rclone `vfs/refresh`), else the nearest folder above it that the mount
   * knows: a file the mount wrote keeps its old size and content in rclone's memory, whatever was
   * stored since, until its folder is listed again (decision 0221).
   */
  refreshFolder(folder: string): Promise<void>;
  /**
   * Lists every folder of the workspace again (rclone `vfs/refresh recursive`): what refreshFolder
   * does for each, when the changes it would have been told of may have been lost (decision 0236).
   */
  refreshTree(timeoutMs?: number): Promise<void>;
  /**
   * Waits until every closed file is uploaded (`vfs/stats` and `core/stats`: no upload queued or
   * in progress; needs the remote control). Resolves with how it knew: `answered` when the
   * kernel's FUSE connection had no request left unanswered (fusectl) and nothing was uploading;
   * `quiet` after a while without an upload (a second without fusectl; 10 s with the mount busy
   * with other requests).
   */
  flush(timeoutMs?: number): Promise<FlushEnd>;
  /**
   * The transfers that failed since `since` (rclone's `core/transferred`: its newest 100, uploads
   * and reads alike), each with the component's reason. An upload fails after the writer's
   * `close(2)` has returned (rclone uploads while it handles the release), so this is the only
   * place its refusal (a full disk, the workspace quota, MAX_UPLOAD_BYTES) shows.
   */
  failedTransfers(since: Date): Promise<FailedTransfer[]>;
  /**
   * How the upload of `path` (a file closed after `since`) ended: `stored`, its failure, or
   * `unseen` when none showed within `settleMs` (default 2 s; nothing was written) or none ended
   * within `timeoutMs` (default 60 s). A save through the mount is stored only when this says so.
   */
  uploadOf(path: string, since: Date, settleMs?: number, timeoutMs?: number): Promise<FailedTransfer | 'stored' | 'unseen'>;
  /**
   * Writes what is still cached, unmounts and waits for rclone to end: SIGTERM, SIGKILL after
   * `graceMs` (default 30 s), then the mount is detached whatever rclone did. Bounded.
   */
  unmount(graceMs?: number): Promise<void>;
  /**
   * Ends a mount that stopped answering at once: SIGKILL to rclone, its FUSE connection aborted
   * and the mount point detached (`fusermount3 -u -z`). Every request waiting on the mount then
   * fails (ENOTCONN), which frees processes stuck on it, even in D state. Bounded; what was not
   * uploaded yet is lost.
   */
  kill(): Promise<void>;
}

/** A file rclone could not upload (or read): its path in the workspace and why, in the component's words. */
export interface FailedTransfer {
  path: string;
  reason: string;
  /** The HTTP status the platform refused it with (507, 413, …), when rclone's error names one. */
  status?: number;
}

/** The HTTP status in rclone's error for a refused request (`…: 507 Insufficient Storage`). */
function refusalStatus(error: string): number | undefined {
  const m = /: (\d{3}) [^:]*$/.exec(error);
  return m ? Number(m[1]) : undefined;
}

/**
 * The reason of a failed transfer in the platform's words: rclone reports a refusal of the
 * WebDAV tree as `<the JSON body>: <status> <text>`; its `message` says what to do.
 */
export function transferFailureReason(error: string): string {
  const m = /^(\{.*\}): (\d{3} .*)$/s.exec(error);
  if (m) {
    try {
      const body = JSON.parse(m[1]!) as { message?: unknown };
      if (typeof body.message === 'string' && body.message !== '') return `${body.message} (${m[2]!.trim()})`;
    } catch {
      // not the platform's JSON: rclone's own words below
    }
  }
  return error;
}

const failure = (path: string, error: string): FailedTransfer => {
  const status = refusalStatus(error);
  return { path, reason: transferFailureReason(error), ...(status !== undefined ? { status } : {}) };
};

/** rclone's `core/transferred`: its newest completed transfers, each with its error ('' when none). */
interface CompletedTransfers {
  transferred?: { name?: string; error?: string; completed_at?: string }[];
}

/** How long `uploadOf` waits for an upload to show at all (the file's release reaching rclone). */
const UPLOAD_SETTLE_MS = 2000;
/** How often `uploadOf` looks. */
const UPLOAD_POLL_MS = 20;

/** Whether a path on the mount still shows (bounded: a mount that stopped answering counts as yes). */
async function stillThere(path: string): Promise<boolean> {
  const seen = stat(path).then(
    () => true,
    () => false,
  );
  return Promise.race([seen, sleep(STAT_WAIT_MS).then(() => true)]);
}

/** How long `stillThere` waits for the mount. */
const STAT_WAIT_MS = 2000;

/** How a flush knew that every closed file was uploaded (WorkspaceMount.flush). */
export type FlushEnd = 'answered' | 'quiet';

/** How long a flush without fusectl's count must see no upload queued or in progress. */
const FLUSH_QUIET_MS = 1000;

/** How long a flush must see the count above 0 with no upload before it takes the count for other requests. */
const FLUSH_BUSY_MS = 10_000;

/** fusectl: one directory per FUSE connection of this machine, named by the mount's device minor. */
const FUSE_CONNECTIONS = '/sys/fs/fuse/connections';

/** rclone's remote control did not answer in time: the mount is stuck (a stopped or wedged rclone). */
export class MountUnresponsiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MountUnresponsiveError';
  }
}

/** How long one call of rclone's remote control may take: a stopped or stuck rclone never answers. */
export const RC_CALL_TIMEOUT_MS = 10_000;
/** A listing of every folder of a workspace (refreshTree) may take this long. */
const REFRESH_TREE_TIMEOUT_MS = 120_000;
/** How long rclone, fusermount3 or the FUSE abort may take to end once killed. */
const KILL_WAIT_MS = 5000;

function freeLoopbackPort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => ok(port));
    });
  });
}

let fuseControl: Promise<void> | undefined;

/**
 * fusectl mounted at /sys/fs/fuse/connections, as systemd does at boot; as root, on a system that
 * did not (a container, a machine without systemd), it is mounted here once. Without it a flush
 * falls back to its quiet second and a stuck mount is detached without aborting its connection.
 */
function ensureFuseControl(): Promise<void> {
  fuseControl ??= (async () => {
    if (process.getuid?.() !== 0 || !existsSync(FUSE_CONNECTIONS) || isMounted(FUSE_CONNECTIONS)) return;
    await runBounded('mount', ['-t', 'fusectl', 'fusectl', FUSE_CONNECTIONS]);
  })();
  return fuseControl;
}

/**
 * The file of fusectl that counts the requests of the FUSE connection mounted at `dir` that its
 * daemon has not answered yet (`waiting`), when fusectl is there and readable (root).
 */
function fuseWaitingFile(dir: string): string | undefined {
  const device = mountDevice(dir);
  if (!device?.startsWith('0:')) return undefined;
  const file = `${FUSE_CONNECTIONS}/${device.split(':')[1]}/waiting`;
  return readCount(file) === undefined ? undefined : file;
}

/** A number in a file of fusectl; undefined once it is gone (the connection ended: rclone died). */
function readCount(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Whether `dir` is a mount point now (the kernel's own table). */
export function isMounted(dir: string): boolean {
  return mountDevice(dir) !== undefined;
}

/** The device (`major:minor`) mounted at `dir`, from the kernel's table (no stat: a dead FUSE mount would block one). */
function mountDevice(dir: string): string | undefined {
  const target = resolve(dir);
  let device: string | undefined;
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    if (fields[4] === target) device = fields[2];
  }
  return device;
}

/** Resolves after `ms` (the timer does not hold the process open). */
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** Runs a command and waits for it at most `ms` (then SIGKILL); resolves with its exit code, or undefined on time-out. */
function runBounded(command: string, args: string[], ms = KILL_WAIT_MS): Promise<number | undefined> {
  return new Promise((ok) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      ok(undefined);
    }, ms);
    timer.unref();
    child.once('close', (code) => {
      clearTimeout(timer);
      ok(code ?? 1);
    });
    child.once('error', () => {
      clearTimeout(timer);
      ok(127);
    });
  });
}

/**
 * Detaches whatever is mounted at `dir`, FUSE or not, without ever waiting on it: aborts a FUSE
 * connection first (fusectl: every waiting request fails with ENOTCONN, which frees processes
 * stuck in D state on it), then a lazy unmount. Bounded.
 */
export async function detachMount(dir: string): Promise<void> {
  const device = mountDevice(dir);
  if (device === undefined) return;
  const minor = device.split(':')[1];
  const abort = `/sys/fs/fuse/connections/${minor}/abort`;
  if (device.startsWith('0:') && existsSync(abort)) {
    try {
      writeFileSync(abort, '1');
    } catch {
      // not a FUSE connection after all, or gone already
    }
  }
  if ((await runBounded('fusermount3', ['-u', '-z', dir])) !== 0 && isMounted(dir)) await runBounded('umount', ['-l', dir]);
}

/**
 * Mounts a workspace's WebDAV tree with `rclone mount`, as the runtime's file-mount helper does
 * (issue 15 item 2). The VFS cache suits notebooks: a file opened for writing is written to the
 * cache and uploaded whole when closed (`--vfs-cache-mode writes`), so every save is one PUT and
 * one version, and a crashed writer never leaves half a file in the workspace. The token goes in
 * the environment (`RCLONE_WEBDAV_BEARER_TOKEN`), never on a command line; the remote control,
 * when asked for, listens on loopback only and requires a generated user and password
 * (`RCLONE_RC_PASS`, also in the environment): rclone's default is no authentication at all.
 */
export async function mountWorkspace(opts: WorkspaceMountOptions): Promise<WorkspaceMount> {
  const rclone = opts.rclone ?? RCLONE;
  if (!existsSync(rclone)) throw new Error(`${rclone} is missing: ${INSTALL_MOUNT_HINT}`);
  if ((opts.token === undefined) === (opts.tokenFile === undefined)) throw new Error('give mountWorkspace either token or tokenFile');
  if (opts.tokenFile !== undefined && /\s/.test(opts.tokenFile)) throw new Error(`the token file's path may not contain white space: ${opts.tokenFile}`);
  mkdirSync(opts.mountpoint, { recursive: true });
  mkdirSync(opts.cacheDir, { recursive: true });
  const remoteControl: RemoteControl | undefined = opts.remoteControl
    ? { url: `http://127.0.0.1:${await freeLoopbackPort()}/`, user: 'codeagent', password: randomBytes(24).toString('base64url') }
    : undefined;
  const args = [
    'mount',
    ':webdav:',
    opts.mountpoint,
    '--config',
    join(opts.cacheDir, 'rclone.conf'), // none: every setting is given here
    '--cache-dir',
    opts.cacheDir,
    '--vfs-cache-mode',
    'writes',
    '--vfs-write-back',
    '0s',
    '--dir-cache-time',
    `${opts.dirCacheSeconds ?? 5}s`,
    // The kernel keeps no attributes or names of its own (rclone's default is 1 s): files change
    // outside the mount (the API, WebDAV), and a file read within a second of its replacement
    // was read with its old size and failed with EIO (decision 0215). Lookups are answered from
    // rclone's directory cache, in memory.
    '--attr-timeout',
    '0s',
    // ownCloud's dialect: each upload carries the file's own time (`X-OC-Mtime`), which the
    // platform's WebDAV tree keeps and reports back, so a file's time is its writer's and does
    // not change when its upload ends (decision 0220).
    '--webdav-vendor',
    'owncloud',
    '--log-level',
    'NOTICE',
    ...(opts.owner ? ['--uid', String(opts.owner.uid), '--gid', String(opts.owner.gid), '--umask', '077'] : []),
    ...(opts.allowOther ? ['--allow-other', '--default-permissions'] : []),
    ...(remoteControl ? ['--rc', '--rc-addr', new URL(remoteControl.url).host, '--rc-user', remoteControl.user] : []),
  ];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: opts.cacheDir,
    RCLONE_WEBDAV_URL: opts.davUrl,
    ...(opts.token !== undefined ? { RCLONE_WEBDAV_BEARER_TOKEN: opts.token } : { RCLONE_WEBDAV_BEARER_TOKEN_COMMAND: `/bin/cat ${opts.tokenFile}` }),
    ...(remoteControl ? { RCLONE_RC_PASS: remoteControl.password } : {}),
  };
  await ensureFuseControl();
  const child: ChildProcess = spawn(rclone, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 20_000);
  while (!isMounted(opts.mountpoint)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`rclone could not mount ${opts.davUrl} on ${opts.mountpoint}: ${stderr.trim() || 'no answer in time'} (${INSTALL_MOUNT_HINT})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (remoteControl) {
    // The remote control comes up beside the mount; wait until it answers (401 counts).
    while (
      !(await fetch(new URL('rc/noop', remoteControl.url), { method: 'POST', signal: AbortSignal.timeout(2000) }).then(
        () => true,
        () => false,
      ))
    ) {
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        await Promise.race([exited, sleep(KILL_WAIT_MS)]);
        await detachMount(opts.mountpoint);
        throw new Error(`rclone's remote control did not come up: ${stderr.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  // Every call is bounded: a stopped rclone still accepts connections (the kernel queues them)
  // but never answers, and an unbounded call would hold its run for ever.
  const call = async (command: string, params: Record<string, string> = {}, timeoutMs = RC_CALL_TIMEOUT_MS): Promise<unknown> => {
    if (!remoteControl) throw new Error('this mount has no remote control (mount with remoteControl: true)');
    const signal = AbortSignal.timeout(Math.max(1, timeoutMs));
    try {
      const res = await fetch(new URL(command, remoteControl.url), {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${remoteControl.user}:${remoteControl.password}`).toString('base64')}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify(params),
        signal,
      });
      if (!res.ok) throw new Error(`rclone ${command}: ${res.status} ${await res.text()}`);
      return await res.json();
    } catch (err) {
      if (signal.aborted)
        throw new MountUnresponsiveError(`the workspace's file mount did not answer within ${Math.round(timeoutMs / 1000)} s (rclone ${command})`);
      throw err;
    }
  };
  // One look at rclone's transfers serves every save waiting within UPLOAD_POLL_MS: however many
  // saves a member sends at once, rclone answers at most two calls per interval for this mount.
  type Transfers = [CompletedTransfers, { transferring?: { name?: string }[] }];
  let lastLook: { at: number; result: Promise<Transfers> } | undefined;
  const transfers = (): Promise<Transfers> => {
    if (lastLook === undefined || Date.now() - lastLook.at >= UPLOAD_POLL_MS) {
      lastLook = { at: Date.now(), result: Promise.all([call('core/transferred'), call('core/stats')]) as Promise<Transfers> };
    }
    return lastLook.result;
  };
  const killed = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await Promise.race([exited, sleep(KILL_WAIT_MS)]);
    }
    // rclone gone (or not): its mount must not stay behind, answering nothing.
    await detachMount(opts.mountpoint);
  };

  return {
    mountpoint: opts.mountpoint,
    pid: child.pid!,
    ...(remoteControl ? { remoteControl } : {}),
    refresh: async () => {
      await call('vfs/forget');
    },
    async refreshFolder(folder) {
      for (let dir = folder; ; dir = dir.includes('/') ? dir.slice(0, dir.lastIndexOf('/')) : '') {
        // rclone answers 200 with each folder's outcome: "OK", or why not (a folder it does not know).
        const answer = (await call('vfs/refresh', dir === '' ? {} : { dir })) as { result?: Record<string, string> };
        const outcome = answer.result?.[dir];
        if (outcome === 'OK') return;
        if (dir === '') throw new Error(`rclone could not list the workspace's top folder again: ${outcome ?? 'no answer'}`);
      }
    },
    async refreshTree(timeoutMs = REFRESH_TREE_TIMEOUT_MS) {
      const answer = (await call('vfs/refresh', { recursive: 'true' }, timeoutMs)) as { result?: Record<string, string> };
      const outcome = answer.result?.[''];
      if (outcome !== 'OK') throw new Error(`rclone could not list the workspace's folders again: ${outcome ?? 'no answer'}`);
    },
    async flush(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      // close(2) returns before rclone has handled the file's release (FUSE sends it
      // asynchronously), and with `--vfs-write-back 0s` rclone 1.60 uploads the file while it
      // handles the release (its upload queue stays empty: the upload shows only among the
      // transfers of `core/stats`). The kernel counts the requests rclone has not answered
      // (fusectl's `waiting`; a release is counted from the moment its process closed the file,
      // or exited, until its upload is done): read before the stats, none waiting and nothing
      // uploading means every file closed by then is stored. The count also holds other
      // requests (a JupyterLab reading files): with it above 0 and nothing uploading for
      // FLUSH_BUSY_MS, the rest is taken for those. Without the count: nothing uploading for
      // FLUSH_QUIET_MS (a release under load was seen to take longer than 250 ms, CI 2026-11-23).
      const waitingFile = fuseWaitingFile(opts.mountpoint);
      const quietFor = waitingFile === undefined ? FLUSH_QUIET_MS : FLUSH_BUSY_MS;
      let quietSince: number | undefined;
      for (;;) {
        const waiting = waitingFile === undefined ? undefined : readCount(waitingFile);
        const timeout = Math.min(RC_CALL_TIMEOUT_MS, Math.max(1, deadline - Date.now()));
        const [vfs, core] = (await Promise.all([call('vfs/stats', {}, timeout), call('core/stats', {}, timeout)])) as [
          { diskCache?: { uploadsInProgress?: number; uploadsQueued?: number } },
          { transferring?: unknown[] },
        ];
        const pending = (vfs.diskCache?.uploadsInProgress ?? 0) + (vfs.diskCache?.uploadsQueued ?? 0) + (core.transferring?.length ?? 0);
        if (pending === 0 && waiting === 0) return 'answered';
        const now = Date.now();
        quietSince = pending === 0 ? (quietSince ?? now) : undefined;
        if (quietSince !== undefined && now - quietSince >= quietFor) return 'quiet';
        if (now > deadline) throw new Error(`${pending} files of the workspace mount were still uploading after ${timeoutMs} ms`);
        // (An upload takes its time; the count, when that is all there is to wait for, is soon down.)
        await new Promise((r) => setTimeout(r, pending > 0 ? 100 : waiting !== undefined ? 20 : 250));
      }
    },
    async failedTransfers(since) {
      const { transferred } = (await call('core/transferred')) as CompletedTransfers;
      const failed = (transferred ?? []).filter(
        (t) => typeof t.name === 'string' && typeof t.error === 'string' && t.error !== '' && Date.parse(t.completed_at ?? '') >= since.getTime(),
      );
      // A file removed again since (a scratch file, a partial write the writer gave up on) is no loss.
      const kept = await Promise.all(failed.map(async (t) => (await stillThere(join(opts.mountpoint, t.name!))) && t));
      return kept.filter((t) => t !== false).map((t) => failure(t.name!, t.error!));
    },
    async uploadOf(path, since, settleMs = UPLOAD_SETTLE_MS, timeoutMs = 60_000) {
      const started = Date.now();
      for (;;) {
        const [{ transferred }, { transferring }] = await transfers();
        const done = (transferred ?? []).find((t) => t.name === path && Date.parse(t.completed_at ?? '') >= since.getTime());
        if (done) return typeof done.error === 'string' && done.error !== '' ? failure(path, done.error) : 'stored';
        const elapsed = Date.now() - started;
        const uploading = (transferring ?? []).some((t) => t.name === path);
        if (elapsed > timeoutMs || (!uploading && elapsed > settleMs)) return 'unseen';
        await sleep(UPLOAD_POLL_MS);
      }
    },
    async unmount(graceMs = 30_000) {
      if (child.exitCode === null && child.signalCode === null) {
        // SIGTERM: rclone uploads what is still cached, unmounts and exits.
        child.kill('SIGTERM');
        await Promise.race([exited, sleep(graceMs)]);
      }
      // rclone did not end (stopped, stuck on a dead connection) or died without unmounting:
      // kill it and detach the mount, never waiting on it.
      await killed();
    },
    kill: killed,
  };
}
