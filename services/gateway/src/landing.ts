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
