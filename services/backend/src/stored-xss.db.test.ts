// Stored XSS, proven in Chromium (issue 12 item 1, docs/contract/spec.md §4.5): an editor uploads HTML and SVG
// files whose script creates a system administrator through the API; a system administrator,
// member of the workspace and logged in with the session cookie, opens each file's URL through
// the gateway. No script may run: no request to create a user leaves the page, and no user
// exists afterwards. A control shows that the same script, run in the platform's origin with
// that cookie, would have succeeded. Needs Debian's chromium; fails, never skips, without it.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Request } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createAndLogin, startTestBackend, type TestBackend } from './testing.js';

const CHROMIUM = '/usr/bin/chromium';

/** The attack: create a system administrator with the viewer's cookie (same origin, so the cross-site check passes). */
function attack(email: string): string {
  const body = JSON.stringify({ email, name: 'pwned', password: 'pwned-password-1', platform_role_id: 'admin' });
  return `fetch('/api/v1/platform/users',{method:'POST',credentials:'include',headers:{'content-type':'application/json'},body:${JSON.stringify(body)}})`;
}

const FILES = [
  {
    path: 'report.html',
    type: 'text/html',
    email: 'xss-html@example.com',
    content: (js: string) =>
      `<!doctype html><html><body><h1>Quarterly report</h1><script>${js}</script><img src="x" onerror="${js.replace(/"/g, '&quot;')}"></body></html>`,
  },
  {
    path: 'image.svg',
    type: 'image/svg+xml',
    email: 'xss-svg@example.com',
    content: (js: string) =>
      `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="${js.replace(/"/g, '&quot;')}"><script>${js}</script></svg>`,
  },
  {
    // The same HTML declared as something harmless: only nosniff stops a browser from guessing.
    path: 'notes.txt',
    type: 'text/plain',
    email: 'xss-sniff@example.com',
    content: (js: string) => `<html><body><script>${js}</script></body></html>`,
  },
];

describe(`uploaded HTML and SVG run no script in the platform's origin (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let gateway: FastifyInstance;
  let base: string;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let ws: string;
  const attempts: Request[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error('Debian chromium is missing: run .ci/system-deps (apt-get install chromium)');
    b = await startTestBackend();
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    gateway = await buildGatewayApp({ upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
    base = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');

    // The administrator creates the workspace (and so is its admin member); an editor joins.
    const created = await fetch(`${base}/api/v1/platform/workspaces`, {
      method: 'POST',
      headers: { ...bearer(b.adminToken), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'reports' }),
    });
    ws = ((await created.json()) as { id: string }).id;
    const editor = await createAndLogin(b, 'editor@example.com');
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: editor.id, role: 'editor' },
    });
    for (const f of FILES) {
      const res = await fetch(`${base}/api/v1/data-resources/${ws}/objects/${f.path}`, {
        method: 'PUT',
        headers: { ...bearer(editor.token), 'content-type': f.type },
        body: f.content(attack(f.email)),
      });
      expect(res.status, f.path).toBe(201);
    }

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    context = await browser.newContext();
    context.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/v1/platform/users') attempts.push(r);
    });
    // The administrator logs in through the gateway: the session cookie is now in the browser.
    const login = await context.request.post(`${base}/api/v1/auth/login`, { data: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(login.status()).toBe(200);
    expect((await context.cookies(base)).map((c) => c.name)).toContain('codeagent_session');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
    await b?.close();
  });

  const userEmails = async () => {
    const res = await fetch(`${base}/api/v1/platform/users?limit=1000`, { headers: bearer(b.adminToken) });
    return ((await res.json()) as { items: { email: string }[] }).items.map((u) => u.email);
  };

  for (const f of FILES) {
    it(`opening ${f.path} (${f.type}) runs none of its script`, async () => {
      attempts.length = 0;
      const page = await context.newPage();
      const url = `${base}/api/v1/data-resources/${ws}/objects/${f.path}`;
      const seen = await page.request.get(url);
      expect(seen.headers()['x-content-type-options']).toBe('nosniff');
      // Served as an attachment, the browser downloads it instead of rendering it: also safe.
      await page.goto(url, { waitUntil: 'load' }).catch((err: Error) => {
        if (!/Download is starting|net::ERR_ABORTED/.test(err.message)) throw err;
      });
      // A script that ran at parse time (or from onload/onerror, before `load`) has sent its request by now.
      await Promise.all(attempts.map((r) => r.response()));
      await page.close();
      expect(
        attempts.map((r) => r.frame().url()),
        'requests the file sent',
      ).toEqual([]);
      expect(await userEmails()).not.toContain(f.email);
    });
  }

  it('control: the same script in the platform origin with this cookie does create the user (so the test can see an attack)', async () => {
    attempts.length = 0;
    const page = await context.newPage();
    await page.goto(`${base}/`);
    const status = await page.evaluate(`${attack('control@example.com')}.then((r) => r.status)`);
    await page.close();
    expect(status).toBe(201);
    expect(await userEmails()).toContain('control@example.com');
    expect(attempts).toHaveLength(1);
  });
});
