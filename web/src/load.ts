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
  /** Load again while this holds for the data shown (live status): after `pollFirstMs`, then twice as long each time, up to every `pollMs`. */
  pollWhile?: (data: T) => boolean;
  pollMs?: number;
  /** The first wait of a polling (default `pollMs`: a fixed period); starts again at every reload asked for (an action). */
  pollFirstMs?: number;
}

/** The `n`th wait (from 0) of a polling that starts at `firstMs` and doubles up to `maxMs`. */
export function pollDelay(n: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(n, 30));
}

/**
 * The one loader of the web app's lists: loads on mount and whenever `deps` change, keeps the data
 * and the error, reloads on demand, and polls while `pollWhile` says the data is still changing.
 * Only the answer of the newest load is shown: a slow answer for a workspace left meanwhile, or one
 * overtaken by a reload after an action, never replaces a newer one.
 */
export function useLoad<T>(
  load: () => Promise<Answer<T>>,
  deps: DependencyList,
  { pollWhile, pollMs = 2000, pollFirstMs = pollMs }: LoadOptions<T> = {},
): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const newest = useRef(0);
  /** Reloads asked for: each starts the polling's waits again from `pollFirstMs`. */
  const [asked, setAsked] = useState(0);

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
    // A change that has just been asked for (a run started) often ends within a second: look
    // again soon, then less and less often.
    let n = 0;
    let over = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const next = () => {
      if (!over) timer = setTimeout(() => void reload().finally(next), pollDelay(n++, pollFirstMs, pollMs));
    };
    next();
    return () => {
      over = true;
      clearTimeout(timer);
    };
  }, [polling, pollMs, pollFirstMs, reload, asked]);

  // What others changed meanwhile (a notebook made in JupyterLab, a run a schedule started)
  // shows when the reader comes back to the page.
  useOnReturn(() => void reload());

  const reloadAsked = useCallback(async () => {
    setAsked((a) => a + 1);
    await reload();
  }, [reload]);
  return { data, error, reload: reloadAsked };
}

/** Away at least this long (another tab or window) before coming back reloads what is shown. */
export const RETURN_AWAY_MS = 1000;

/**
 * Calls `onReturn` when the reader comes back to the page after at least RETURN_AWAY_MS in another
 * tab (the page hidden) or another window (this one unfocused): what the page shows may have
 * changed meanwhile. A dialog of the page's own that closes at once reloads nothing.
 */
export function useOnReturn(onReturn: () => void): void {
  const latest = useRef(onReturn);
  latest.current = onReturn;
  useEffect(() => {
    let awaySince: number | undefined = document.visibilityState === 'hidden' || !document.hasFocus() ? Date.now() : undefined;
    const away = () => {
      awaySince ??= Date.now();
    };
    const back = () => {
      if (document.visibilityState === 'hidden' || awaySince === undefined) return;
      const long = Date.now() - awaySince >= RETURN_AWAY_MS;
      awaySince = undefined;
      if (long) latest.current();
    };
    const visibility = () => (document.visibilityState === 'hidden' ? away() : back());
    window.addEventListener('blur', away);
    window.addEventListener('focus', back);
    document.addEventListener('visibilitychange', visibility);
    return () => {
      window.removeEventListener('blur', away);
      window.removeEventListener('focus', back);
      document.removeEventListener('visibilitychange', visibility);
    };
  }, []);
}
