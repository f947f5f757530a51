import { describe, expect, it } from 'vitest';
import { collectPages, LIST_MAX_PAGES, loadPages, type Page, type PageQuery } from './paging';

/** A list of `total` numbers served `size` at a time, the cursor being the next offset. */
const list =
  (total: number, size: number, asked: (string | undefined)[] = []) =>
  (cursor: string | undefined): Promise<Page<number>> => {
    asked.push(cursor);
    const from = Number(cursor ?? 0);
    const items = Array.from({ length: Math.max(0, Math.min(size, total - from)) }, (_, i) => from + i);
    return Promise.resolve({ items, next_cursor: from + size < total ? String(from + size) : null });
  };

describe('collectPages: every page of a list, or as many as allowed and the word that more exist', () => {
  it('follows the cursor to the last page', async () => {
    const asked: (string | undefined)[] = [];
    const got = await collectPages(list(25, 10, asked), 100);
    expect(got).toEqual({ items: Array.from({ length: 25 }, (_, i) => i), complete: true });
    expect(asked).toEqual([undefined, '10', '20']);
  });

  it('an empty list is complete', async () => {
    expect(await collectPages(list(0, 10), 100)).toEqual({ items: [], complete: true });
  });

  it('stops at maxPages and says the list goes on', async () => {
    const asked: (string | undefined)[] = [];
    const got = await collectPages(list(1000, 10, asked), 3);
    expect(got.items).toHaveLength(30);
    expect(got.complete).toBe(false);
    expect(asked).toHaveLength(3);
  });

  it('a list of exactly maxPages pages is complete', async () => {
    expect((await collectPages(list(30, 10), 3)).complete).toBe(true);
  });

  it('shows what has arrived after the first page and then after pages 2, 4, 8, … while more follow; stops when told', async () => {
    const seen: number[] = [];
    const got = await collectPages(list(95, 10), 100, (soFar) => {
      expect(soFar.complete).toBe(false);
      seen.push(soFar.items.length);
    });
    expect(seen).toEqual([10, 20, 40, 80]);
    expect(got).toEqual({ items: Array.from({ length: 95 }, (_, i) => i), complete: true });
    // A snapshot, not the array being filled.
    let first: number[] = [];
    await collectPages(list(30, 10), 100, (soFar) => {
      if (first.length === 0) first = soFar.items;
    });
    expect(first).toHaveLength(10);
    const asked: (string | undefined)[] = [];
    const stopped = await collectPages(list(1000, 10, asked), 100, (soFar) => soFar.items.length < 20);
    expect(asked).toEqual([undefined, '10']);
    expect(stopped).toEqual({ items: Array.from({ length: 20 }, (_, i) => i), complete: false });
    // Not told after the last page it may read.
    const atMax: number[] = [];
    await collectPages(list(1000, 10), 2, (soFar) => void atMax.push(soFar.items.length));
    expect(atMax).toEqual([10]);
  });
});

describe('loadPages: a whole API list for a loader', () => {
  /** `list` answered as openapi-fetch does; page `failAt` (a cursor) answers an error body. */
  const api =
    (total: number, size: number, failAt?: string) =>
    async ({ cursor }: PageQuery) =>
      cursor !== undefined && cursor === failAt ? { error: { error: 'internal', message: 'boom' } } : { data: await list(total, size)(cursor) };

  it('reads every page, at most LIST_MAX_PAGES, and says when the list goes on', async () => {
    expect(await loadPages(api(25, 10))).toEqual({ data: { items: Array.from({ length: 25 }, (_, i) => i), complete: true } });
    const long = await loadPages(api(10 * (LIST_MAX_PAGES + 1), 10));
    expect(long.data?.items).toHaveLength(10 * LIST_MAX_PAGES);
    expect(long.data?.complete).toBe(false);
  });

  it('a failing page answers its error, never a part of the list as if it were all', async () => {
    expect(await loadPages(api(25, 10, '20'))).toEqual({ error: { error: 'internal', message: 'boom' } });
    expect(await loadPages(() => Promise.resolve({ error: { error: 'not_found', message: 'no such workspace' } }))).toEqual({
      error: { error: 'not_found', message: 'no such workspace' },
    });
  });
});
