import { WORKSPACE_FILES_CHANNEL, workspaceFilesChange, type Database, type Listener } from '@codeagent/db';
import { HeardCache } from '@codeagent/service-kit';

/** Folder times kept at most (the oldest go first). */
const MAX_ENTRIES = 10_000;
/** A time is believed at most this long, notifications or not. */
const TTL_MS = 60_000;

/**
 * The newest time under each folder of a workspace (`WorkspaceFiles.listFolder`, what a WebDAV
 * `PROPFIND` of the folder above answers), kept while the `workspace_files` channel is followed
 * (decision 0237). Computing one reads every object below the folder; a mount lists the root of
 * its workspace every few seconds, so a workspace of a million files read them all each time.
 * A change of a folder drops the times of that folder and of every folder above it; a lost
 * connection drops everything and keeps nothing until it is back.
 */
export class FolderTimes {
  private listener: Listener | undefined;
  private readonly times = new HeardCache<string>(() => this.listener?.connected === true, TTL_MS, MAX_ENTRIES);

  /** Follows `workspace_files` on its own connection until the listener is closed. */
  follow(listen: Database['listen']): Listener {
    this.listener = listen(WORKSPACE_FILES_CHANNEL, {
      onNotify: (payload) => {
        const change = workspaceFilesChange(payload);
        if (change) this.changed(change.workspaceId, change.folder);
      },
      // Changes announced while the connection was down were missed: start over.
      onConnect: () => this.times.drop(),
      onDisconnect: () => this.times.drop(),
    });
    return this.listener;
  }

  /** The time of the folder `key` (a prefix ending in `/`) of the workspace, if kept. */
  get(workspaceId: string, key: string): string | undefined {
    return this.times.get(entryKey(workspaceId, key));
  }

  /** Take before reading the database; `set` keeps the time only if nothing of its workspace was dropped since. */
  stamp(): number {
    return this.times.stamp();
  }

  set(workspaceId: string, key: string, at: string, stamp: number): void {
    this.times.set(entryKey(workspaceId, key), at, stamp, workspaceId.toLowerCase());
  }

  /** Something in `folder` (`''` the top, else `a/b`) changed: the times of it and of every folder above it go. */
  private changed(workspaceId: string, folder: string): void {
    const parts = folder === '' ? [] : folder.split('/');
    // (Scoped: a change in one workspace does not keep another's times from being kept.)
    this.times.dropKeys(
      parts.map((_, i) => entryKey(workspaceId, `${parts.slice(0, i + 1).join('/')}/`)),
      workspaceId.toLowerCase(),
    );
  }
}

const entryKey = (workspaceId: string, key: string) => `${workspaceId.toLowerCase()}\n${key}`;
