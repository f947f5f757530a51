import { BadRequestError, PreconditionFailedError } from '@codeagent/service-kit';

/** An object's entity tag (`ETag`): the SHA-256 of its content, quoted. */
export function entityTag(sha256: string): string {
  return `"${sha256}"`;
}

/** The tags of an `If-Match` or `If-None-Match` list (RFC 9110 §13.1), or `*`. */
function tags(header: string): '*' | string[] {
  if (header.trim() === '*') return '*';
  return header
    .split(',')
    .map((tag) => tag.trim())
    .filter((tag) => tag !== '');
}

/** Whether `If-None-Match` names the object (weak comparison: `W/"…"` matches too; `*`: any object). */
export function noneMatchHits(header: string | undefined, sha256: string): boolean {
  if (header === undefined) return false;
  const list = tags(header);
  return list === '*' || list.some((tag) => tag.replace(/^W\//, '') === entityTag(sha256));
}

/**
 * The preconditions of a write (RFC 9110 §13.1.1, §13.1.2): `If-Match` (the write goes ahead
 * only while the path holds one of these contents, `*` any) and `If-None-Match` (only while it
 * holds none of them, `*` nothing: create only). Decision 0262.
 */
export interface WriteConditions {
  ifMatch?: string | undefined;
  ifNoneMatch?: string | undefined;
}

/**
 * The write's conditions from its request headers; undefined without any. `*` stands alone or not
 * at all (RFC 9110: `"*" / #entity-tag`): in a list, or the header repeated (Node joins the
 * copies with commas), it is 400 rather than read as a tag, which made `If-None-Match: *, *`
 * (create only) replace a file.
 */
export function writeConditionsOf(headers: Record<string, string | string[] | undefined>): WriteConditions | undefined {
  const one = (name: string) => {
    const v = headers[name];
    const value = Array.isArray(v) ? v.join(', ') : v;
    if (value !== undefined && tags(value) !== '*' && (tags(value) as string[]).includes('*')) {
      throw new BadRequestError(`${name}: * stands alone, never in a list of entity tags`, { [name]: 'malformed' });
    }
    return value;
  };
  const ifMatch = one('if-match');
  const ifNoneMatch = one('if-none-match');
  return ifMatch === undefined && ifNoneMatch === undefined ? undefined : { ifMatch, ifNoneMatch };
}

/**
 * Refuses (412 precondition_failed) a write whose conditions the path's current content (or its
 * absence; `{ sha256: undefined }` for a folder, which has no entity tag) does not meet.
 */
export function checkWriteConditions(current: { sha256?: string | undefined } | undefined, conditions: WriteConditions | undefined, path: string): void {
  if (conditions === undefined) return;
  const { ifMatch, ifNoneMatch } = conditions;
  if (ifMatch !== undefined) {
    const list = tags(ifMatch);
    // Strong comparison: a weak tag never matches.
    const met = current !== undefined && (list === '*' || (current.sha256 !== undefined && list.includes(entityTag(current.sha256))));
    if (!met) {
      throw new PreconditionFailedError(
        current === undefined
          ? `If-Match: nothing is at ${path}; nothing was changed`
          : `If-Match: ${path} has changed (its ETag is no longer the one given); nothing was changed: read it again`,
      );
    }
  }
  if (ifNoneMatch !== undefined && current !== undefined) {
    const list = tags(ifNoneMatch);
    if (list === '*' || (current.sha256 !== undefined && noneMatchHits(ifNoneMatch, current.sha256))) {
      throw new PreconditionFailedError(
        list === '*'
          ? `If-None-Match: *: ${path} exists already; nothing was changed`
          : `If-None-Match: ${path} holds one of the contents named; nothing was changed`,
      );
    }
  }
}
