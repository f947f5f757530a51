import { canonicalHost } from '@codeagent/safe-fetch';
import { BadRequestError } from '@codeagent/service-kit';

/** The six settings of the JupyterLab extension (docs/contract/seed.md §2.1), as the user set them. */
export interface UserSettings {
  codeagentServerUrl?: string;
  codeagentServerUser?: string;
  codeagentServerPassword?: string;
  codeagentProvider?: string;
  codeagentModel?: string;
  requestTimeoutSeconds?: number;
}

export interface BridgeEnvironment {
  url: string | undefined;
  user: string | undefined;
  password: string | undefined;
  allowedHosts: string[];
}

export interface ResolvedSettings {
  url: string;
  user: string;
  password: string;
  provider: string;
  model: string;
  timeoutSeconds: number;
}

export const DEFAULT_URL = 'http://127.0.0.1:4096';
export const DEFAULT_USER = 'codeagent';
export const DEFAULT_TIMEOUT_SECONDS = 120;

/** Whether `a` and `b` name the same server (scheme, host, port). */
function sameOrigin(a: URL, b: string): boolean {
  try {
    return a.origin === new URL(b).origin;
  } catch {
    return false;
  }
}

/**
 * CODEAGENT_BRIDGE_URL without `user:password@`: the URL is shown to anyone (GET /health) and in
 * error messages, so credentials go in CODEAGENT_BRIDGE_USER/CODEAGENT_BRIDGE_PASSWORD (the
 * platform's settings refuse such a URL at start-up; this guards other callers of the bridge).
 */
export function assertNoUserInfo(url: string | undefined): void {
  if (url === undefined) return;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return;
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new Error('CODEAGENT_BRIDGE_URL must not contain user:password@; set CODEAGENT_BRIDGE_USER and CODEAGENT_BRIDGE_PASSWORD instead');
  }
}

const invalidUrl = (message: string, reason: string) => new BadRequestError(message, { 'settings.codeagentServerUrl': reason });

/**
 * docs/contract/spec.md §9.1 in one place. URL: user setting, else CODEAGENT_BRIDGE_URL, else the default. A
 * user-set URL must be http(s) and either have the origin of the configured server
 * (CODEAGENT_BRIDGE_URL, or the default when it is unset) or a host listed in
 * CODEAGENT_BRIDGE_ALLOWED_HOSTS; loopback is not allowed implicitly (the bridge serves many
 * users: a loopback URL would let any of them probe the platform's own ports).
 * User and password: CODEAGENT_BRIDGE_USER/PASSWORD, else the user's settings, else the
 * defaults; the server's own credentials go only to the configured server, never to another URL.
 */
export function resolveSettings(user: UserSettings | undefined, env: BridgeEnvironment): ResolvedSettings {
  const s = user ?? {};
  const timeout = s.requestTimeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  if (!Number.isInteger(timeout) || timeout < 5 || timeout > 600) {
    throw new BadRequestError('requestTimeoutSeconds must be an integer from 5 to 600', { 'settings.requestTimeoutSeconds': 'from 5 to 600' });
  }
  const configured = env.url ?? DEFAULT_URL;
  let url = configured;
  let toConfiguredServer = true;
  if (s.codeagentServerUrl !== undefined && s.codeagentServerUrl !== '') {
    let parsed: URL;
    try {
      parsed = new URL(s.codeagentServerUrl);
    } catch {
      throw invalidUrl('codeagentServerUrl is not a URL', 'not a URL');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw invalidUrl('codeagentServerUrl must use http or https', 'http or https only');
    if (parsed.username !== '' || parsed.password !== '') {
      throw invalidUrl('codeagentServerUrl must not contain user:password@; use the user and password settings', 'no user info');
    }
    toConfiguredServer = sameOrigin(parsed, configured);
    const allowed = env.allowedHosts.map(canonicalHost);
    if (!toConfiguredServer && !allowed.includes(canonicalHost(parsed.hostname))) {
      throw invalidUrl(
        `codeagentServerUrl must be the configured code agent (${new URL(configured).origin}) or a host listed in CODEAGENT_BRIDGE_ALLOWED_HOSTS; ${canonicalHost(parsed.hostname)} is neither`,
        'the configured server or an allowed host only',
      );
    }
    // As parsed (`127.1` is `127.0.0.1`); a query or fragment means nothing to an API base URL.
    url = `${parsed.origin}${parsed.pathname}`;
  }
  return {
    url: url.replace(/\/+$/, ''),
    user: (toConfiguredServer ? env.user : undefined) ?? (s.codeagentServerUser || DEFAULT_USER),
    password: (toConfiguredServer ? env.password : undefined) ?? s.codeagentServerPassword ?? '',
    provider: s.codeagentProvider ?? '',
    model: s.codeagentModel ?? '',
    timeoutSeconds: timeout,
  };
}
