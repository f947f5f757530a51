/**
 * Checks every service applies to every request before any route sees it (registered by
 * `serviceKit`): no `.`/`..` path segments in any encoding, no JSON body nested too deep.
 */

/** Deepest nesting of a JSON request body (docs/contract/spec.md §4.5); the outermost object or array is level 1. */
export const MAX_JSON_DEPTH = 64;

function isPlainContainer(value: unknown): value is object {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * True when a parsed JSON value nests objects/arrays deeper than `max`. Iterative (an explicit
 * stack), so a hostile body cannot overflow the call stack here; it stops at the first level
 * too deep. Anything that is not a plain object or array (a stream, a Buffer) is not looked into.
 */
export function exceedsJsonDepth(value: unknown, max = MAX_JSON_DEPTH): boolean {
  if (!isPlainContainer(value)) return false;
  const stack: [object, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (isPlainContainer(child)) stack.push([child, depth + 1]);
    }
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
