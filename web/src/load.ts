import { useCallback, useEffect, useRef, useState, type DependencyList } from 'react';
import { describeError } from './api/client';

/** What an API call answers (openapi-fetch's shape): the data, or else the error body. */
export interface Answer<T> {
  data?: T;
  error?: unknown;
}

export interface Loaded<T> {
  /** The last data loaded; null until the first load succeeds. A failed reload keeps it. */
  data: T | null;
  /** The last load's failure, in words (shown next to what it loads); null once a load succeeds. */
  error: string | null;
  /** Loads again (after an action); resolves once the answer is shown. */
  reload: () => Promise<void>;
}

export interface LoadOptions<T> {
  /** Load again every `pollMs` while this holds for the data shown (live status). */
  pollWhile?: (data: T) => boolean;
  pollMs?: number;
}

/**
 * The one loader of the web app's lists: loads on mount and whenever `deps` change, keeps the data
 * and the error, reloads on demand, and polls while `pollWhile` says the data is still changing.
 * Only the answer of the newest load is shown: a slow answer for a workspace left meanwhile, or one
 * overtaken by a reload after an action, never replaces a newer one.
 */
export function useLoad<T>(load: () => Promise<Answer<T>>, deps: DependencyList, { pollWhile, pollMs = 2000 }: LoadOptions<T> = {}): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const newest = useRef(0);

  // `deps` are what `load` reads: the caller's list, as for useCallback.
  const reload = useCallback(async () => {
    const ticket = ++newest.current;
    let answer: Answer<T>;
    try {
      answer = await load();
    } catch (err) {
      answer = { error: err };
    }
    if (ticket !== newest.current) return;
    if (answer.data !== undefined) {
      setData(answer.data);
      setError(null);
    } else setError(describeError(answer.error));
  }, deps);

  useEffect(() => {
    void reload();
    // A load still under way when the page goes away is not shown.
    return () => void ++newest.current;
  }, [reload]);

  const polling = data !== null && pollWhile !== undefined && pollWhile(data);
  useEffect(() => {
    if (!polling) return;
    const timer = setInterval(() => void reload(), pollMs);
    return () => clearInterval(timer);
  }, [polling, pollMs, reload]);

  return { data, error, reload };
}
