// Issue 15 items 3, 4, 6: each workspace's JupyterLab at /jupyter/{ws}/, through the real
// gateway, the real backend (session and membership on real PostgreSQL) and the real runtime
// (a sandboxed Jupyter server per workspace, started on demand, stopped when idle).
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { buildRuntimeApp, defaultLabHost, labHostBuilt, labProxy, type Kernels, type SandboxedServers } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { openSocket, upgrade as upgradeWithin } from '@codeagent/gateway/upstream-testing';
import { bearer, createAndLogin, startTestBackend, type TestBackend } from './testing.js';

const LAB_TOKEN = 'the-token-only-the-gateway-and-the-runtime-know';
const RUNTIME_INTERNAL_TOKEN = 'runtime-internal-token';

/** A handshake through the gateway; a lab's first start may take long. */
const upgrade = (base: string, path: string, headers: Record<string, string>) => upgradeWithin(base, path, headers, 60_000);

const PAGE = { accept: 'text/html,application/xhtml+xml' };

const within = <T>(ms: number, what: string, p: Promise<T>) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);

describe(`a workspace's JupyterLab through the gateway (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let kernels: Kernels;
  let runtime: FastifyInstance;
  let gateway: FastifyInstance;
  let base: string;
  let runtimeBase: string;
  let ws: string;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let outsider: { id: string; token: string };

  beforeAll(async () => {
    b = await startTestBackend();
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    kernels = await startTestKernels({ lab: defaultLabHost() });
    runtime = await buildRuntimeApp({
      kernels: kernels.kernels,
      internalServiceToken: RUNTIME_INTERNAL_TOKEN,
      lab: labProxy({ pool: kernels.pool, token: LAB_TOKEN, log: b.app.log }),
    });
    runtimeBase = await runtime.listen({ host: '127.0.0.1', port: 0 });
    gateway = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' },
      jupyter: { url: runtimeBase, token: LAB_TOKEN, perWorkspace: true, recheckMs: 200 },
    });
    base = await gateway.listen({ host: '127.0.0.1', port: 0 });
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'lab' } })).json<{
      id: string;
    }>().id;
    editor = await member('lab-editor@example.com', 'editor');
    viewer = await member('lab-viewer@example.com', 'viewer');
    outsider = await createAndLogin(b, 'lab-outsider@example.com');
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await runtime?.close();
    await kernels?.stop();
    await b?.close();
  });

  const lab = (path: string) => `${base}/jupyter/${ws}/${path}`;
  /** A new user, logged in, a member of the lab's workspace with `role`. */
  async function member(email: string, role: 'editor' | 'viewer'): Promise<{ id: string; token: string }> {
    const user = await createAndLogin(b, email);
    const res = await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: user.id, role },
    });
    expect(res.statusCode).toBe(201);
    return user;
  }
  /** A kernel the editor starts through the gateway; its id. */
  async function startKernel(): Promise<string> {
    const kernel = await fetch(lab('api/kernels'), {
      method: 'POST',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: '{"name":"python3"}',
    });
    expect(kernel.status).toBe(201);
    return ((await kernel.json()) as { id: string }).id;
  }

  it('the first visit gets the spawn progress page (a meta refresh, no script), then JupyterLab itself', async () => {
    const first = await fetch(lab('lab'), { headers: { ...bearer(editor.token), ...PAGE }, redirect: 'manual' });
    expect(first.status).toBe(200);
    const html = await first.text();
    expect(html).toContain('Starting JupyterLab for this workspace');
    expect(html).toContain('<meta http-equiv="refresh" content="1">');
    expect(html).not.toContain('<script');
    // An API call waits for the server the page is waiting for.
    const status = await fetch(lab('api/status'), { headers: bearer(editor.token) });
    expect(status.status).toBe(200);
    expect(await status.json()).toHaveProperty('started');
    const page = await fetch(lab('lab'), { headers: { ...bearer(editor.token), ...PAGE } });
    expect(page.status).toBe(200);
    const text = await page.text();
    if (labHostBuilt(defaultLabHost())) {
      expect(text).toContain('jupyter-config-data');
      expect(text).toContain(`/jupyter/${ws}/`);
      expect(text).toContain('jupyterlab-codeagent-bridge');
    }
    // The server's own token never reaches the browser.
    const inner = kernels.pool.running().find((s) => s.workspaceId === ws)!.socket!.token;
    expect(text).not.toContain(inner);
    expect(text).not.toContain(LAB_TOKEN);
  }, 120_000);

  it("the runtime serves the lab only to whoever holds the gateway's token", async () => {
    const direct = await fetch(`${runtimeBase}/jupyter/${ws}/api/contents`);
    expect(direct.status).toBe(403);
    expect(await upgrade(runtimeBase, `/jupyter/${ws}/api/kernels/x/channels`, {})).toBe(403);
    const wrong = await fetch(`${runtimeBase}/jupyter/${ws}/api/contents`, { headers: { authorization: 'token guess' } });
    expect(wrong.status).toBe(403);
  });

  it('a path with a dot segment is refused by the runtime itself: an ingress that resolves it (nginx checks $uri) checked another workspace', async () => {
    const other = '00000000-0000-4000-8000-000000000000';
    const token = { authorization: `token ${LAB_TOKEN}` };
    const { hostname, port } = new URL(runtimeBase);
    // As sent (fetch and new URL would resolve the dot segments first).
    const raw = (path: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: hostname, port, path, agent: false, headers: { ...token, ...headers } });
        req.on('upgrade', (res, socket) => {
          socket.destroy();
          resolve({ status: res.statusCode ?? 0, body: '' });
        });
        req.on('response', (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
    const websocket = { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    for (const path of [`/jupyter/${ws}/lab/api/workspaces/x/../../../../${other}/y`, `/jupyter/${ws}/%2e%2e/${other}/api/contents`]) {
      const res = await raw(path);
      expect(res.status, path).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ error: 'invalid_request', message: expect.stringMatching(/segment/) as unknown });
      expect((await raw(path, websocket)).status, path).toBe(400);
    }
    expect(kernels.pool.status(other).state).toBe('stopped');
  });

  it('a notebook saved with script in its outputs is never trusted when opened, trusting is refused, and an nbconvert export runs no script', async () => {
    const evil = {
      type: 'notebook',
      content: {
        nbformat: 4,
        nbformat_minor: 5,
        metadata: {},
        cells: [
          {
            cell_type: 'code',
            id: 'c1',
            execution_count: 1,
            source: 'display(HTML(...))',
            // As JupyterLab saves an output of the saver's own session: trusted.
            metadata: { trusted: true },
            outputs: [{ output_type: 'display_data', metadata: {}, data: { 'text/html': '<script>fetch("/api/v1/auth/me")</script>' } }],
          },
        ],
      },
    };
    const put = await fetch(lab('api/contents/evil.ipynb'), {
      method: 'PUT',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: JSON.stringify(evil),
    });
    expect(put.status).toBe(201);
    // Jupyter signed it on save, and the signature made it trusted for every member who opened it.
    const opened = (await (await fetch(lab('api/contents/evil.ipynb'), { headers: bearer(viewer.token) })).json()) as {
      content: { cells: { metadata: { trusted?: boolean } }[]; metadata: Record<string, unknown> };
    };
    expect(opened.content.cells[0]!.metadata.trusted).toBe(false);
    const trust = await fetch(lab('api/contents/evil.ipynb/trust'), { method: 'POST', headers: bearer(editor.token) });
    expect(trust.status).toBe(403);
    const export_ = await fetch(lab('nbconvert/html/evil.ipynb'), { headers: bearer(viewer.token) });
    expect(export_.status).toBe(200);
    expect(await export_.text()).toContain('fetch(');
    // `sandbox` as a policy of its own (decision 0245), beside the server's.
    expect(export_.headers.get('content-security-policy')).toMatch(/(^|,)\s*sandbox\s*$/);
    // JupyterLab's own page keeps what it needs: scripts, from the installed host's paths only (decision 0245).
    const page = await fetch(lab('lab'), { headers: { ...bearer(viewer.token), ...PAGE } });
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).not.toMatch(/sandbox/);
    expect(csp).toMatch(
      new RegExp(
        `^script-src 'unsafe-eval' http://127\\.0\\.0\\.1:\\d+/jupyter/${ws}/static/codeagent_lab/ http://127\\.0\\.0\\.1:\\d+/jupyter/${ws}/lab/extensions/;`,
      ),
    );
  }, 60_000);

  it('a non-member and an unknown workspace get 404 on HTTP and websockets; a path without a workspace too', async () => {
    for (const target of [ws, '00000000-0000-4000-8000-000000000000']) {
      const res = await fetch(`${base}/jupyter/${target}/api/contents`, { headers: bearer(outsider.token) });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: 'not_found' });
      expect(await upgrade(base, `/jupyter/${target}/api/kernels/x/channels`, bearer(outsider.token))).toBe(404);
    }
    const page = await fetch(lab('lab'), { headers: { ...bearer(outsider.token), ...PAGE }, redirect: 'manual' });
    expect(page.status).toBe(404);
    expect((await fetch(`${base}/jupyter/lab`, { headers: bearer(editor.token) })).status).toBe(404);
    // nginx's auth_request passes on only 401 and 403: asked with `x-codeagent-require: member`,
    // the backend marks a non-member's 403 as a 404 to give.
    const forNginx = await b.app.inject({
      method: 'GET',
      url: '/api/v1/auth/session',
      headers: { ...bearer(outsider.token), 'x-codeagent-workspace': ws, 'x-codeagent-access': 'read', 'x-codeagent-require': 'member' },
    });
    expect(forNginx.statusCode).toBe(403);
    expect(forNginx.headers['x-codeagent-refusal']).toBe('not_found');
    const member = await b.app.inject({
      method: 'GET',
      url: '/api/v1/auth/session',
      headers: { ...bearer(viewer.token), 'x-codeagent-workspace': ws, 'x-codeagent-access': 'read' },
    });
    expect(member.json()).toMatchObject({ user_id: viewer.id, workspace_role: 'viewer' });
  });

  it('an editor saves notebooks, starts kernels and opens their websockets', async () => {
    const nb = { type: 'notebook', content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 } };
    const put = await fetch(lab('api/contents/editor.ipynb'), {
      method: 'PUT',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: JSON.stringify(nb),
    });
    expect(put.status).toBe(201);
    const id = await startKernel();
    expect(await upgrade(base, `/jupyter/${ws}/api/kernels/${id}/channels`, bearer(editor.token))).toBe(101);
    expect((await fetch(lab(`api/kernels/${id}`), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(204);
  }, 60_000);

  it('a viewer reads notebooks but cannot save, start kernels, open websockets or terminals (403)', async () => {
    const read = await fetch(lab('api/contents/editor.ipynb'), { headers: bearer(viewer.token) });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ name: 'editor.ipynb', type: 'notebook' });
    const nb = { type: 'notebook', content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 } };
    const refusals = [
      fetch(lab('api/contents/editor.ipynb'), {
        method: 'PUT',
        headers: { ...bearer(viewer.token), 'content-type': 'application/json' },
        body: JSON.stringify(nb),
      }),
      fetch(lab('api/contents/editor.ipynb'), {
        method: 'PATCH',
        headers: { ...bearer(viewer.token), 'content-type': 'application/json' },
        body: '{"path":"renamed.ipynb"}',
      }),
      fetch(lab('api/contents/editor.ipynb'), { method: 'DELETE', headers: bearer(viewer.token) }),
      fetch(lab('api/kernels'), { method: 'POST', headers: { ...bearer(viewer.token), 'content-type': 'application/json' }, body: '{"name":"python3"}' }),
      fetch(lab('api/terminals'), { method: 'POST', headers: bearer(viewer.token) }),
    ];
    for (const res of await Promise.all(refusals)) {
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'forbidden' });
    }
    expect(await upgrade(base, `/jupyter/${ws}/api/kernels/x/channels`, bearer(viewer.token))).toBe(403);
    expect(await upgrade(base, `/jupyter/${ws}/terminals/websocket/1`, bearer(viewer.token))).toBe(403);
    // The notebook is untouched.
    expect((await fetch(lab('api/contents/editor.ipynb'), { headers: bearer(editor.token) })).status).toBe(200);
  });

  it('after logout the same session loses access at once: API calls 401, pages go to the login page and back', async () => {
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'lab-editor@example.com', password: 'password-123' }),
    });
    const cookie = /codeagent_session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    expect((await fetch(lab('api/contents'), { headers: { cookie } })).status).toBe(200);
    const out = await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { cookie, origin: base } });
    expect(out.status).toBe(204);
    const api = await fetch(lab('api/contents'), { headers: { cookie } });
    expect(api.status).toBe(401);
    expect(await upgrade(base, `/jupyter/${ws}/api/kernels/x/channels`, { cookie, origin: base })).toBe(401);
    const page = await fetch(lab('lab?reset'), { headers: { cookie, ...PAGE }, redirect: 'manual' });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toBe(`/login?next=${encodeURIComponent(`/jupyter/${ws}/lab?reset`)}`);
    // No session at all: the same redirect.
    const anonymous = await fetch(lab('lab'), { headers: PAGE, redirect: 'manual' });
    expect(anonymous.status).toBe(302);
    expect(anonymous.headers.get('location')).toMatch(/^\/login\?next=/);
  });

  it('open kernel websockets end once their access is gone: a removed member, a demoted one, a logout; a member who keeps access keeps hers', async () => {
    const removed = await member('lab-removed@example.com', 'editor');
    const demoted = await member('lab-demoted@example.com', 'editor');
    const id = await startKernel();
    const channels = `/jupyter/${ws}/api/kernels/${id}/channels`;
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'lab-editor@example.com', password: 'password-123' }),
    });
    const cookie = /codeagent_session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    const [kept, ofRemoved, ofDemoted, ofLoggedOut] = await Promise.all([
      openSocket(base, channels, bearer(editor.token)),
      openSocket(base, channels, bearer(removed.token)),
      openSocket(base, channels, bearer(demoted.token)),
      openSocket(base, channels, { cookie, origin: base }),
    ]);
    try {
      // Before: websockets were checked only at their upgrade, and each of these stayed open.
      expect(
        (await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${ws}/members/${removed.id}`, headers: bearer(b.adminToken) })).statusCode,
      ).toBe(204);
      await within(10_000, 'the removed member’s websocket closes', ofRemoved.closed);
      const demote = await b.app.inject({
        method: 'PATCH',
        url: `/api/v1/platform/workspaces/${ws}/members/${demoted.id}`,
        headers: bearer(b.adminToken),
        payload: { role: 'viewer' },
      });
      expect(demote.statusCode).toBe(200);
      await within(10_000, 'the demoted member’s websocket closes', ofDemoted.closed);
      expect((await fetch(`${base}/api/v1/auth/logout`, { method: 'POST', headers: { cookie, origin: base } })).status).toBe(204);
      await within(10_000, 'the logged-out session’s websocket closes', ofLoggedOut.closed);
      // Many sweeps later, the editor's own token still holds hers.
      await new Promise((r) => setTimeout(r, 1000));
      expect(kept.isOpen()).toBe(true);
    } finally {
      for (const s of [kept, ofRemoved, ofDemoted, ofLoggedOut]) s.end();
      await fetch(lab(`api/kernels/${id}`), { method: 'DELETE', headers: bearer(editor.token) });
    }
  }, 60_000);

  it('an idle server stops (once its kernels are gone) and the next visit starts it again', async () => {
    const pool = kernels.pool as SandboxedServers;
    expect(pool.status(ws)).toEqual({ state: 'running' });
    // A server with a running kernel is not idle.
    const kernel = await fetch(lab('api/kernels'), {
      method: 'POST',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: '{"name":"python3"}',
    });
    const { id } = (await kernel.json()) as { id: string };
    await pool.cullIdle(Date.now() + 24 * 3600_000);
    expect(pool.status(ws)).toEqual({ state: 'running' });
    expect((await fetch(lab(`api/kernels/${id}`), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(204);
    await pool.cullIdle(Date.now() + 24 * 3600_000);
    expect(pool.status(ws)).toEqual({ state: 'stopped' });
    const page = await fetch(lab('lab'), { headers: { ...bearer(editor.token), ...PAGE } });
    expect(await page.text()).toContain('Starting JupyterLab for this workspace');
    const again = await fetch(lab('api/contents'), { headers: bearer(editor.token) });
    expect(again.status).toBe(200);
    expect(pool.status(ws)).toEqual({ state: 'running' });
  }, 120_000);
});
