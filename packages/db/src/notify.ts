import pg from 'pg';

/**
 * LISTEN/NOTIFY between components (docs/decisions/0081-listen-notify.md). A notification is
 * only a hint to look at the database now; every listener also works without it (workers poll,
 * caches expire), so a lost notification delays, and never breaks, anything.
 */
export interface ListenHandlers {
  /** A notification on the channel (its payload, often empty). */
  onNotify(payload: string): void;
  /**
   * The listening connection is up, at the start and after every reconnection: notifications
   * sent while it was down are lost, so act as if one had come.
   */
  onConnect?(): void;
  /** The connection was lost (a reconnection follows): what depends on notifications must not trust its state. */
  onDisconnect?(err: Error | undefined): void;
}

export interface Listener {
  readonly connected: boolean;
  close(): Promise<void>;
}

/**
 * The channel the objects' triggers notify at each commit that changes workspace files
 * (migration 016, decision 0221): one payload `"<workspace id> <folder>"` per changed folder
 * (`''` the top, else `a/b`).
 */
export const WORKSPACE_FILES_CHANNEL = 'workspace_files';

/** A `workspace_files` payload read; undefined for one not of that form. */
export function workspaceFilesChange(payload: string): { workspaceId: string; folder: string } | undefined {
  const space = payload.indexOf(' ');
  return space > 0 ? { workspaceId: payload.slice(0, space), folder: payload.slice(space + 1) } : undefined;
}

/** Channel names are fixed identifiers of the platform, never user input. */
const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A dedicated connection that LISTENs on `channel` (never one of the pool: a pooled connection
 * goes back to other work). When the connection is lost it reconnects, with a delay growing from
 * `retryMs` to 5 s, and calls `onConnect` again once listening.
 */
export function listenOn(clientConfig: pg.ClientConfig, channel: string, handlers: ListenHandlers, opts: { retryMs?: number } = {}): Listener {
  if (!CHANNEL.test(channel)) throw new Error(`invalid channel name ${JSON.stringify(channel)}`);
  const base = opts.retryMs ?? 100;
  let client: pg.Client | undefined;
  let connected = false;
  let closed = false;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;

  const lost = (c: pg.Client, err: Error | undefined) => {
    if (client !== c) return;
    client = undefined;
    const was = connected;
    connected = false;
    c.removeAllListeners('notification');
    c.on('error', () => undefined);
    void c.end().catch(() => undefined);
    if (closed) return;
    if (was) handlers.onDisconnect?.(err);
    const delay = Math.min(5000, base * 2 ** Math.min(failures++, 6));
    timer = setTimeout(() => void connect(), delay);
    timer.unref();
  };

  const connect = async () => {
    if (closed) return;
    const c = new pg.Client(clientConfig);
    client = c;
    c.on('error', (err) => lost(c, err));
    c.on('end', () => lost(c, undefined));
    c.on('notification', (msg) => {
      if (msg.channel === channel) handlers.onNotify(msg.payload ?? '');
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
    } catch (err) {
      lost(c, err as Error);
      return;
    }
    if (client !== c || closed) return;
    connected = true;
    failures = 0;
    handlers.onConnect?.();
  };
  void connect();

  return {
    get connected() {
      return connected;
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      const c = client;
      client = undefined;
      connected = false;
      if (c) {
        c.on('error', () => undefined);
        await c.end().catch(() => undefined);
      }
    },
  };
}
