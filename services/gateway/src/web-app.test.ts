// The web app at `/` through both ingresses (the gateway and nginx rendered from the same
// tables): index.html not cached with the page CSP, hashed assets immutable, the SPA fallback
// on the app's paths only (never /api, /internal, /jupyter, /mcp, /admin), missing assets 404.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGRESSES, startIngress, type Ingress } from './ingress-testing.js';
import { ASSET_CACHE_CONTROL } from './web-app.js';

const INDEX = '<!doctype html><html><head><script type="module" src="/assets/index-AbC123.js"></script></head><body><div id="root"></div></body></html>';
const SCRIPT = 'console.log("app");';

/** A built app as Vite leaves it, readable by nginx's workers. */
function fakeBuild(): string {
  const root = mkdtempSync(join(tmpdir(), 'codeagent-web-'));
  mkdirSync(join(root, 'assets'));
  writeFileSync(join(root, 'index.html'), INDEX);
  writeFileSync(join(root, 'assets', 'index-AbC123.js'), SCRIPT);
  writeFileSync(join(root, 'assets', 'index-XyZ789.css'), 'body{color:red}');
  for (const p of [root, join(root, 'assets')]) chmodSync(p, 0o755);
  return root;
}

describe.each(INGRESSES)('the web app through %s', (kind) => {
  let upstream: Server;
  let ingress: Ingress;
  let root: string;
  let emptyIngress: Ingress;
  let emptyRoot: string;

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ upstream: true, url: req.url }));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    root = fakeBuild();
    emptyRoot = mkdtempSync(join(tmpdir(), 'codeagent-web-empty-'));
    chmodSync(emptyRoot, 0o755);
    const upstreams = { backend: url, clusterAdmin: url, bridge: url };
    ingress = await startIngress(kind, { upstreams, webRoot: root });
    emptyIngress = await startIngress(kind, { upstreams, webRoot: emptyRoot });
  });

  afterAll(async () => {
    await ingress?.close();
    await emptyIngress?.close();
    await new Promise((r) => upstream?.close(r));
    rmSync(root, { recursive: true, force: true });
    rmSync(emptyRoot, { recursive: true, force: true });
  });

  it('serves index.html at / and at the app paths: no-cache, a CSP without inline script, framed by the platform only, nosniff', async () => {
    for (const path of [
      '/',
      '/login',
      '/login?next=%2Fworkspaces',
      '/workspaces',
      '/workspaces/abc/files/a/b/',
      '/workspaces/abc/trash',
      '/manage',
      '/account',
    ]) {
      const res = await fetch(`${ingress.base}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toBe(INDEX);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      expect(res.headers.get('cache-control'), path).toBe('no-cache');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toMatch(/(^|; )script-src 'self'(;|$)/);
      expect(csp, path).toMatch(/(^|; )frame-ancestors 'self'(;|$)/);
      expect(csp, path).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(res.headers.get('x-frame-options'), path).toBe('SAMEORIGIN');
    }
  });

  it('serves hashed assets for a year, immutable, with their type', async () => {
    const js = await fetch(`${ingress.base}/assets/index-AbC123.js`);
    expect(js.status).toBe(200);
    expect(await js.text()).toBe(SCRIPT);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toBe(ASSET_CACHE_CONTROL);
    expect(js.headers.get('x-content-type-options')).toBe('nosniff');
    const css = await fetch(`${ingress.base}/assets/index-XyZ789.css`);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(css.headers.get('cache-control')).toBe(ASSET_CACHE_CONTROL);
  });

  it('answers a missing asset with 404 JSON, never index.html', async () => {
    for (const path of ['/assets/index-gone.js', '/assets/a/b.js', '/assets/', '/assets/..%2Findex.html']) {
      const res = await fetch(`${ingress.base}${path}`);
      expect([400, 404], path).toContain(res.status);
      expect(await res.text(), path).not.toContain('<div id="root">');
    }
  });

  it('refuses a dot segment in any spelling (400) instead of resolving it to a script of the platform: a CSP compares the path the client wrote (decision 0245)', async () => {
    // A JupyterLab page allows scripts from /jupyter/<ws>/lab/extensions/ only; resolved, this is
    // the app's script. (`%2e%2e` between plain slashes a browser resolves itself, before the CSP.)
    const ws = '33333333-3333-4333-8333-333333333333';
    for (const path of [
      `/jupyter/${ws}/lab/extensions%2F..%2F..%2F..%2F..%2Fassets/index-AbC123.js`,
      `/jupyter/${ws}/lab/extensions%5C..%5C..%5C..%5C..%5Cassets/index-AbC123.js`,
      '/assets/.%2findex-AbC123.js',
    ]) {
      const res = await fetch(`${ingress.base}${path}`);
      expect(res.status, path).toBe(400);
      expect(await res.text(), path).not.toBe(SCRIPT);
    }
    // Names with dots are no dot segments.
    expect((await fetch(`${ingress.base}/assets/index-AbC123.js?v=..`)).status).toBe(200);
  });

  it('never falls back to the app for the API, /internal, /jupyter, /mcp, /admin or unknown paths', async () => {
    const api = await fetch(`${ingress.base}/api/v1/anything`);
    expect(await api.json()).toMatchObject({ upstream: true });
    for (const path of ['/internal/v1/objects', '/jupyter/x/lab', '/nope', '/loginx', '/workspacesx', '/index.html']) {
      const res = await fetch(`${ingress.base}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.text(), path).not.toContain('<div id="root">');
    }
    for (const path of ['/mcp', '/admin/clusters']) expect(await (await fetch(`${ingress.base}${path}`)).json(), path).toMatchObject({ upstream: true });
  });

  it('refuses writes to the app paths with 405', async () => {
    for (const path of ['/', '/login', '/assets/index-AbC123.js']) {
      const res = await fetch(`${ingress.base}${path}`, { method: 'POST', body: '{}' });
      expect(res.status, path).toBe(405);
    }
  });

  it('without a build, / says how to build it', async () => {
    const res = await fetch(`${emptyIngress.base}/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('npm run build');
  });
});
