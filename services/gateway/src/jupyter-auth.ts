import type { IncomingHttpHeaders } from 'node:http';
import { InvalidTokenError, parseBearer, verifyUserToken } from '@codeagent/auth';

export const SESSION_COOKIE = 'codeagent_session';

/** The value of one cookie of a Cookie header (first occurrence), or ''. */
export function readCookie(header: string | undefined, name: string): string {
  if (!header) return '';
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) {
      const raw = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(raw);
      } catch {
        return raw;
      }
    }
  }
  return '';
}

/** The Cookie header without the platform's session cookie (Jupyter never needs it). */
export function withoutCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  const kept = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p !== '' && p.split('=')[0]!.trim() !== name);
  return kept.length > 0 ? kept.join('; ') : undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A request authenticated by the cookie alone must come from our own origin when it changes
 * something or opens a websocket (kernels execute code): Sec-Fetch-Site, else Origin vs Host.
 */
export function isSameOrigin(headers: IncomingHttpHeaders): boolean {
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none';
  const origin = headers.origin;
  if (typeof origin !== 'string') return false;
  try {
    return new URL(origin).host === headers.host;
  } catch {
    return false;
  }
}

export type JupyterAccess = { ok: true; userId: string } | { ok: false; status: 401 | 403; error: string; message: string };

/**
 * Decides whether a request may reach the JupyterLab server: a valid platform user token
 * (Bearer header or the `codeagent_session` cookie, as the backend accepts them), and for
 * cookie-only writes and websocket upgrades, our own origin. The gateway checks the token's
 * signature and expiry; it holds no database, so a token revoked by logout stays usable here
 * until it expires (JWT_TTL_SECONDS, 1 h by default).
 */
export async function checkJupyterAccess(method: string, headers: IncomingHttpHeaders, jwtSecret: string): Promise<JupyterAccess> {
  const bearer = parseBearer(headers.authorization);
  const token = bearer !== '' ? bearer : readCookie(headers.cookie, SESSION_COOKIE);
  if (token === '') {
    return { ok: false, status: 401, error: 'unauthorized', message: 'log in to the platform first (POST /api/v1/auth/login), then open /jupyter/ again' };
  }
  let userId: string;
  try {
    userId = (await verifyUserToken(token, jwtSecret)).sub;
  } catch (err) {
    if (err instanceof InvalidTokenError) return { ok: false, status: 401, error: 'unauthorized', message: `${err.message}; log in again` };
    throw err;
  }
  const upgrade = String(headers.upgrade ?? '').toLowerCase() === 'websocket';
  if (bearer === '' && (upgrade || !SAFE_METHODS.has(method)) && !isSameOrigin(headers)) {
    return { ok: false, status: 403, error: 'forbidden', message: 'cross-site request refused: open JupyterLab through this platform' };
  }
  return { ok: true, userId };
}
