/**
 * The one bearer-parsing rule of the platform (docs/contract/spec.md §8.1): the header must start with
 * `Bearer ` (case-sensitive, one space); the token is the rest, trimmed. Anything else
 * (missing header, `bearer x`, `Basic x`, only spaces) yields the empty string.
 */
export function parseBearer(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string' || !value.startsWith('Bearer ')) return '';
  return value.slice('Bearer '.length).trim();
}

/**
 * The password of an HTTP Basic `Authorization` header (RFC 7617), for clients that can only
 * send a user name and a password (WebDAV mounts): the platform token is the password, the user
 * name is ignored. The scheme is matched case-insensitively, as RFC 7617 says; anything that is
 * not Basic, not base64 or has no `:` yields the empty string.
 */
export function parseBasicPassword(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string') return '';
  const m = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(value);
  if (!m) return '';
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? '' : decoded.slice(colon + 1).trim();
}
