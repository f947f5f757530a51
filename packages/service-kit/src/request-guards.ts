/**
 * Checks every service applies to every request before any route sees it (registered by
 * `serviceKit`): no `.`/`..` path segments in any encoding, no JSON body nested too deep.
 */

/** Deepest nesting of a JSON request body (docs/contract/spec.md §4.5); the outermost object or array is level 1. */
export const MAX_JSON_DEPTH = 64;

/**
 * True when the JSON text nests objects/arrays deeper than `max`, read before it is parsed: one
 * pass over the characters (brackets inside strings do not count), stopping at the first level
 * too deep. `JSON.parse` of 1 MiB of `[` builds a million arrays (about 50 ms and 150 MB of one
 * request, logged out); this refuses it after 65 characters. Text that is not JSON is left to
 * the parser, which says what is wrong with it.
 */
export function jsonTextExceedsDepth(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) depth--;
  }
  return false;
}

// Separators as the proxies and URL parsers on the way may read them: `/`, `\` (WHATWG URLs
// treat it as `/`) and their percent-encodings.
const SEPARATORS = /\/|\\|%2f|%5c/i;
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;
const MAY_BE_AMBIGUOUS = /[.%\\]/;

/**
 * Why the path of a request target is refused, or undefined when it is fine: a `.` or `..`
 * segment in any spelling (`./a`, `a/%2E/b`, `.%2fa`, `a\.\b`, `%2e%2e`), or a raw backslash.
 * URL parsers on the way (the gateway's proxy, WHATWG `new URL`) silently drop or resolve such
 * segments and read `\` as `/`, so the request would reach another path than the one the
 * client wrote: refuse it instead, in every service alike.
 */
export function ambiguousPathReason(url: string): string | undefined {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  // (Every spelling of a dot segment or a backslash has a `.`, a `%` or a `\`: most paths have none.)
  if (!MAY_BE_AMBIGUOUS.test(path)) return undefined;
  if (path.includes('\\')) return 'must not contain a backslash; use / between segments';
  const dot = path.split(SEPARATORS).find((segment) => DOT_SEGMENT.test(segment));
  if (dot !== undefined) return `must not contain a ${dot.replace(/%2e/gi, '.')} segment (in any encoding)`;
  return undefined;
}
