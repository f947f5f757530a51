import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { JupyterAccess } from './jupyter-auth.js';

/** How often the access of every open JupyterLab websocket is asked again (decision 0241). */
export const SOCKET_RECHECK_MS = 2000;

/** What a websocket was let in with: asked again as it was asked at its upgrade. */
export interface SocketAccess {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  host: string;
}

/** Questions a sweep asks at once. */
const SWEEP_PARALLEL = 16;

type Check = (access: SocketAccess, requestId: string) => Promise<JupyterAccess>;

interface Group {
  access: SocketAccess;
  sockets: Set<Duplex>;
}

/**
 * The open websockets of JupyterLab (kernels, terminals) that the gateway let in, grouped by
 * what they were let in with (the credential, the path's workspace, the access). A session check
 * runs once per upgrade; a websocket then runs code for as long as it stays open, so a logout, a
 * disabled user, a removed or demoted member or a deleted workspace would not stop one already
 * open. Every `intervalMs` each group's access is asked again, one question per group, and the
 * sockets of a group the backend now refuses (401, 403, 404) are closed. When the backend cannot
 * answer (502, 504) they stay open: an outage of the backend does not cut every terminal.
 */
export class OpenSockets {
  private readonly groups = new Map<string, Group>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping = false;
  private sweeps = 0;

  constructor(
    private readonly check: Check,
    private readonly intervalMs = SOCKET_RECHECK_MS,
  ) {}

  /** Follows `socket` from its upgrade until it closes. */
  add(socket: Duplex, access: SocketAccess): void {
    if (socket.destroyed) return;
    const key = groupKey(access);
    let group = this.groups.get(key);
    if (!group) {
      group = { access, sockets: new Set() };
      this.groups.set(key, group);
    }
    group.sockets.add(socket);
    socket.once('close', () => {
      group.sockets.delete(socket);
      if (group.sockets.size === 0 && this.groups.get(key) === group) this.groups.delete(key);
    });
    if (!this.timer) {
      this.timer = setInterval(() => void this.sweep(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** Open websockets followed now. */
  get size(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.sockets.size;
    return n;
  }

  /** Asks each group's access again and closes the sockets of the refused ones. */
  async sweep(): Promise<void> {
    if (this.sweeping) return;
    if (this.groups.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    this.sweeping = true;
    const round = ++this.sweeps;
    try {
      // SWEEP_PARALLEL questions at a time: a slow backend does not make the last group wait
      // for every other group's answer in turn.
      const groups = [...this.groups];
      for (let i = 0; i < groups.length; i += SWEEP_PARALLEL) {
        await Promise.all(
          groups.slice(i, i + SWEEP_PARALLEL).map(async ([key, group]) => {
            const answer = await this.check(group.access, `recheck-${round}`).catch(() => undefined);
            if (answer && !answer.ok && (answer.status === 401 || answer.status === 403 || answer.status === 404)) {
              for (const socket of group.sockets) socket.destroy();
              if (this.groups.get(key) === group) this.groups.delete(key);
            }
          }),
        );
      }
    } finally {
      this.sweeping = false;
    }
  }

  /** Stops asking (the gateway closes). */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

function groupKey(a: SocketAccess): string {
  // Everything the check reads: the credential (Bearer, Basic or the cookie), the origin, the
  // host, and the path's first segment (the workspace): the kernels and terminals of one user's
  // tab in one workspace are one question.
  const workspacePath = /^\/jupyter\/[^/?#]*/.exec(a.url)?.[0] ?? a.url;
  return JSON.stringify([a.method, workspacePath, a.headers.authorization ?? '', a.headers.cookie ?? '', a.headers.origin ?? '', a.host]);
}
