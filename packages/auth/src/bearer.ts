/**
 * The one bearer-parsing rule of the platform (SPEC §8.1): the header must start with
 * `Bearer ` (case-sensitive, one space); the token is the rest, trimmed. Anything else
 * (missing header, `bearer x`, `Basic x`, only spaces) yields the empty string.
 */
export function parseBearer(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string' || !value.startsWith('Bearer ')) return '';
  return value.slice('Bearer '.length).trim();
}
