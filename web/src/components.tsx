import { Component, type AnchorHTMLAttributes, type ReactNode } from 'react';
import { navigate } from './router';

/** An in-app link: a real <a href> (open in new tab, keyboard, screen readers) that navigates without reloading. */
export function Link({ to, children, ...rest }: { to: string; children: ReactNode } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  return (
    <a
      {...rest}
      href={to}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

/** An error shown next to what caused it, announced to screen readers. */
export function ErrorText({ error, id }: { error: string | null | undefined; id?: string }) {
  if (!error) return null;
  return (
    <p className="error" role="alert" id={id}>
      {error}
    </p>
  );
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '';
  return new Date(iso).toLocaleString();
}

/**
 * Keeps a failing part (a lazy chunk that did not load, a preview that threw) from taking the whole
 * app down: it shows a sentence in its place, and the rest of the page keeps working.
 */
export class PartBoundary extends Component<{ what: string; children: ReactNode }, { failed: string | null }> {
  override state = { failed: null as string | null };
  static getDerivedStateFromError(err: unknown) {
    return { failed: err instanceof Error ? err.message : 'unknown error' };
  }
  override render() {
    if (this.state.failed !== null)
      return <ErrorText error={`The ${this.props.what} could not be shown (${this.state.failed}). Reload the page to try again.`} />;
    return this.props.children;
  }
}

/** The word that a list has more rows than the page read (LIST_MAX_PAGES pages of it, decision 0204). */
export function MoreThan({ count, what, order }: { count: number; what: string; order: string }) {
  const n = count.toLocaleString();
  return (
    <p className="muted" role="note">
      There are more than {n} {what}: the first {n} {order} are listed here.
    </p>
  );
}
