import type { Database, Listener } from '@codeagent/db';

/** The channel of the objects' triggers (migration 016): `"<workspace id> <folder>"` per changed folder, at commit. */
export const WORKSPACE_FILES_CHANNEL = 'workspace_files';

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
  private readonly entries = new Map<string, { at: string; until: number }>();
  /** Bumped by every drop: a time read before a change was announced is not stored after it. */
  private generation = 0;
  private listener: Listener | undefined;

  /** Follows `workspace_files` on its own connection until the listener is closed. */
  follow(listen: Database['listen']): Listener {
    this.listener = listen(WORKSPACE_FILES_CHANNEL, {
      onNotify: (payload) => {
        const space = payload.indexOf(' ');
        if (space > 0) this.changed(payload.slice(0, space), payload.slice(space + 1));
      },
      // Changes announced while the connection was down were missed: start over.
      onConnect: () => this.clear(),
      onDisconnect: () => this.clear(),
    });
    return this.listener;
  }

  /** The time of the folder `key` (a prefix ending in `/`) of the workspace, if kept. */
  get(workspaceId: string, key: string): string | undefined {
    if (this.listener?.connected !== true) return undefined;
    const id = entryKey(workspaceId, key);
    const e = this.entries.get(id);
    if (!e) return undefined;
    if (e.until <= Date.now()) {
      this.entries.delete(id);
      return undefined;
    }
    return e.at;
  }

  /** Take before reading the database; `set` keeps the time only if nothing was dropped since. */
  stamp(): number {
    return this.generation;
  }

  set(workspaceId: string, key: string, at: string, stamp: number): void {
    if (this.listener?.connected !== true || stamp !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(entryKey(workspaceId, key), { at, until: Date.now() + TTL_MS });
  }

  /** Something in `folder` (`''` the top, else `a/b`) changed: the times of it and of every folder above it go. */
  changed(workspaceId: string, folder: string): void {
    this.generation++;
    const parts = folder === '' ? [] : folder.split('/');
    for (let i = 1; i <= parts.length; i++) this.entries.delete(entryKey(workspaceId.toLowerCase(), `${parts.slice(0, i).join('/')}/`));
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}

const entryKey = (workspaceId: string, key: string) => `${workspaceId.toLowerCase()}\n${key}`;
