import { Type, type Static } from '@sinclair/typebox';
import { BadRequestError } from './errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Query string of every list route (docs/contract/spec.md §3). */
export const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  cursor: Type.Optional(Type.String({ maxLength: 512 })),
});
export type ListQueryType = Static<typeof ListQuery>;

/** Response schema of a list of `item`. */
export function listResponse<T extends Parameters<typeof Type.Array>[0]>(item: T) {
  return Type.Object({ items: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });
}

/** The `Static<>` of `listResponse(item)`: a page of a list as answered. */
export interface ListPage<T> {
  items: T[];
  next_cursor: string | null;
}

/** Opaque keyset cursor: base64url of a JSON array of the sort key of the last item. */
export function encodeCursor(key: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/**
 * What one position of a cursor holds: `time` an RFC 3339 timestamp (answered as a Date),
 * `uuid` an id, `text` any string without NUL or control characters (an object path).
 */
export type CursorField = 'time' | 'uuid' | 'text';
type CursorValue<F extends CursorField> = F extends 'time' ? Date : string;
export type CursorKey<S extends readonly CursorField[]> = { -readonly [K in keyof S]: CursorValue<S[K]> };

// RFC 3339 with a four-digit year (what toISOString writes; PostgreSQL accepts all of them).
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function fieldValue(kind: CursorField, value: unknown): Date | string | undefined {
  if (typeof value !== 'string') return undefined;
  switch (kind) {
    case 'time': {
      if (!RFC3339.test(value)) return undefined;
      const at = new Date(value);
      return Number.isNaN(at.getTime()) ? undefined : at;
    }
    case 'uuid':
      return isUuid(value) ? value.toLowerCase() : undefined;
    case 'text':
      return value.length > 0 && !CONTROL.test(value) && !LONE_SURROGATE.test(value) ? value : undefined;
  }
}

/**
 * The sort key a `cursor` carries, checked against the `shape` of the list's key: every field
 * of the right kind, so that no foreign, truncated or hand-made cursor reaches a query (where
 * a bad date or a non-UUID id would fail as a 500). Anything else is 400 invalid_request.
 */
export function decodeCursor<const S extends readonly CursorField[]>(cursor: string | undefined, shape: S): CursorKey<S> | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    key = undefined;
  }
  if (Array.isArray(key) && key.length === shape.length) {
    const values = shape.map((kind, i) => fieldValue(kind, key[i]));
    if (values.every((v) => v !== undefined)) return values as CursorKey<S>;
  }
  throw new BadRequestError('cursor is not valid; use the next_cursor of a previous page', { cursor: 'invalid cursor' });
}

/**
 * One page of a keyset query that fetched `limit + 1` rows: the items, and the cursor of the
 * last item when there is more.
 */
export function keysetPage<R, T>(
  rows: R[],
  limit: number,
  key: (row: R) => (string | number)[],
  toItem: (row: R) => T,
): { items: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(toItem), next_cursor: rows.length > limit && last !== undefined ? encodeCursor(key(last)) : null };
}

/** Ids are UUIDs (docs/contract/spec.md §3): anything else cannot name a row, so callers answer 404 without a query. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
