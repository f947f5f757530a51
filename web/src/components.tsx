import type { AnchorHTMLAttributes, ReactNode } from 'react';
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
