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
