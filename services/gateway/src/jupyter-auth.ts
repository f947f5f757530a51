import type { IncomingHttpHeaders } from 'node:http';
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { ACCESS_HEADER, LAB_STATE_HASH_HEADER, LAB_STATE_HEADER, refusedCrossSite, requestCredential, SAFE_METHODS, WORKSPACE_HEADER } from '@codeagent/auth';
import { MESSAGES } from './routes.js';

// The cookie's name and the cookie/origin rule are the platform's one copy in @codeagent/auth
// (decision 0120); re-exported for app.ts and nginx.ts.
export { SESSION_COOKIE, withoutCookie } from '@codeagent/auth';

/** The backend route that answers who a session is (docs/contract/spec.md §4.1 addition), or 401. */
export const SESSION_CHECK_PATH = '/api/v1/auth/session';

/** What the backend says about a session token. */
export type SessionAnswer =
  | {
      kind: 'user';
      userId: string;
      isSystemAdmin: boolean;
      /** Asked with a state's hash: a ticket to the workspace's lab (decision 0263). */
      labTicket?: string;
      /** Asked with a ticket and its state: the lab's pass, and for how many seconds. */
      labPass?: { pass: string; expiresIn: number };
    }
  /** A workspace was asked about: not a member or no such workspace (404), a viewer writing (403). */
  | { kind: 'refused'; status: 403 | 404; message: string }
  | { kind: 'invalid'; message: string }
  | { kind: 'unavailable'; timedOut: boolean; detail: string };

/** What the session check needs of the backend's pool: undici's promise form of `request`. */
export interface SessionDispatcher {
  request(options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
}

/** A workspace's JupyterLab: which workspace, and whether the request only reads. */
export interface WorkspaceQuestion {
  workspaceId: string;
  access: 'read' | 'write';
}

// Headers of the session check that name the workspace (the backend applies its membership rule).
export { WORKSPACE_HEADER, ACCESS_HEADER } from '@codeagent/auth';

/** A lab on a host of its own (decision 0263): ask for a ticket (with the browser's state's hash) or exchange one (with the state). */
export type LabQuestion = { stateHash: string } | { state: string };

export interface SessionChecker {
  check(token: string, requestId: string, workspace?: WorkspaceQuestion, lab?: LabQuestion): Promise<SessionAnswer>;
  close(): Promise<void>;
}

/**
 * Asks the backend about a token on every call, as nginx's `auth_request` would: nothing is
 * cached, so a logout, a revocation or a disabled account takes effect at the next request.
 * The gateway holds no database and no JWT secret; the backend is the one place that decides.
 */
export function backendSessionChecker(backend: string | SessionDispatcher, timeoutMs = 10_000): SessionChecker {
  // A URL: a pool of its own; otherwise the gateway's pool of backend instances.
  const own =
    typeof backend === 'string'
      ? new Pool(new URL(backend).origin, { connections: 16, keepAliveTimeout: 60_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
      : undefined;
  const pool: SessionDispatcher = own ?? (backend as SessionDispatcher);
  return {
    async check(token, requestId, workspace, lab) {
      try {
        const res = await pool.request({
          method: 'GET',
          path: SESSION_CHECK_PATH,
          // Always as Bearer: the backend then checks exactly this token, and no other cookie of the client travels.
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            'x-request-id': requestId,
            ...(workspace ? { [WORKSPACE_HEADER]: workspace.workspaceId, [ACCESS_HEADER]: workspace.access } : {}),
            ...(lab === undefined ? {} : 'state' in lab ? { [LAB_STATE_HEADER]: lab.state } : { [LAB_STATE_HASH_HEADER]: lab.stateHash }),
          },
        });
        const text = await res.body.text();
        const body = (() => {
          try {
            return JSON.parse(text) as Record<string, unknown>;
          } catch {
            return {};
          }
        })();
        if (res.statusCode === 200 && typeof body.user_id === 'string' && typeof body.is_system_admin === 'boolean') {
          return {
            kind: 'user',
            userId: body.user_id,
            isSystemAdmin: body.is_system_admin,
            ...(typeof body.lab_ticket === 'string' ? { labTicket: body.lab_ticket } : {}),
            ...(typeof body.lab_pass === 'string' && typeof body.lab_pass_expires_in === 'number'
              ? { labPass: { pass: body.lab_pass, expiresIn: body.lab_pass_expires_in } }
              : {}),
          };
        }
        if (workspace && (res.statusCode === 403 || res.statusCode === 404)) {
          return { kind: 'refused', status: res.statusCode, message: typeof body.message === 'string' ? body.message : 'not found' };
        }
        if (res.statusCode === 401) {
          return { kind: 'invalid', message: typeof body.message === 'string' ? body.message : 'the session is not valid' };
        }
        return { kind: 'unavailable', timedOut: false, detail: `the backend answered ${res.statusCode}` };
      } catch (err) {
        const timedOut = err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError;
        return { kind: 'unavailable', timedOut, detail: (err as Error).message };
      }
    },
    close: async () => own?.close(),
  };
}

export type JupyterAccess = { ok: true; userId: string } | { ok: false; status: 401 | 403 | 404 | 502 | 504; error: string; message: string };

const LOG_IN = MESSAGES.jupyterLogIn;

/**
 * Decides whether a request may reach the shared JupyterLab server (docs/contract/spec.md §10, issue 13 item 5):
 * a platform user token (Bearer header or the `codeagent_session` cookie), our own origin for
 * cookie-only writes and websocket upgrades, a session the backend still accepts (checked on
 * every request), and, until each workspace has its own JupyterLab server, a system
 * administrator: the shared server runs every user's code as one user, with all files.
 */
export async function checkJupyterAccess(
  method: string,
  headers: IncomingHttpHeaders,
  host: string,
  requestId: string,
  sessions: SessionChecker,
): Promise<JupyterAccess> {
  const answer = await checkSession(method, headers, host, requestId, sessions);
  if (!('kind' in answer)) return answer;
  if (answer.kind === 'refused' || !answer.isSystemAdmin) return { ok: false, status: 403, error: 'forbidden', message: MESSAGES.jupyterAdminsOnly };
  return { ok: true, userId: answer.userId };
}

/**
 * What both JupyterLab routes ask first: a credential (401), our own origin for cookie-only
 * writes and upgrades (403), a session the backend accepts now (401; 502/504 when it cannot
 * say). What is left (a user, or the backend's refusal) each route answers in its own words.
 */
async function checkSession(
  method: string,
  headers: IncomingHttpHeaders,
  host: string,
  requestId: string,
  sessions: SessionChecker,
  workspace?: WorkspaceQuestion,
): Promise<Extract<JupyterAccess, { ok: false }> | Extract<SessionAnswer, { kind: 'user' | 'refused' }>> {
  const credential = requestCredential(headers);
  if (!credential) return { ok: false, status: 401, error: 'unauthorized', message: LOG_IN };
  if (refusedCrossSite(credential.source, method, headers, host)) {
    return { ok: false, status: 403, error: 'forbidden', message: MESSAGES.jupyterCrossSite };
  }
  const answer = await sessions.check(credential.token, requestId, workspace);
  switch (answer.kind) {
    case 'invalid':
      return { ok: false, status: 401, error: 'unauthorized', message: answer.message };
    case 'unavailable':
      return answer.timedOut
        ? { ok: false, status: 504, error: 'gateway_timeout', message: MESSAGES.sessionTimeout }
        : { ok: false, status: 502, error: 'bad_gateway', message: MESSAGES.sessionUnavailable };
    default:
      return answer;
  }
}

/** `/jupyter/<workspace id>/…`: the workspace id (lower case), or undefined when the path names none. */
export function labWorkspaceOf(url: string): string | undefined {
  const id = /^\/jupyter\/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:[/?#]|$)/.exec(url)?.[1];
  return id?.toLowerCase();
}

/**
 * Decides whether a request may reach a workspace's JupyterLab (`/jupyter/<workspace id>/…`,
 * issue 15): a platform session (Bearer or the cookie) the backend still accepts, our own
 * origin for cookie-only writes and upgrades, and membership of the workspace, all checked by
 * the backend on every request and upgrade. Non-members and unknown workspaces: 404. Viewers
 * read only: any other method, and every websocket (kernels, terminals), is a write (403).
 */
export async function checkWorkspaceLabAccess(
  method: string,
  url: string,
  headers: IncomingHttpHeaders,
  host: string,
  requestId: string,
  sessions: SessionChecker,
): Promise<JupyterAccess> {
  const workspaceId = labWorkspaceOf(url);
  if (workspaceId === undefined) return { ok: false, status: 404, error: 'not_found', message: MESSAGES.jupyterNoWorkspace };
  const upgrade = String(headers.upgrade ?? '').toLowerCase() === 'websocket';
  const writes = upgrade || !SAFE_METHODS.has(method);
  const answer = await checkSession(method, headers, host, requestId, sessions, { workspaceId, access: writes ? 'write' : 'read' });
  if (!('kind' in answer)) return answer;
  if (answer.kind === 'user') return { ok: true, userId: answer.userId };
  // The ingress's own words (nginx cannot pass the backend's on).
  return answer.status === 404
    ? { ok: false, status: 404, error: 'not_found', message: MESSAGES.jupyterNotMember }
    : { ok: false, status: 403, error: 'forbidden', message: MESSAGES.jupyterReadOnly };
}

/** Where a browser without a (valid) session goes: the login page, and back here afterwards. */
export function loginRedirect(url: string): string {
  return `/login?next=${encodeURIComponent(url)}`;
}

/** A browser opening a page (GET, HTML accepted), as opposed to an API call or a websocket. */
export function isPageRequest(method: string, headers: IncomingHttpHeaders): boolean {
  return method === 'GET' && String(headers.upgrade ?? '') === '' && String(headers.accept ?? '').includes('text/html');
}
