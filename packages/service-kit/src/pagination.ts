import { Type, type Static } from '@sinclair/typebox';
import { BadRequestError } from './errors.js';

/** Query string of every list route (SPEC §3). */
export const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  cursor: Type.Optional(Type.String({ maxLength: 512 })),
});
export type ListQueryType = Static<typeof ListQuery>;

/** Response schema of a list of `item`. */
export function listResponse<T extends Parameters<typeof Type.Array>[0]>(item: T) {
  return Type.Object({ items: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });
}

/** Opaque keyset cursor: base64url of a JSON array of the sort key of the last item. */
export function encodeCursor(key: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

export function decodeCursor(cursor: string | undefined, arity: number): (string | number)[] | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(key) && key.length === arity && key.every((k) => typeof k === 'string' || typeof k === 'number')) {
      return key as (string | number)[];
    }
  } catch {
    // fall through
  }
  throw new BadRequestError('cursor is not valid; use the next_cursor of a previous page', { cursor: 'invalid cursor' });
}

/**
 * One page of a keyset query that fetched `limit + 1` rows: the items, and the cursor of the
 * last item when there is more.
 */
export function keysetPage<R, T>(rows: R[], limit: number, key: (row: R) => (string | number)[], toItem: (row: R) => T): { items: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { items: page.map(toItem), next_cursor: rows.length > limit && last !== undefined ? encodeCursor(key(last)) : null };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs (SPEC §3): anything else cannot name a row, so callers answer 404 without a query. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
