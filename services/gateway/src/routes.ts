/**
 * The ingress's route table (docs/contract/spec.md §10): the one place that says which path goes where. The
 * gateway builds its proxies from it (`app.ts`), and `codeagent nginx-config` renders the same
 * table into an nginx configuration (`nginx.ts`), so that the two ingresses never drift; the
 * routing tests run through both (`ingress-testing.ts`).
 *
 * A prefix `/p` matches `/p` itself and everything below `/p/` (never `/pq`). The most specific
 * prefix wins, in the gateway (find-my-way) and in nginx (longest prefix location) alike.
 */

import type { PageName } from './landing.js';

/** The components behind the ingress; each may run as several instances (a list of addresses). */
export type UpstreamName = 'backend' | 'clusterAdmin' | 'bridge' | 'jupyter';

export interface UpstreamSpec {
  /** The setting that lists its addresses (comma-separated). */
  setting: string;
  /** What the ingress asks every few seconds to know an instance serves (2xx/3xx = up). */
  healthPath: string;
  /** Connections the gateway keeps open to each instance. */
  connections: number;
}

export const UPSTREAMS: Readonly<Record<UpstreamName, UpstreamSpec>> = {
  backend: { setting: 'BACKEND_URL', healthPath: '/readyz', connections: 128 },
  clusterAdmin: { setting: 'CLUSTER_ADMIN_URL', healthPath: '/readyz', connections: 128 },
  bridge: { setting: 'BRIDGE_URL', healthPath: '/readyz', connections: 128 },
  // The runtime (per-workspace JupyterLab servers, JUPYTERLAB_URL unset) answers /readyz without
  // a token; the shared developer server of `codeagent jupyterlab` answers Jupyter's version route.
  jupyter: { setting: 'JUPYTERLAB_URL', healthPath: '/readyz', connections: 64 },
};

export interface ProxyRoute {
  kind: 'proxy';
  prefix: string;
  upstream: UpstreamName;
  /** The path prefix the component sees instead of `prefix` (default: the same). */
  rewritePrefix?: string;
  /** Websocket upgrades are proxied too. */
  websocket?: boolean;
  /**
   * Only for a logged-in system administrator: every request and upgrade is checked with the
   * backend (`GET /api/v1/auth/session`, nginx: `auth_request`), the user's credentials are
   * replaced by the Jupyter server's token, and one user always reaches the same instance
   * (kernels live in one server's memory: HTTP and websockets must meet there).
   */
  sessionCheck?: boolean;
  /** The component's pages bring their own CSP (JupyterLab's need inline configuration). */
  upstreamCsp?: boolean;
  /** WebDAV's methods (PROPFIND, MKCOL, COPY, MOVE) are proxied too; nginx passes every method. */
  webdav?: boolean;
}

/** Never routed, whatever the method or token: 404 `not_found`. */
export interface DenyRoute {
  kind: 'deny';
  prefix: string;
}

/** A page the ingress answers itself (the start page at `/`, the login page; an exact path). */
export interface PageRoute {
  kind: 'page';
  path: string;
  /** Which of `PAGES` (landing.ts). */
  page: PageName;
}

export type Route = ProxyRoute | DenyRoute | PageRoute;

export const ROUTES: readonly Route[] = [
  { kind: 'proxy', prefix: '/api/v1', upstream: 'backend' },
  // Workspace files as a WebDAV tree (docs/decisions/0070-webdav-tree.md).
  { kind: 'proxy', prefix: '/api/v1/dav', upstream: 'backend', webdav: true },
  { kind: 'proxy', prefix: '/admin', upstream: 'clusterAdmin' },
  { kind: 'proxy', prefix: '/mcp', upstream: 'clusterAdmin' },
  { kind: 'proxy', prefix: '/codeagent-bridge', upstream: 'bridge' },
  // The extension addresses the bridge relative to JupyterLab's base URL (docs/contract/spec.md §10); the bridge
  // checks the user token itself, as on /codeagent-bridge/*.
  { kind: 'proxy', prefix: '/jupyter/codeagent-bridge', upstream: 'bridge', rewritePrefix: '/codeagent-bridge' },
  { kind: 'proxy', prefix: '/jupyter', upstream: 'jupyter', websocket: true, sessionCheck: true, upstreamCsp: true },
  // docs/contract/spec.md §5.1, §10: the internal routes are never reachable from outside.
  { kind: 'deny', prefix: '/internal' },
  { kind: 'page', path: '/', page: 'landing' },
  // Until the web UI has its own: where /jupyter sends a browser without a session (`?next=`).
  { kind: 'page', path: '/login', page: 'login' },
  { kind: 'page', path: '/login.js', page: 'loginScript' },
];

/**
 * The bridge as a workspace's JupyterLab addresses it (relative to its base URL,
 * `/jupyter/<workspace id>/codeagent-bridge/…`): the route `/jupyter/codeagent-bridge/…`, with
 * the workspace kept in the path (`…/workspaces/<workspace id>/…`), where the bridge checks the
 * caller's membership and keeps the caller's sessions of that workspace (docs/contract/spec.md §9.3,
 * decision 0240).
 */
export const WORKSPACE_BRIDGE_PATH =
  /^\/jupyter\/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\/codeagent-bridge((?:[/?].*)?)$/;

/** `/jupyter/<workspace id>/codeagent-bridge/x` → `/jupyter/codeagent-bridge/workspaces/<workspace id>/x`; other paths unchanged. */
export function workspaceBridgeUrl(url: string): string {
  const m = WORKSPACE_BRIDGE_PATH.exec(url);
  return m ? `/jupyter/codeagent-bridge/workspaces/${m[1]}${m[2]}` : url;
}

/**
 * Requests whose answer may be large: a client that reads it slowly holds its connection to the
 * component as long, so these go over the instance's `bulk` connections with the uploads and
 * never take those every other request needs (decision 0258). The backend's: a file's content,
 * a version, a folder's zip, the WebDAV tree (`GET` and `PROPFIND`, whose listing of a big folder
 * is large), a run's log. A lab's: every `GET` but its small API calls (`api/…`, except the
 * contents, which carry whole notebooks): its files, pages and scripts, nbconvert's exports.
 * The component's path, with or without its query, read as the component reads it: decoded
 * (`%6Fbjects` is `objects` to the backend's router; a re-check found downloads so spelled held
 * the first pool).
 */
export function largeAnswer(method: string, path: string): boolean {
  if (method !== 'GET' && method !== 'PROPFIND') return false;
  let decoded: string;
  try {
    decoded = decodeURIComponent(path.split('?', 1)[0]!);
  } catch {
    // Not decodable: the component refuses it; whichever pool, it is over at once.
    return false;
  }
  if (method === 'PROPFIND') return decoded.startsWith('/api/v1/dav/');
  if (LARGE_BACKEND_ANSWERS.test(decoded)) return true;
  const lab = LAB_PATH.exec(decoded);
  return lab !== null && !SMALL_LAB_CALLS.test(lab[1]!);
}

const LARGE_BACKEND_ANSWERS = /^\/api\/v1\/(?:dav\/|data-resources\/[^/]+\/(?:objects\/|versions\/|archive(?:\/|$))|workspaces\/[^/]+\/runs\/[^/]+\/log$)/;
/** A workspace's lab below `/jupyter/<workspace>/`: the rest of the path. */
const LAB_PATH = /^\/jupyter\/[^/]+\/(.*)$/;
/** The lab's API calls with small answers: everything below `api/` but the contents. */
const SMALL_LAB_CALLS = /^api\/(?!contents(?:\/|$))/;

/** Whether a request path falls under a route's prefix: the prefix itself, or below it at a `/`. */
export function underPrefix(path: string, prefix: string): boolean {
  return path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 47); /* / */
}

/**
 * Whether a request is a websocket handshake for a route that proxies websockets (the longest
 * matching prefix of the route table decides, as for every request). Any other `Upgrade` (a
 * websocket to the API, curl's `--http2` asking for `h2c`) is served as the plain HTTP request
 * it also is, as nginx does: the upgrade is not taken.
 */
export function takesUpgrade(url: string, upgrade: string | undefined, routes: readonly Route[] = ROUTES): boolean {
  if (upgrade?.toLowerCase() !== 'websocket') return false;
  const path = workspaceBridgeUrl(url).split('?', 1)[0]!;
  let best: ProxyRoute | DenyRoute | undefined;
  for (const route of routes) {
    if (route.kind === 'page') continue;
    const { prefix } = route;
    if (underPrefix(path, prefix) && (best === undefined || prefix.length > best.prefix.length)) best = route;
  }
  return best?.kind === 'proxy' && best.websocket === true;
}

/** The routes that proxy to a component. */
export function proxyRoutes(routes: readonly Route[] = ROUTES): ProxyRoute[] {
  return routes.filter((r): r is ProxyRoute => r.kind === 'proxy');
}

/** Answers of the ingress itself, word for word the same from the gateway and from nginx. */
export const MESSAGES = {
  badGateway: 'the component behind this route is not reachable; is it running?',
  gatewayTimeout: 'the component behind this route did not answer in time',
  jupyterLogIn: 'log in to the platform first (POST /api/v1/auth/login), then open /jupyter/ again',
  jupyterCrossSite: 'cross-site request refused: open JupyterLab through this platform',
  jupyterAdminsOnly: 'JupyterLab is open to system administrators only until each workspace has its own JupyterLab server',
  jupyterNoWorkspace: 'open the JupyterLab of a workspace: /jupyter/<workspace id>/ (the id of a workspace you are a member of)',
  jupyterNotMember: 'no such workspace, or you are not a member of it: ask one of its admins to add you',
  jupyterReadOnly: 'viewers of this workspace may open and read notebooks only (no saving, kernels or terminals); ask a workspace admin for the editor role',
  sessionUnavailable: 'the session cannot be checked: the backend is not reachable; is it running?',
  sessionTimeout: 'the backend did not answer the session check in time',
  payloadTooLarge: (declared: number | string, max: number) => `the request body is ${declared} bytes, more than MAX_UPLOAD_BYTES (${max} bytes) allows`,
} as const;

/**
 * Header the ingress sends with the session check to have the backend refuse (403) a user who
 * is not a system administrator; nginx's `auth_request` cannot read the answer's body.
 */
export const REQUIRE_HEADER = 'x-codeagent-require';
/**
 * With `X-Codeagent-Require: member` (nginx, whose auth_request passes only 401 and 403), the
 * backend answers a non-member with 403 and this header set to `not_found`: the ingress answers 404.
 */
export const REFUSAL_HEADER = 'x-codeagent-refusal';
/** Headers of the session check's answer: who the user is (the ingress keeps them on one Jupyter instance). */
export { USER_ID_HEADER } from '@codeagent/auth';

/** The ingress's answer when a component failed: 504 when it did not answer in time, 502 for anything else. */
export function upstreamFailure(timedOut: boolean): { status: 502 | 504; body: { error: string; message: string } } {
  return timedOut
    ? { status: 504, body: { error: 'gateway_timeout', message: MESSAGES.gatewayTimeout } }
    : { status: 502, body: { error: 'bad_gateway', message: MESSAGES.badGateway } };
}
