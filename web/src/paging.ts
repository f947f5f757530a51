import type { Answer } from './load';

/** One page of a list (docs/contract/spec.md §3): its items and the cursor of the next page, if any. */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** What a list gave, and whether that is all of it. */
export interface Collected<T> {
  items: T[];
  /** false when `maxPages` pages were read and the list had more: the page must say so. */
  complete: boolean;
}

/**
 * Follows a list's cursor from its first page, at most `maxPages` pages. `onProgress`, when
 * given, sees what has arrived while more pages follow: after the first page, then after pages
 * 2, 4, 8, … (a long list is shown early without being redrawn at every page); when it answers
 * false the collection stops there (its result is then incomplete, and nobody wants it).
 */
export async function collectPages<T>(
  page: (cursor: string | undefined) => Promise<Page<T>>,
  maxPages: number,
  onProgress?: (soFar: Collected<T>) => boolean | void,
): Promise<Collected<T>> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (let n = 1; n <= maxPages; n++) {
    const answer = await page(cursor);
    items.push(...answer.items);
    if (!answer.next_cursor) return { items, complete: true };
    cursor = answer.next_cursor;
    // (n & (n - 1)) === 0: n is a power of two.
    if (onProgress && n < maxPages && (n & (n - 1)) === 0 && onProgress({ items: [...items], complete: false }) === false) break;
  }
  return { items, complete: false };
}

/**
 * Pages of 1 000 rows a list of the web app reads at most (10 000 rows), where the whole list is
 * shown at once (the trash, the schedules, the run form's notebooks, the administration's users,
 * workspaces and members): enough for any team, bounded for a page's memory and drawing. A list
 * with more says so (decision 0204).
 */
export const LIST_MAX_PAGES = 10;

/** The query of one page a whole list asks for: the largest page (1 000 rows) and the cursor. */
export interface PageQuery {
  limit: number;
  cursor?: string;
}

/**
 * A whole API list for a loader (`useLoad`): every page from the first, at most `maxPages`, or
 * the first page's or a later page's error. `page` is one call of the API (openapi-fetch's
 * answer) with `query` among its query parameters.
 */
export async function loadPages<T>(page: (query: PageQuery) => Promise<Answer<Page<T>>>, maxPages = LIST_MAX_PAGES): Promise<Answer<Collected<T>>> {
  try {
    return {
      data: await collectPages(async (cursor) => {
        const { data, error } = await page({ limit: 1000, ...(cursor ? { cursor } : {}) });
        // (The API's error body, { error, message }: loadPages answers it; describeError reads it.)
        if (data === undefined) throw error;
        return data;
      }, maxPages),
    };
  } catch (error) {
    return { error };
  }
}
