import { describeError } from './api/client';

/** An action on many rows under way: which, and how far it is (the page shows "12 of 100…"). */
export interface BulkProgress<A extends string> {
  action: A;
  done: number;
  total: number;
}

/**
 * Runs `step` on each item in turn — one request at a time, so that a long selection never
 * floods the server — and calls `onProgress` with the count done after each. Answers the
 * refusals by the item's key: the step's sentence, or what it threw in words; the others went
 * through.
 */
export async function eachInTurn<T>(
  items: readonly T[],
  key: (item: T) => string,
  step: (item: T) => Promise<string | null>,
  onProgress: (done: number) => void,
): Promise<Map<string, string>> {
  const refused = new Map<string, string>();
  for (const [i, item] of items.entries()) {
    const problem = await step(item).catch((err: unknown) => describeError(err));
    if (problem) refused.set(key(item), problem);
    onProgress(i + 1);
  }
  return refused;
}
