import type { IncomingHttpHeaders } from 'node:http';
import { parseBasicPassword, parseBearer } from './bearer.js';

/**
 * The one definition of how a browser session travels and when a request carrying it is
 * refused (decision 0120). The backend and the bridge (`userAuth` of service-kit) and the
 * gateway's /jupyter check use these functions; nginx's generated configuration uses the name.
 */

/** The name of the platform's session cookie (it holds the same JWT as the Bearer token). */
export const SESSION_COOKIE = 'codeagent_session';

/**
 * The cookies of a workspace lab's own host (LAB_ORIGIN, decision 0263): its pass, and the state a
 * ticket is checked against. Both carry the `__Host-` prefix (so `Secure`, which browsers honour
 * over https and on `localhost`), which a browser sets only without `Domain` and for `/`: every
 * other workspace's lab is a sibling host, and a page there could otherwise set a cookie for the
 * parent domain that this host would read first (a pass of the attacker's own, or a state of theirs).
 */
export const LAB_PASS_COOKIE = '__Host-codeagent_lab';
export const LAB_STATE_COOKIE = '__Host-codeagent_lab_state';
/** Every name a lab's cookies may have, the prefix's and the plain ones a sibling could set: none of them goes past the gateway. */
export const LAB_COOKIE_NAMES: readonly string[] = [LAB_PASS_COOKIE, LAB_STATE_COOKIE, 'codeagent_lab', 'codeagent_lab_state'];

export const LAB_STATE_HEADER = 'x-codeagent-lab-state';
/** The state, with which the lab's host exchanges a ticket; its hash, with which the platform's origin asks for one. */
export const LAB_STATE_HASH_HEADER = 'x-codeagent-lab-state-hash';

/** Headers of the session check (`GET /api/v1/auth/session`) that name a lab's workspace, and whether the request reads or writes. */
export const WORKSPACE_HEADER = 'x-codeagent-workspace';
export const ACCESS_HEADER = 'x-codeagent-access';

/**
 * The attributes the session cookie is set and cleared with: never readable by scripts, sent
 * on top-level navigations from other sites but not on their sub-requests or writes (SameSite
 * Lax), for every path; `secure` when the client reached us over HTTPS.
 */
export function sessionCookieOptions(secure: boolean): { httpOnly: true; sameSite: 'lax'; path: '/'; secure: boolean } {
  return { httpOnly: true, sameSite: 'lax', path: '/', secure };
}

/** Methods that change nothing: a cookie-only request with one of them is not checked for its origin. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The value of one cookie of a Cookie header (first occurrence, percent-decoded when it can be), or ''. */
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

/** The Cookie header without the named cookie (undefined when nothing is left). */
export function withoutCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  const kept = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p !== '' && p.split('=')[0]!.trim() !== name);
  return kept.length > 0 ? kept.join('; ') : undefined;
}

/** Where the request's token came from: the source decides the origin rule (see `refusedCrossSite`). */
export type CredentialSource = 'bearer' | 'basic' | 'cookie';

export interface Credential {
  token: string;
  source: CredentialSource;
}

/**
 * The token a request carries, in the platform's order: a Bearer header first, then (only where
 * `basic` is allowed: WebDAV mounts) the password of HTTP Basic, then the session cookie.
 * Undefined when there is none.
 */
export function requestCredential(headers: IncomingHttpHeaders, opts: { basic?: boolean } = {}): Credential | undefined {
  const bearer = parseBearer(headers.authorization);
  if (bearer !== '') return { token: bearer, source: 'bearer' };
  if (opts.basic) {
    const basic = parseBasicPassword(headers.authorization);
    if (basic !== '') return { token: basic, source: 'basic' };
  }
  const cookie = readCookie(headers.cookie, SESSION_COOKIE);
  return cookie !== '' ? { token: cookie, source: 'cookie' } : undefined;
}

/**
 * The request comes from our own origin: browsers send Sec-Fetch-Site, older ones at least
 * Origin, compared with `host`, the host the client addressed (Host, or what the caller trusts
 * as the forwarded host). No header at all is not same-origin.
 */
export function isSameOrigin(headers: IncomingHttpHeaders, host: string | undefined): boolean {
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none';
  const origin = headers.origin;
  return typeof origin === 'string' && originIsHost(origin, host);
}

/**
 * A browser says the request comes from another site. Clients that are not browsers (mounts,
 * scripts) send neither Sec-Fetch-Site nor Origin and are not refused for it.
 */
export function isCrossSiteBrowserRequest(headers: IncomingHttpHeaders, host: string | undefined): boolean {
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') return !(site === 'same-origin' || site === 'none');
  const origin = headers.origin;
  return typeof origin === 'string' && !originIsHost(origin, host);
}

function originIsHost(origin: string, host: string | undefined): boolean {
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/**
 * The rule of docs/contract/spec.md §4.1 for credentials a browser sends on its own:
 * - Bearer: never refused (another site cannot make a browser send it).
 * - Basic: refused for every method when a browser says it is cross-site (browsers keep Basic
 *   credentials and send them even with another site's `<img>` or `<script src>`, which
 *   SameSite keeps the cookie from).
 * - Cookie: a write or a websocket upgrade must come from our own origin (a websocket opened
 *   from another site would execute code with the user's session).
 */
export function refusedCrossSite(source: CredentialSource, method: string, headers: IncomingHttpHeaders, host: string | undefined): boolean {
  switch (source) {
    case 'bearer':
      return false;
    case 'basic':
      return isCrossSiteBrowserRequest(headers, host);
    case 'cookie': {
      const upgrade = String(headers.upgrade ?? '').toLowerCase() === 'websocket';
      return (upgrade || !SAFE_METHODS.has(method)) && !isSameOrigin(headers, host);
    }
  }
}
