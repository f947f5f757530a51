/**
 * Query parameter names that carry credentials (docs/contract/spec.md §8.2, docs/decisions/0021-cluster-base-url-credentials.md).
 * A name is compared after camelCase is split and `-`/`.` become `_`, case-insensitively:
 * `accessToken`, `X-Amz-Signature` and `hdfs.delegation.token` read as `access_token`,
 * `x_amz_signature`, `hdfs_delegation_token`.
 *
 * - SECRET_NAMES: the whole name is one of these.
 * - SECRET_WORDS: any `_`-separated word of the name is one of these (`client_secret`,
 *   `x_amz_security_token`, `db_password`).
 */
export const SECRET_NAMES: readonly string[] = [
  'key',
  'api_key',
  'apikey',
  'access_key',
  'secret_key',
  'private_key',
  'pass',
  'auth',
  'authorization',
  'sig',
  'session',
];
export const SECRET_WORDS: readonly string[] = [
  'token',
  'password',
  'passwd',
  'pwd',
  'secret',
  'signature',
  'credential',
  'credentials',
  'apikey',
  'jwt',
  'bearer',
  'delegation',
  'sessionid',
];

/** `accessToken` → `access_token`, `X-Amz-Signature` → `x_amz_signature`. */
function normalisedName(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[-.\s]+/g, '_');
}

export function isSecretQueryName(name: string): boolean {
  const n = normalisedName(name);
  return SECRET_NAMES.includes(n) || n.split('_').some((word) => SECRET_WORDS.includes(word));
}

/**
 * Why `raw` is not an acceptable cluster `base_url` (docs/contract/spec.md §8.2), or undefined when it is. The
 * reason never repeats the URL: it may hold the very secret being refused.
 */
export function baseUrlProblem(raw: string): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must use http or https';
  if (u.username !== '' || u.password !== '') {
    return 'must not contain user info (user:password@); put the user in username and the password in AuthPassword';
  }
  const secret = [...u.searchParams.keys()].find(isSecretQueryName);
  if (secret !== undefined) {
    return `must not carry credentials in its query (parameter ${JSON.stringify(secret)}); use auth_type, username and AuthPassword`;
  }
  if (u.hash !== '' || raw.includes('#')) return 'must not have a fragment (#…)';
  return undefined;
}

/**
 * The URL as it may be shown (responses, audit entries, agent tools): user info and the values
 * of secret-looking query parameters replaced by `***`. New records cannot hold either; this
 * covers records stored before the rule existed.
 */
export function redactBaseUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return raw;
  }
  let changed = false;
  if (u.username !== '' || u.password !== '') {
    u.username = '***';
    u.password = '';
    changed = true;
  }
  for (const key of [...new Set(u.searchParams.keys())]) {
    if (isSecretQueryName(key)) {
      u.searchParams.set(key, '***');
      changed = true;
    }
  }
  if (u.hash !== '') {
    u.hash = '';
    changed = true;
  }
  return changed ? u.toString() : raw;
}

/** Whether two stored base URLs have the same origin (scheme, host, port). */
export function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}
