import { useEffect, useState } from 'react';

/** The app's own addresses (the gateway serves index.html for each; docs/decisions/0111). */
export type Route =
  | { name: 'home' }
  | { name: 'login'; next: string | null }
  | { name: 'files'; ws: string; prefix: string }
  | { name: 'trash'; ws: string }
  | { name: 'runs'; ws: string }
  | { name: 'members'; ws: string }
  | { name: 'manage' }
  | { name: 'account' }
  | { name: 'notFound' };

export function parseRoute(location: Pick<Location, 'pathname' | 'search'>): Route {
  const path = location.pathname;
  if (path === '/' || path === '') return { name: 'home' };
  if (path === '/login') return { name: 'login', next: new URLSearchParams(location.search).get('next') };
  if (path === '/manage') return { name: 'manage' };
  if (path === '/account') return { name: 'account' };
  const m = /^\/workspaces\/([^/]+)(?:\/(files|trash|runs|members)(\/.*)?)?$/.exec(path);
  if (m) {
    const ws = decodeURIComponent(m[1]!);
    if (m[2] === 'trash') return { name: 'trash', ws };
    if (m[2] === 'runs') return { name: 'runs', ws };
    if (m[2] === 'members') return { name: 'members', ws };
    const rest = (m[3] ?? '/').slice(1);
    const prefix = rest.split('/').filter(Boolean).map(decodeURIComponent).join('/');
    return { name: 'files', ws, prefix: prefix ? `${prefix}/` : '' };
  }
  return { name: 'notFound' };
}

export function filesPath(ws: string, prefix = ''): string {
  const p = prefix.split('/').filter(Boolean).map(encodeURIComponent).join('/');
  return `/workspaces/${encodeURIComponent(ws)}/files${p ? `/${p}/` : ''}`;
}

/** Client-side navigation: a history entry, then every `useLocation` re-renders. */
export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export function useLocation(): Location {
  const [, setTick] = useState(0);
  useEffect(() => {
    const on = () => setTick((t) => t + 1);
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return window.location;
}
