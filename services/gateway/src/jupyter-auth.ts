import type { IncomingHttpHeaders } from 'node:http';
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import { refusedCrossSite, requestCredential } from '@codeagent/auth';
import { MESSAGES } from './routes.js';

// The cookie's name and the cookie/origin rule are the platform's one copy in @codeagent/auth
// (decision 0120); re-exported for app.ts and nginx.ts.
export { SESSION_COOKIE, withoutCookie } from '@codeagent/auth';

/** The backend route that answers who a session is (SPEC §4.1 addition), or 401. */
export const SESSION_CHECK_PATH = '/api/v1/auth/session';

/** What the backend says about a session token. */
export type SessionAnswer =
  | { kind: 'user'; userId: string; isSystemAdmin: boolean }
  | { kind: 'invalid'; message: string }
  | { kind: 'unavailable'; timedOut: boolean; detail: string };

/** What the session check needs of the backend's pool: undici's promise form of `request`. */
export interface SessionDispatcher {
  request(options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
}

export interface SessionChecker {
  check(token: string, requestId: string): Promise<SessionAnswer>;
  close(): Promise<void>;
}

/**
 * Asks the backend about a token on every call, as nginx's `auth_request` would: nothing is
 * cached, so a logout, a revocation or a disabled account takes effect at the next request.
 * The gateway holds no database and no JWT secret; the backend is the one place that decides.
 */
export function backendSessionChecker(backend: string | SessionDispatcher, timeoutMs = 10_000): SessionChecker {
  // A URL: a pool of its own; otherwise the gateway's pool of backend instances.
  const own = typeof backend === 'string' ? new Pool(new URL(backend).origin, { connections: 16, keepAliveTimeout: 60_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }) : undefined;
  const pool: SessionDispatcher = own ?? (backend as SessionDispatcher);
  return {
    async check(token, requestId) {
      try {
        const res = await pool.request({
          method: 'GET',
          path: SESSION_CHECK_PATH,
          // Always as Bearer: the backend then checks exactly this token, and no other cookie of the client travels.
          headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'x-request-id': requestId },
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
          return { kind: 'user', userId: body.user_id, isSystemAdmin: body.is_system_admin };
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

export type JupyterAccess =
  | { ok: true; userId: string }
  | { ok: false; status: 401 | 403 | 502 | 504; error: string; message: string };

const LOG_IN = MESSAGES.jupyterLogIn;

/**
 * Decides whether a request may reach the shared JupyterLab server (SPEC §10, issue 13 item 5):
 * a platform user token (Bearer header or the `codeagent_session` cookie), our own origin for
 * cookie-only writes and websocket upgrades, a session the backend still accepts (checked on
 * every request), and, until each workspace has its own JupyterLab server, a system
 * administrator: the shared server runs every user's code as one user, with all files.
 */
export async function checkJupyterAccess(method: string, headers: IncomingHttpHeaders, host: string, requestId: string, sessions: SessionChecker): Promise<JupyterAccess> {
  const credential = requestCredential(headers);
  if (!credential) return { ok: false, status: 401, error: 'unauthorized', message: LOG_IN };
  if (refusedCrossSite(credential.source, method, headers, host)) {
    return { ok: false, status: 403, error: 'forbidden', message: MESSAGES.jupyterCrossSite };
  }
  const answer = await sessions.check(credential.token, requestId);
  switch (answer.kind) {
    case 'invalid':
      return { ok: false, status: 401, error: 'unauthorized', message: answer.message };
    case 'unavailable':
      return answer.timedOut
        ? { ok: false, status: 504, error: 'gateway_timeout', message: MESSAGES.sessionTimeout }
        : { ok: false, status: 502, error: 'bad_gateway', message: MESSAGES.sessionUnavailable };
    case 'user':
      if (!answer.isSystemAdmin) {
        return { ok: false, status: 403, error: 'forbidden', message: MESSAGES.jupyterAdminsOnly };
      }
      return { ok: true, userId: answer.userId };
  }
}
