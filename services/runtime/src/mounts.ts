import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, renameSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { existsSync } from 'node:fs';
import { MOUNT_TOKEN_MAX_SECONDS, issueMountToken, mountTokenKey } from '@codeagent/auth';
import type { Config } from '@codeagent/config';
import { WORKSPACE_FILES_CHANNEL, workspaceFilesChange, type Database, type Listener } from '@codeagent/db';
import {
  INSTALL_MOUNT_HINT,
  RCLONE,
  detachMount,
  isMounted,
  mountWorkspace,
  type FailedTransfer,
  type FlushEnd,
  type WorkspaceMount,
} from './workspace-mount.js';

export interface WorkspaceMountsOptions {
  /** DATA_DIR: mounts go below `DATA_DIR/mounts/<ws>`, rclone's caches and tokens below `DATA_DIR/mount-state/<ws>`. */
  dataDir: string;
  /** The workspace's WebDAV tree as the runtime reaches the backend (BACKEND_URL + `/api/v1/dav/<ws>/`). */
  davUrl: (workspaceId: string) => string;
  /** `mountTokenKey(INTERNAL_SERVICE_TOKEN)`. */
  tokenKey: Buffer;
  log: FastifyBaseLogger;
  /** Lifetime of each mount token (at most 15 min); renewed at a third of it. */
  tokenSeconds?: number;
  rclone?: string;
  /** How long a listing is believed (rclone --dir-cache-time). */
  dirCacheSeconds?: number;
  /**
   * Root only: rclone's cache (where a file being written lives until it is closed and uploaded)
   * is a tmpfs of this size (SANDBOX_DISK_MB), so user code writing without end fills that, not
   * the host's disk: the writer gets ENOSPC, as with the private /workspace before.
   */
  cacheBytes?: number;
}

/** A workspace's files mounted for its sandbox. */
export interface LiveMount {
  /** The host directory the sandbox shows as /workspace. */
  readonly dir: string;
  /** Changes made through the API show at once (rclone vfs/forget). */
  refresh(): Promise<void>;
  /** Lists a folder again (WorkspaceMount.refreshFolder). */
  refreshFolder(folder: string): Promise<void>;
  /** Lists every folder again (WorkspaceMount.refreshTree). */
  refreshTree(): Promise<void>;
  /** Every file written and closed is uploaded (a version) when this resolves (at most `timeoutMs`, default 60 s); how it knew (WorkspaceMount.flush). */
  flush(timeoutMs?: number): Promise<FlushEnd>;
  /** The uploads (and reads) that failed since `since` (WorkspaceMount.failedTransfers). */
  failedTransfers(since: Date): Promise<FailedTransfer[]>;
  /** How the upload of one file closed after `since` ended (WorkspaceMount.uploadOf). */
  uploadOf(path: string, since: Date): Promise<FailedTransfer | 'stored' | 'unseen'>;
  /** rclone uploads what is cached and ends (SIGKILL after 30 s), the mount is detached. Bounded. */
  unmount(): Promise<void>;
  /**
   * For a mount that stopped answering: rclone is killed and the mount detached at once (its FUSE
   * connection aborted, so processes stuck on it are freed), then cleaned up as by `unmount`.
   */
  kill(): Promise<void>;
}

/** Changes of a workspace's files within this long are one refresh of each folder (decision 0221). */
const CHANGE_SETTLE_MS = 50;
/** Folders refreshed at most per refresh: a burst of changes in more folders leaves the rest to rclone's directory cache time. */
const MAX_CHANGED_FOLDERS = 64;

/**
 * The runtime's mounts of workspace files (issue 15 item 2, decision 0140): `rclone mount` of the
 * workspace's WebDAV tree with a short-lived token scoped to that workspace, renewed through a
 * file rclone re-reads (never a command line, never the sandbox), owned by the sandbox uid.
 */
export class WorkspaceMounts {
  private readonly tokenSeconds: number;
  /**
   * The teardown still under way of each workspace's last mount: the next mount of that workspace
   * waits for it (bounded), or the old teardown would remove the new mount's state (its token
   * file, its cache tmpfs) and detach the new mount, which sits on the same path.
   */
  private readonly teardowns = new Map<string, Promise<void>>();
  /** The live mount of each workspace, and the folders changed since its last refresh (decision 0221). */
  private readonly live = new Map<string, { mount: LiveMount; changed: Set<string>; timer?: NodeJS.Timeout | undefined; busy: Promise<void> }>();

  constructor(private readonly opts: WorkspaceMountsOptions) {
    this.tokenSeconds = Math.min(opts.tokenSeconds ?? MOUNT_TOKEN_MAX_SECONDS, MOUNT_TOKEN_MAX_SECONDS);
    // Both directories stay 0700 (root's): the sandbox reaches its mount only through the
    // launcher's staged bind, never through these paths.
    for (const d of [join(opts.dataDir, 'mounts'), join(opts.dataDir, 'mount-state')]) {
      mkdirSync(d, { recursive: true, mode: 0o700 });
      chmodSync(d, 0o700);
    }
  }

  async mount(workspaceId: string, owner: { uid: number; gid: number } | undefined, allowOther: boolean): Promise<LiveMount> {
    const ws = workspaceId.toLowerCase();
    if (!/^[0-9a-f-]{36}$/.test(ws)) throw new Error(`not a workspace id: ${workspaceId}`);
    const dir = join(this.opts.dataDir, 'mounts', ws);
    const state = join(this.opts.dataDir, 'mount-state', ws);
    await this.teardowns.get(ws);
    // A mount left by a runtime that died: detach it before mounting again.
    if (isMounted(dir)) await detachMount(dir);
    const cacheDir = join(state, 'cache');
    if (isMounted(cacheDir)) await run('umount', ['-l', cacheDir]);
    rmSync(state, { recursive: true, force: true });
    mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    const bounded = this.opts.cacheBytes !== undefined && process.getuid?.() === 0;
    if (bounded) {
      const code = await run('mount', [
        '-t',
        'tmpfs',
        '-o',
        `size=${Math.max(1024 * 1024, Math.floor(this.opts.cacheBytes!))},mode=0700,nosuid,nodev,noexec`,
        'tmpfs',
        cacheDir,
      ]);
      if (code !== 0) throw new Error(`could not mount a tmpfs for the workspace's file cache on ${cacheDir} (mount exited ${code})`);
    }
    const cleanState = async () => {
      if (bounded) await run('umount', ['-l', cacheDir]);
      rmSync(state, { recursive: true, force: true });
    };
    const tokenFile = join(state, 'token');
    const writeToken = () => {
      const { token } = issueMountToken(this.opts.tokenKey, ws, this.tokenSeconds);
      writeFileSync(`${tokenFile}.new`, token, { mode: 0o600 });
      renameSync(`${tokenFile}.new`, tokenFile);
    };
    writeToken();
    // A third of the lifetime: a renewal that fails once still leaves a valid token in the file.
    const renew = setInterval(
      () => {
        try {
          writeToken();
        } catch (err) {
          this.opts.log.warn({ err, workspace_id: ws }, 'could not renew the workspace mount token');
        }
      },
      Math.max(1000, (this.tokenSeconds * 1000) / 3),
    );
    renew.unref();
    let mount: WorkspaceMount;
    try {
      mount = await mountWorkspace({
        davUrl: this.opts.davUrl(ws),
        tokenFile,
        mountpoint: dir,
        cacheDir,
        remoteControl: true,
        ...(owner ? { owner } : {}),
        allowOther,
        ...(this.opts.rclone ? { rclone: this.opts.rclone } : {}),
        ...(this.opts.dirCacheSeconds !== undefined ? { dirCacheSeconds: this.opts.dirCacheSeconds } : {}),
      });
    } catch (err) {
      clearInterval(renew);
      await cleanState();
      throw err;
    }
    this.opts.log.info({ workspace_id: ws, pid: mount.pid }, 'workspace files mounted');
    let gone: Promise<void> | undefined;
    const teardown = (how: 'unmount' | 'kill') => {
      if (gone) {
        // An unmount under way (rclone uploading on SIGTERM) ends at once when a kill is asked for.
        if (how === 'kill') void mount.kill();
        return gone;
      }
      return (gone = (async () => {
        clearInterval(renew);
        const entry = this.live.get(ws);
        if (entry?.mount === live) {
          clearTimeout(entry.timer);
          this.live.delete(ws);
        }
        await (how === 'kill' ? mount.kill() : mount.unmount());
        await cleanState();
        try {
          rmdirSync(dir);
        } catch {
          // still a mount point, or gone: never a recursive removal below a mount
        }
        this.opts.log.info({ workspace_id: ws, forced: how === 'kill' }, 'workspace files unmounted');
      })()
        .catch((err: unknown) => this.opts.log.warn({ err, workspace_id: ws }, 'unmounting the workspace files failed'))
        .finally(() => {
          if (this.teardowns.get(ws) === gone) this.teardowns.delete(ws);
        }));
    };
    const live: LiveMount = {
      dir,
      refresh: () => mount.refresh(),
      refreshFolder: (folder) => mount.refreshFolder(folder),
      refreshTree: () => mount.refreshTree(),
      flush: (timeoutMs) => mount.flush(timeoutMs),
      failedTransfers: (since) => mount.failedTransfers(since),
      uploadOf: (path, since) => mount.uploadOf(path, since),
      unmount: () => {
        const p = teardown('unmount');
        this.teardowns.set(ws, p);
        return p;
      },
      kill: () => {
        const p = teardown('kill');
        this.teardowns.set(ws, p);
        return p;
      },
    };
    this.live.set(ws, { mount: live, changed: new Set(), busy: Promise.resolve() });
    return live;
  }

  /**
   * A folder of a workspace changed in the platform's storage (the database's `workspace_files`
   * notification, decision 0221): its mount lists it again, shortly (changes within
   * CHANGE_SETTLE_MS are one refresh per folder; at most MAX_CHANGED_FOLDERS folders each time).
   */
  changed(workspaceId: string, folder: string): void {
    const entry = this.live.get(workspaceId.toLowerCase());
    if (!entry) return;
    if (entry.changed.size < MAX_CHANGED_FOLDERS) entry.changed.add(folder);
    entry.timer ??= setTimeout(() => {
      entry.timer = undefined;
      const folders = [...entry.changed];
      entry.changed.clear();
      // One refresh at a time per mount: a burst of changes waits for the one under way.
      entry.busy = entry.busy.then(async () => {
        for (const f of folders) {
          if (this.live.get(workspaceId.toLowerCase()) !== entry) return;
          await entry.mount
            .refreshFolder(f)
            .catch((err: unknown) => this.opts.log.debug({ err, workspace_id: workspaceId, folder: f }, 'could not list a changed folder again'));
        }
      });
    }, CHANGE_SETTLE_MS);
    entry.timer.unref();
  }

  /**
   * Every live mount lists all its folders again (decision 0236): the changes made while the
   * runtime was not listening were never told. One at a time per mount, after its refreshes
   * under way.
   */
  resync(): void {
    for (const [ws, entry] of this.live) {
      entry.busy = entry.busy.then(async () => {
        if (this.live.get(ws) !== entry) return;
        await entry.mount
          .refreshTree()
          .catch((err: unknown) => this.opts.log.warn({ err, workspace_id: ws }, 'could not list the workspace files again after the database reconnected'));
      });
    }
  }

  /**
   * Follows the changes of every workspace's files (LISTEN workspace_files) until closed. Each
   * (re)connection of the listener may come after changes it was not told of: every mount live
   * then lists its folders again (none at the runtime's start).
   */
  follow(database: Pick<Database, 'listen'>): Listener {
    return database.listen(WORKSPACE_FILES_CHANNEL, {
      onNotify: (payload) => {
        const change = workspaceFilesChange(payload);
        if (change) this.changed(change.workspaceId, change.folder);
      },
      onConnect: () => this.resync(),
    });
  }
}

function run(command: string, args: string[]): Promise<number> {
  return new Promise((ok) => {
    spawn(command, args, { stdio: 'ignore' })
      .once('close', (code) => ok(code ?? 1))
      .once('error', () => ok(127));
  });
}

/**
 * The runtime's mounts, from its settings: the backend's WebDAV tree at BACKEND_URL, tokens keyed
 * on INTERNAL_SERVICE_TOKEN. Without rclone or FUSE on this machine (or with KERNEL_SANDBOX=off)
 * there are none: a warning names the fix and each server keeps a private /workspace, as before.
 */
export function workspaceMountsFor(config: Config, log: FastifyBaseLogger): WorkspaceMounts | undefined {
  if (!config.sandbox.enabled) return undefined;
  const missing = [RCLONE, '/dev/fuse', '/usr/bin/fusermount3'].filter((p) => !existsSync(p));
  if (missing.length > 0) {
    log.warn(
      { missing },
      `workspace files are not mounted into JupyterLab and runs (${INSTALL_MOUNT_HINT}); each server's /workspace is private and lost when it stops`,
    );
    return undefined;
  }
  const backend = config.backendUrl.replace(/\/+$/, '');
  return new WorkspaceMounts({
    dataDir: config.dataDir,
    davUrl: (ws) => `${backend}/api/v1/dav/${ws}/`,
    tokenKey: mountTokenKey(config.internalServiceToken),
    log,
    cacheBytes: config.sandbox.diskBytes,
  });
}
