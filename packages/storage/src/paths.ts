/**
 * The one object-path rule of the platform (docs/contract/spec.md §4.3), used by the data-resources API, the
 * internal objects route and the local storage backend alike.
 *
 * A path is relative, `/`-separated UTF-8 of 1–1024 bytes, with no empty, `.` or `..` segment,
 * no leading `/`, no backslash, and no NUL or other control character (C0, DEL, C1), and it
 * must be well-formed Unicode. Percent-escapes are not decoded here: the HTTP layer decodes a
 * URL once, so `%2e%2e` arrives as `..` (refused) and `%252e` arrives as the literal `%2e`
 * (an ordinary name, never decoded again).
 */
export class InvalidPathError extends Error {
  /** The request's fault wherever it surfaces (Fastify's error handlers answer 400 with the message). */
  readonly statusCode = 400;
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`invalid path ${JSON.stringify(path.length > 80 ? `${path.slice(0, 80)}…` : path)}: ${reason}`);
    this.name = 'InvalidPathError';
  }
}

export const MAX_PATH_BYTES = 1024;

// C0 controls, DEL and C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Returns the path unchanged when valid; throws InvalidPathError naming the broken rule otherwise. */
export function validateObjectPath(path: unknown): string {
  if (typeof path !== 'string') throw new InvalidPathError(String(path), 'must be a string');
  if (path.length === 0) throw new InvalidPathError(path, 'must not be empty');
  if (LONE_SURROGATE.test(path)) throw new InvalidPathError(path, 'must be well-formed Unicode');
  const bytes = Buffer.byteLength(path, 'utf8');
  if (bytes > MAX_PATH_BYTES) throw new InvalidPathError(path, `is ${bytes} bytes long; the limit is ${MAX_PATH_BYTES}`);
  if (CONTROL.test(path)) throw new InvalidPathError(path, 'must not contain NUL or control characters');
  if (path.includes('\\')) throw new InvalidPathError(path, 'must not contain a backslash; use / between segments');
  if (path.startsWith('/')) throw new InvalidPathError(path, 'must be relative (no leading /)');
  for (const segment of path.split('/')) {
    if (segment === '') throw new InvalidPathError(path, 'must not contain an empty segment (// or a trailing /)');
    if (segment === '.' || segment === '..') throw new InvalidPathError(path, `must not contain a ${segment} segment`);
  }
  return path;
}

/**
 * Unicode's bidirectional controls (the Bidi_Control property: ALM, LRM, RLM, the embeddings and
 * overrides, the isolates). In a name they make it display as another ("report\u202Efdp.exe" reads
 * "reportexe.pdf" in every listing), so a member could pass a file off as what it is not.
 */
const BIDI_CONTROL = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/**
 * The rule for a name being given (a write, the destination of a move or copy): the object-path
 * rule, and no bidirectional control character. Names stored before this rule stay readable,
 * movable and deletable through `validateObjectPath`.
 */
export function validateNewObjectPath(path: unknown): string {
  const valid = validateObjectPath(path);
  const bidi = bidiControlIn(valid);
  if (bidi) throw new InvalidPathError(valid, `must not contain bidirectional control characters (${bidi}): they make a name display as another`);
  const invisible = invisibleCharacterIn(valid);
  if (invisible) throw new InvalidPathError(valid, `must not contain invisible characters (${invisible}): they make a name display as another`);
  return valid;
}

/**
 * Characters that show as nothing at all, so that two names that look the same differ (decision
 * 0224's addendum): Unicode's default-ignorable code points (the zero-width space, the word joiner
 * and the invisible operators, the byte-order mark, the soft hyphen, the combining grapheme
 * joiner, the Hangul fillers, the Mongolian vowel separator, the Khmer inherent vowels, the
 * deprecated format characters, the shorthand and musical format controls, the tags, the
 * unassigned U+FFF0–U+FFF8 and U+E0000–U+E0FFF) and the format controls that show nothing
 * either (the interlinear annotation marks, the Egyptian hieroglyph format controls). Not the
 * zero-width joiner and non-joiner (U+200C, U+200D), the variation selectors and the Mongolian
 * free variation selectors: scripts and emoji need them; nor the tags of an emoji flag (after
 * U+1F3F4). The Python module of the workspaces' servers keeps the same set.
 */
const INVISIBLE =
  /[\u00ad\u115f\u1160\u180e\u200b\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\u{13430}-\u{1343f}\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e001f}\u{e0080}-\u{e00ff}\u{e01f0}-\u{e0fff}]|\u034f|\u17b4|\u17b5|(?<!\u{1f3f4}[\u{e0020}-\u{e007f}]*)[\u{e0020}-\u{e007f}]/u;

/** The first invisible character of `text` as `U+XXXX`, or undefined (paths, users, workspaces). */
export function invisibleCharacterIn(text: string): string | undefined {
  const found = INVISIBLE.exec(text);
  return found ? `U+${found[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}` : undefined;
}

/** The first bidirectional control character of `text` as `U+XXXX`, or undefined (the one rule for every name: paths, users, workspaces). */
export function bidiControlIn(text: string): string | undefined {
  const bidi = BIDI_CONTROL.exec(text);
  return bidi ? `U+${bidi[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}` : undefined;
}

/** Same rule for a listing prefix, which may be empty and may end with `/`. */
export function validatePrefix(prefix: string): string {
  if (prefix === '') return prefix;
  validateObjectPath(prefix.endsWith('/') ? `${prefix}x` : prefix);
  return prefix;
}
