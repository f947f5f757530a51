import { BadRequestError } from '@codeagent/service-kit';

/** The six settings of the JupyterLab extension (SEED §2.1), as the user set them. */
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

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * SPEC §9.1 in one place. URL: user setting, else CODEAGENT_BRIDGE_URL, else the default; user and
 * password: the environment wins over the user setting (so a user setting can never redirect the
 * server's credentials). A user-set URL must be http(s) on loopback unless its host is listed in
 * CODEAGENT_BRIDGE_ALLOWED_HOSTS.
 */
export function resolveSettings(user: UserSettings | undefined, env: BridgeEnvironment): ResolvedSettings {
  const s = user ?? {};
  const timeout = s.requestTimeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  if (!Number.isInteger(timeout) || timeout < 5 || timeout > 600) {
    throw new BadRequestError('requestTimeoutSeconds must be an integer from 5 to 600', { 'settings.requestTimeoutSeconds': 'from 5 to 600' });
  }
  let url = env.url ?? DEFAULT_URL;
  if (s.codeagentServerUrl !== undefined && s.codeagentServerUrl !== '') {
    let parsed: URL;
    try {
      parsed = new URL(s.codeagentServerUrl);
    } catch {
      throw new BadRequestError('codeagentServerUrl is not a URL', { 'settings.codeagentServerUrl': 'not a URL' });
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new BadRequestError('codeagentServerUrl must use http or https', { 'settings.codeagentServerUrl': 'http or https only' });
    }
    const host = parsed.hostname.toLowerCase();
    if (!isLoopback(host) && !env.allowedHosts.includes(host)) {
      throw new BadRequestError(`the code agent must run on this machine; ${host} is not loopback and not in CODEAGENT_BRIDGE_ALLOWED_HOSTS`, {
        'settings.codeagentServerUrl': 'loopback or an allowed host only',
      });
    }
    url = s.codeagentServerUrl;
  }
  return {
    url: url.replace(/\/+$/, ''),
    user: env.user ?? (s.codeagentServerUser || DEFAULT_USER),
    password: env.password ?? s.codeagentServerPassword ?? '',
    provider: s.codeagentProvider ?? '',
    model: s.codeagentModel ?? '',
    timeoutSeconds: timeout,
  };
}
