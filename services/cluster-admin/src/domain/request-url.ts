/** A `cluster_request` that is refused before any request is sent (docs/contract/spec.md §8.4). */
export class RequestRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestRefusedError';
  }
}

// C0 controls, DEL and C1 controls: the URL parser drops tabs and newlines (`.\n.` would become `..`).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const MAX_DECODING_ROUNDS = 10;

/** One round of percent-decoding, byte by byte (never throws; a stray `%` stays literal). */
const decodeOnce = (s: string) => s.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

/**
 * What a segment means to a server that decodes it any number of times: `%2e%2e`, `%252e%252e`
 * and `..` are the same segment to some server along the way.
 */
function fullyDecoded(segment: string): string {
  let current = segment;
  for (let round = 0; round < MAX_DECODING_ROUNDS; round++) {
    const next = decodeOnce(current);
    if (next === current) return current;
    current = next;
  }
  throw new RequestRefusedError('path: a segment is percent-encoded too many times over');
}

/**
 * Checks `path` of a `cluster_request` (docs/contract/spec.md §8.4): a plain relative path below the cluster's
 * base path. Refused: backslashes, `?` and `#` (query parameters go in `query`), absolute URLs
 * and `//host`, empty segments, control characters, and `.`/`..` segments in any encoding
 * (`%2e%2e`, `%252e`, `..;` as Tomcat reads it), encoded separators (`%2f`, `%5c`, `%3f`, `%23`).
 * Dot segments are refused even where they would stay inside the base path: the agent can
 * always write the path without them, and one rule is easier to trust than a resolver.
 */
export function checkRequestPath(path: string): void {
  if (CONTROL.test(path)) throw new RequestRefusedError('path: control characters are not allowed');
  if (path.includes('\\')) throw new RequestRefusedError('path: backslashes are not allowed; use / between segments');
  if (path.includes('?') || path.includes('#')) throw new RequestRefusedError('path: ? and # are not allowed; pass query parameters in `query`');
  if (SCHEME.test(path)) throw new RequestRefusedError('path: an absolute URL is not allowed; give a path below the cluster base URL');
  if (path.includes('//')) throw new RequestRefusedError('path: // (an empty segment or another host) is not allowed');
  const relative = path.replace(/^\//, '');
  for (const segment of relative.split('/')) {
    const decoded = fullyDecoded(segment);
    if (CONTROL.test(decoded)) throw new RequestRefusedError('path: encoded control characters are not allowed');
    if (/[/\\?#]/.test(decoded)) throw new RequestRefusedError('path: encoded /, \\, ? or # are not allowed');
    // `..;x` is `..` to servlet containers that strip path parameters.
    const name = decoded.split(';')[0]!.trim();
    if (name === '.' || name === '..') throw new RequestRefusedError('path: . and .. segments are not allowed, in any encoding; write the path without them');
  }
}

/**
 * `base_url + path` with `query` added (docs/contract/spec.md §8.4), or RequestRefusedError. `reservedKeys` are
 * query parameters the cluster record fixes (those of `base_url`, `user.name` of simple auth):
 * the agent may not override them.
 */
export function clusterRequestUrl(baseUrl: string, path: string, query: Record<string, string> | undefined, reservedKeys: readonly string[] = []): URL {
  checkRequestPath(path);
  const base = new URL(baseUrl);
  const url = new URL(base);
  const basePath = base.pathname.replace(/\/$/, '');
  url.pathname = `${basePath}/${path.replace(/^\//, '')}`;
  url.hash = '';
  const reserved = new Set([...reservedKeys, ...base.searchParams.keys()]);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (reserved.has(key)) throw new RequestRefusedError(`query: ${key} is set by the cluster record and cannot be overridden`);
    url.searchParams.set(key, value);
  }
  // Belt and braces: whatever the checks above missed, the request stays on the cluster, below its path.
  if (url.origin !== base.origin || !url.pathname.startsWith(`${basePath}/`)) {
    throw new RequestRefusedError("path: the resolved path leaves the cluster's base path");
  }
  return url;
}
