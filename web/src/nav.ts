/**
 * The one rule for `?next=` after login: only a path of this app (same origin, relative, starting
 * with a single `/`) is followed; anything else (absolute URLs, `//host`, `/\host`, `javascript:`,
 * control characters, encoded tricks) goes home. An open redirect here would let a link to our
 * login page send a freshly logged-in user to a look-alike site.
 */
export function safeNext(next: string | null | undefined, origin = 'http://app.invalid'): string {
  if (typeof next !== 'string' || next === '') return '/';
  if (!next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return '/';
  let url: URL;
  try {
    url = new URL(next, origin);
  } catch {
    return '/';
  }
  if (url.origin !== new URL(origin).origin) return '/';
  // The API, JupyterLab's own pages and the like are not the app's; /jupyter/ is allowed (the
  // gateway sends a visitor without a session from there to the login page and back).
  if (/^\/(api|internal|mcp|admin|codeagent-bridge)(\/|$)/.test(url.pathname)) return '/';
  return url.pathname + url.search + url.hash;
}

/** The login page's address that comes back to `path` afterwards. */
export function loginPath(path: string): string {
  const next = safeNext(path);
  return next === '/' ? '/login' : `/login?next=${encodeURIComponent(next)}`;
}

/** One segment-wise encoding of an object path for URLs (slashes kept as separators). */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/**
 * The workspace's JupyterLab (`/jupyter/{ws}/`, a full page load: not part of this app), or a file
 * opened in it: JupyterLab's root is the workspace's files, so a file's tree path is its object path.
 */
export function jupyterPath(ws: string, path?: string): string {
  const root = `/jupyter/${encodeURIComponent(ws)}/`;
  return path ? `${root}lab/tree/${encodePath(path)}` : root;
}
