import { pageCsp, styleHash } from './security-headers.js';

const style = 'body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .25rem}';

/** The platform's start page until the web UI lands: where things are. No script. */
export const landingPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>codeagent platform</title>
<style>${style}</style>
</head>
<body>
<h1>codeagent platform</h1>
<p>The platform is running.</p>
<ul>
<li>API health: <a href="/api/v1/health"><code>/api/v1/health</code></a></li>
<li>API description (OpenAPI 3): <a href="/api/v1/openapi.json"><code>/api/v1/openapi.json</code></a></li>
<li>Log in: <code>POST /api/v1/auth/login</code> with <code>{"email","password"}</code></li>
</ul>
</body>
</html>
`;

/** Its CSP: the inline style is allowed by its hash, nothing else inline. */
export const landingCsp = pageCsp([styleHash(style)]);

const loginStyle = `${style}form{display:grid;gap:.5rem;max-width:20rem}input,button{font:inherit;padding:.4rem}#codeagent-login-error{color:#a00}`;

/**
 * The minimal login page (issue 15 item 6) until the web UI has its own: a form whose script
 * (`/login.js`, no inline script: the CSP forbids it) logs in through the API, which sets the
 * session cookie, then returns to `?next=` (a path of this site only).
 */
export const loginPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Log in · codeagent platform</title>
<style>${loginStyle}</style>
<script src="/login.js" defer></script>
</head>
<body>
<h1>Log in</h1>
<form id="codeagent-login" method="post" action="/login">
<label>Email <input name="email" type="email" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Log in</button>
<p id="codeagent-login-error" role="alert"></p>
</form>
</body>
</html>
`;

/**
 * Where to go after the login: `next` when it is a path of this site, else the start page. No
 * control character or backslash anywhere: browsers drop tabs and newlines and read `\` as `/`,
 * so `/<TAB>/evil.example` would lead to another site. (Self-contained: it is also the login
 * script's, through `toString`, which nginx serves from its configuration: no `$` in it.)
 */
export function safeNext(next: string | null | undefined): string {
  // eslint-disable-next-line no-control-regex
  return typeof next === 'string' && /^\/(?![/\\])/.test(next) && !/[\u0000-\u001f\u007f\\]/.test(next) ? next : '/';
}

/** The login page's script (served as a file: the page CSP allows scripts from this origin only). */
export const loginScript = `'use strict';
(() => {
  const safeNext = ${safeNext.toString()};
  const form = document.getElementById('codeagent-login');
  const error = document.getElementById('codeagent-login-error');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    const data = new FormData(form);
    try {
      const res = await fetch('/api/v1/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify({ email: data.get('email'), password: data.get('password') }),
      });
      if (res.ok) {
        location.assign(safeNext(new URLSearchParams(location.search).get('next')));
        return;
      }
      const body = await res.json().catch(() => ({}));
      error.textContent = res.status === 401 ? 'Wrong email or password.' : (body.message || 'Login failed (' + res.status + ').');
    } catch (err) {
      error.textContent = 'The platform did not answer: ' + err;
    }
  });
})();
`;

export const loginCsp = pageCsp([styleHash(loginStyle)]);

/** The pages the ingress answers itself (route kind `page`), by name. */
export const PAGES = {
  landing: { body: landingPage, contentType: 'text/html; charset=utf-8', csp: landingCsp },
  login: { body: loginPage, contentType: 'text/html; charset=utf-8', csp: loginCsp },
  loginScript: { body: loginScript, contentType: 'text/javascript; charset=utf-8', csp: landingCsp },
} as const;
export type PageName = keyof typeof PAGES;
