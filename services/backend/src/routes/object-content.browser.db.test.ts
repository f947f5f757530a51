// Issue 12, item 1, in a real browser: an editor uploads HTML, SVG and XML that would create a
// system administrator if they ran in the platform's origin; a system administrator who is a
// member of the workspace opens each file's URL with their session cookie. Nothing may run.
// Debian's Chromium through playwright-core; fails (never skips) without /usr/bin/chromium.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createAndLogin, startTestBackend, type TestBackend, type WorkspaceDto } from '../testing.js';

const CHROMIUM = '/usr/bin/chromium';

/** A script that, run with the administrator's cookie in our origin, creates a system administrator. */
const payload = (email: string) =>
  `fetch('/api/v1/platform/users', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' },` +
  ` body: JSON.stringify({ email: '${email}', name: 'pwned', password: 'password-123', platform_role_id: 'admin' }) })` +
  `.then(function (r) { document.title = 'ran ' + r.status; });`;

const FILES: { path: string; type: string; body: (email: string) => string }[] = [
  { path: 'evil/report.html', type: 'text/html', body: (e) => `<!doctype html><html><body><h1>report</h1><script>${payload(e)}</script></body></html>` },
  {
    path: 'evil/chart.svg',
    type: 'image/svg+xml',
    body: (e) =>
      `<svg xmlns="http://www.w3.org/2000/svg" onload="${payload(e).replace(/"/g, '&quot;')}"><script>${payload(e).replace(/</g, '&lt;')}</script></svg>`,
  },
  {
    path: 'evil/feed.xml',
    type: 'application/xml',
    body: (e) => `<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><script>${payload(e).replace(/</g, '&lt;')}</script></body></html>`,
  },
  // Lies about the type: with nosniff neither becomes HTML.
  { path: 'evil/notes.txt', type: 'text/plain', body: (e) => `<html><script>${payload(e)}</script></html>` },
  { path: 'evil/photo.png', type: 'image/png', body: (e) => `<html><script>${payload(e)}</script></html>` },
  // No declared type: derived from the extension.
  { path: 'evil/undeclared.html', type: 'application/octet-stream', body: (e) => `<script>${payload(e)}</script>` },
];

describe(`uploaded active content in Chromium (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let gateway: FastifyInstance;
  let base: string;
  let ws: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    b = await startTestBackend();
    const editor = await createAndLogin(b, 'mallory@example.com');
    // The administrator creates the workspace and is its admin member; the attacker edits in it.
    ws = (
      await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'shared' } })
    ).json<WorkspaceDto>().id;
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: editor.id, role: 'editor' },
    });
    for (const [i, f] of FILES.entries()) {
      const res = await b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${ws}/objects/${f.path}`,
        headers: { ...bearer(editor.token), 'content-type': f.type },
        payload: f.body(`pwned-${i}@example.com`),
      });
      expect(res.statusCode, f.path).toBe(201);
    }
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    gateway = await buildGatewayApp({ upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
    base = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    context = await browser.newContext({ acceptDownloads: true });
    page = await context.newPage();
    // The administrator logs in: the browser now holds the session cookie of our origin.
    const login = await context.request.post(`${base}/api/v1/auth/login`, { data: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(login.status()).toBe(200);
  });
  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
    await b?.close();
  });

  const userExists = async (email: string) =>
    (await b.t.database.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst()) !== undefined;

  it('control: the same script served without these headers in our origin does create an administrator', async () => {
    // Proves the attack works in this browser with this cookie, so the checks below mean something.
    await page.route(`${base}/control.html`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: `<script>${payload('control@example.com')}</script>` }),
    );
    await page.goto(`${base}/control.html`);
    await page.waitForFunction("document.title.startsWith('ran')");
    expect(await page.title()).toBe('ran 201');
    expect(await userExists('control@example.com')).toBe(true);
  });

  for (const [i, f] of FILES.entries()) {
    it(`opening ${f.path} (${f.type}) runs no script and creates no user`, async () => {
      const target = `${base}/api/v1/data-resources/${ws}/objects/${f.path}`;
      const download = page.waitForEvent('download', { timeout: 5_000 }).catch(() => undefined);
      const response = await page.goto(target).catch((err: Error) => {
        // An attachment: Chromium downloads instead of rendering (playwright reports it as an aborted navigation).
        expect(err.message).toMatch(/Download is starting|net::ERR_ABORTED/);
        return undefined;
      });
      if (response) {
        // Shown inline (safe types only): sandboxed and never sniffed.
        expect(response.headers()['content-security-policy']).toBe('sandbox');
        expect(['text/plain', 'image/png']).toContain(response.headers()['content-type']);
        await page.waitForLoadState('load');
      } else {
        const d = await download;
        expect(d, 'an attachment is downloaded').toBeDefined();
        expect(d!.suggestedFilename()).toBe(f.path.split('/').pop());
      }
      // Also embedded in a frame of our own origin's page (as a hostile page would try).
      await page.goto(`${base}/`);
      await page
        .evaluate(
          `new Promise((resolve) => {
            const frame = document.createElement('iframe');
            frame.src = ${JSON.stringify(target)};
            frame.addEventListener('load', resolve, { once: true });
            setTimeout(resolve, 2000);
            document.body.appendChild(frame);
          })`,
        )
        .catch(() => undefined);
      // Give any script that did start the time to reach the API (the control above needs a few ms).
      await page.waitForTimeout(500);
      expect(await userExists(`pwned-${i}@example.com`)).toBe(false);
      expect(await page.title()).not.toMatch(/^ran/);
    });
  }
});
