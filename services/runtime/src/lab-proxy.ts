import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { USER_ID_HEADER } from '@codeagent/auth';
import { labOriginOf, type LabOrigins } from '@codeagent/config';
import { ambiguousPathReason, isUuid } from '@codeagent/service-kit';
import { hasRequestBody, lastChunkWhen } from '@codeagent/service-kit/http';
import type { JupyterPool, JupyterServerRef } from './servers.js';
import { answerOwnLabPath, labAnswerHeaders, pluginSchemas, settingsCheck, userSettingsAnswers, userWorkspacesAnswers, type LabFiles } from './lab-answers.js';
import type { LabStateStore } from './lab-state.js';
import { carriesToken, relayRequest, relayUpgrade, type AnswerCheck } from './relay.js';
import { LabSockets, type FollowedSockets } from './lab-sockets.js';

/** A request's user changed (USERS_CHANNEL) while its body arrived: refused before its last chunk. */
class AccessChanged extends Error {
  constructor() {
    super('your session, role or membership changed while this request arrived; nothing was written: send it again (the platform checks your access again)');
  }
}

/** A workspace server's root and lab state as its users see them (servers.ts, the sandbox layout): shown in its page config. */
const SERVER_ROOT = '/workspace';
const STATE_DIR = '/tmp/.jupyterlab-state';

/** The path the gateway routes to a workspace's JupyterLab: `/jupyter/<workspace id>/…`. */
const LAB_PATH = /^\/jupyter\/([^/?#]+)(\/[^]*)?$/;

export interface LabProxyOptions {
  pool: JupyterPool;
  /**
   * JUPYTERLAB_TOKEN: what the gateway sends as `Authorization: token …` after it checked the
   * user. It is swapped for the workspace server's own random token, which never leaves here.
   */
  token: string;
  log: FastifyBaseLogger;
  /**
   * Where each platform user's JupyterLab settings and layouts are kept (decisions 0251, 0252):
   * the settings and workspaces APIs are then answered from there for a request the gateway
   * names its user in (`x-codeagent-user-id`). Without it, or without that header, the
   * workspace's server answers (its settings checked).
   */
  labState?: LabStateStore | undefined;
  /**
   * Called once, at the first websocket the ingress names its user in: from then on it tells the
   * open websockets of the users' changes (user-changes.ts, decision 0259).
   */
  followUsers?: (sockets: FollowedSockets) => void;
  /** LAB_ORIGIN: each workspace's lab on a host of its own, where its page lets outputs run their scripts (decision 0263). */
  labOrigins?: LabOrigins | undefined;
}

export interface LabProxy {
  /** Whether a request path belongs to the lab proxy (`/jupyter/…`). */
  handles(url: string | undefined): boolean;
  request(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Ends every open websocket (the HTTP server's close does not track upgraded connections). */
  closeAll(): void;
  /** The open websockets of the users the ingress named (decision 0259). */
  readonly sockets: FollowedSockets;
}

const json = (res: ServerResponse, status: number, body: Record<string, string>) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(JSON.stringify(body));
};

/** The progress page runs nothing and loads nothing. */
export const PROGRESS_CSP = "default-src 'none'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'";

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The spawn progress page: no script (the CSP forbids inline scripts), a meta refresh every
 * second until the server answers, then the same URL loads JupyterLab itself.
 */
export function progressPage(state: 'starting' | 'failed', detail: string): string {
  const refresh = state === 'starting' ? '<meta http-equiv="refresh" content="1">' : '';
  const title = state === 'starting' ? 'Starting JupyterLab for this workspace…' : 'JupyterLab could not start';
  const hint =
    state === 'starting'
      ? 'This page reloads by itself and opens JupyterLab as soon as it is ready.'
      : 'Reload this page to try again; if it keeps failing, tell your platform administrator the message above.';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8">${refresh}<title>${title}</title></head><body><main><h1>${title}</h1><p role="status">${escapeHtml(detail)}</p><p>${hint}</p></main></body></html>`;
}

/** A browser opening a page (not JupyterLab's own API calls): it gets the progress page while the server starts. */
function isNavigation(req: IncomingMessage, rest: string): boolean {
  if (req.method !== 'GET') return false;
  if (!String(req.headers.accept ?? '').includes('text/html')) return false;
  const path = rest.split('?')[0]!;
  return !path.startsWith('/api/') && !path.startsWith('/static/') && !path.startsWith('/files/');
}

/**
 * A contents API request that writes a file: a save (`PUT …/api/contents/<path>`), or a new file
 * or a copy (`POST …/api/contents/<folder>`, JupyterLab's "New File" and "Duplicate").
 */
export function writesFile(method: string | undefined, rest: string): boolean {
  return (method === 'PUT' || method === 'POST') && /^\/api\/contents(\/|\?|$)/.test(rest);
}

/**
 * A file written on the workspace mount is answered once rclone has stored it (decision 0218):
 * rclone uploads after the server's `close(2)`, so a refusal (the workspace quota,
 * MAX_UPLOAD_BYTES, a full disk) would otherwise leave JupyterLab showing "saved" for a file the
 * workspace never got. Then the answer is the refusal's status with JupyterLab's error shape
 * (`message`), which it shows in its error dialog. The file is the answer's own `path` (the
 * server's canonical form; for a copy, the new file's).
 */
function saveCheck(files: NonNullable<JupyterServerRef['files']>, method: string | undefined, rest: string, since: Date): AnswerCheck | undefined {
  if (!writesFile(method, rest)) return undefined;
  return async (_status, body) => {
    const model = JSON.parse(body.toString('utf8')) as { type?: unknown; path?: unknown; codeagent_upload?: unknown };
    // A folder writes no file, and a part of a chunked upload before its last keeps the file
    // open (codeagent_contents, decision 0219): nothing to wait for.
    if (model.type === 'directory' || model.codeagent_upload === 'partial' || typeof model.path !== 'string') return undefined;
    const path = model.path;
    const outcome = await files.uploadOf(path, since);
    if (typeof outcome === 'string') return undefined;
    return { status: outcome.status ?? 507, body: { message: `${path} was not stored in the workspace: ${outcome.reason}`, reason: null } };
  };
}

/**
 * `/jupyter/<workspace id>/…` on the runtime's port: HTTP and websockets proxied to that
 * workspace's sandboxed Jupyter server over its Unix socket (started on demand). Only the
 * gateway, which checked the user's session and membership, holds the token this asks for.
 */
export function labProxy(opts: LabProxyOptions): LabProxy {
  const { pool, log } = opts;
  // JupyterLab's pages and files come from the installed host, never from a workspace's server (decision 0245).
  const files: LabFiles | undefined = pool.lab;
  // (One index of the installed settings schemas for both ways of answering the settings.)
  const plugins = files ? pluginSchemas(files) : undefined;
  const settings = plugins ? settingsCheck(plugins) : () => undefined;
  const ownSettings = plugins && opts.labState !== undefined ? userSettingsAnswers(plugins, opts.labState) : undefined;
  const ownLayouts = opts.labState !== undefined ? userWorkspacesAnswers(opts.labState) : undefined;
  const upgraded = new Set<Duplex>();
  /** The open websockets of the users the ingress named (decision 0259). */
  const sockets = new LabSockets(log);
  let following = false;
  /** From the first websocket or body of a named user on, the users' changes are followed. */
  const follow = () => {
    if (following || !opts.followUsers) return;
    following = true;
    opts.followUsers(sockets);
  };
  const authorized = (req: IncomingMessage) => carriesToken(req, opts.token);
  /** The workspace and the rest of the path, or why not. */
  const parse = (url: string): { workspaceId: string; rest: string } | undefined => {
    const m = LAB_PATH.exec(url);
    if (!m || !isUuid(m[1]!)) return undefined;
    return { workspaceId: m[1]!.toLowerCase(), rest: m[2] ?? '' };
  };
  const serverFor = async (workspaceId: string): Promise<JupyterServerRef & { socket: NonNullable<JupyterServerRef['socket']> }> => {
    const server = await pool.server(workspaceId);
    if (!server.socket) throw new Error('this runtime uses an external Jupyter server (JUPYTER_URL): it serves no per-workspace JupyterLab');
    server.touch();
    return server as JupyterServerRef & { socket: NonNullable<JupyterServerRef['socket']> };
  };

  return {
    handles: (url) => url === '/jupyter' || (url?.startsWith('/jupyter/') ?? false),

    request(req, res) {
      if (!authorized(req)) return json(res, 403, { error: 'forbidden', message: 'open JupyterLab through the platform gateway: /jupyter/<workspace id>/' });
      // A dot segment would be resolved by an ingress in front (nginx checks `$uri`) but not here:
      // the request would reach another workspace than the one checked.
      const ambiguous = ambiguousPathReason(req.url ?? '');
      if (ambiguous) return json(res, 400, { error: 'invalid_request', message: `the path ${ambiguous}` });
      const target = parse(req.url ?? '');
      if (!target) return json(res, 404, { error: 'not_found', message: 'open /jupyter/<workspace id>/ (the id of a workspace you are a member of)' });
      if (target.rest === '') {
        res.writeHead(302, { location: `${req.url}/`, 'cache-control': 'no-store' }).end();
        return;
      }
      const status = pool.status(target.workspaceId);
      if (status.state !== 'running' && isNavigation(req, target.rest)) {
        // A failed start is shown once; the next visit tries again.
        const failed = status.state === 'failed';
        if (!failed)
          void pool
            .server(target.workspaceId)
            .catch((err: unknown) => log.warn({ workspace_id: target.workspaceId, reason: (err as Error).message }, "a workspace's JupyterLab did not start"));
        else void pool.server(target.workspaceId).catch(() => undefined);
        const detail = failed
          ? status.message
          : status.state === 'starting'
            ? `Starting the workspace's sandboxed server (${Math.floor(status.sinceMs / 1000)} s so far)…`
            : "Starting the workspace's sandboxed server…";
        res
          .writeHead(failed ? 503 : 200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': PROGRESS_CSP })
          .end(progressPage(failed ? 'failed' : 'starting', detail));
        return;
      }
      // JupyterLab's pages and files: the installed ones, whatever the server would answer.
      if (
        files &&
        answerOwnLabPath(req, res, target.rest, files, {
          base: `/jupyter/${target.workspaceId}/`,
          serverRoot: SERVER_ROOT,
          stateDir: STATE_DIR,
          ownOrigin: opts.labOrigins && labOriginOf(opts.labOrigins, target.workspaceId),
        })
      )
        return;
      const user = req.headers[USER_ID_HEADER];
      if (typeof user === 'string' && isUuid(user)) {
        if (ownSettings?.(req, res, user, target.rest) === true || ownLayouts?.(req, res, user, target.rest) === true) return;
      }
      // Taken before the server writes: the save's upload through the mount ends after it.
      const since = new Date();
      // A body reaches the server whole only if its user did not change while it arrived: an
      // ingress (nginx) that checked the user at the start does not ask again (decision 0261).
      const named = typeof user === 'string' && isUuid(user) ? user : undefined;
      let body: Readable = req;
      if (named !== undefined && hasRequestBody(req)) {
        follow();
        const stamp = sockets.stamp();
        body = lastChunkWhen(
          req,
          () => Promise.resolve(sockets.unchangedSince(named, target.workspaceId, stamp)),
          () => new AccessChanged(),
        );
      }
      serverFor(target.workspaceId).then(
        (server) =>
          relayRequest(
            req,
            res,
            server.socket,
            (err) => {
              if (err instanceof AccessChanged) {
                json(res, 409, { error: 'conflict', message: err.message });
                return;
              }
              log.warn({ workspace_id: target.workspaceId, reason: err.message }, "a workspace's Jupyter server did not answer");
              json(res, 502, { error: 'bad_gateway', message: "the workspace's Jupyter server does not answer; reload to start it again" });
            },
            (server.files ? saveCheck(server.files, req.method, target.rest, since) : undefined) ?? settings(req.method, target.rest),
            (headers) => labAnswerHeaders(target.rest, headers, `/jupyter/${target.workspaceId}/`),
            body,
          ),
        (err: unknown) => json(res, 503, { error: 'kernel_unavailable', message: (err as Error).message }),
      );
    },

    closeAll() {
      for (const socket of upgraded) socket.destroy();
      upgraded.clear();
    },

    sockets,

    upgrade(req, socket, head) {
      socket.on('error', () => undefined);
      upgraded.add(socket);
      socket.once('close', () => upgraded.delete(socket));
      if (!authorized(req)) {
        socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      if (ambiguousPathReason(req.url ?? '')) {
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const target = parse(req.url ?? '');
      if (!target) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const user = req.headers[USER_ID_HEADER];
      if (typeof user === 'string' && isUuid(user)) {
        // Ended when the user's sessions or memberships change: nginx, as an ingress, does not ask again (decision 0259).
        sockets.add(socket, user, target.workspaceId);
        follow();
      }
      serverFor(target.workspaceId).then(
        (server) => relayUpgrade(req, socket, head, server.socket),
        () => socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'),
      );
    },
  };
}
