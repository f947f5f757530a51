import { createServer, request, type ClientRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGRESSES, startIngress, type Ingress } from './ingress-testing.js';
import { acceptWebsocket, listenOn, stopServer, upgrade } from './upstream-testing.js';

const JUPYTER_TOKEN = 'the-jupyter-servers-own-token';

interface Seen {
  url: string;
  method: string;
  headers: IncomingHttpHeaders;
}

/** Stands in for the Jupyter server (and, on another port, the bridge): records every request and websocket upgrade. */
const upgradedSockets = new Set<Duplex>();

function recordingServer(seen: Seen[]): Server {
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ url: req.url }));
    });
  });
  server.on('upgrade', (req, socket) => {
    seen.push({ url: req.url ?? '', method: 'UPGRADE', headers: req.headers });
    acceptWebsocket(req, socket, upgradedSockets);
  });
  return server;
}

/**
 * Stands in for the backend's `GET /api/v1/auth/session`: answers from a table of live tokens,
 * records what it was asked. Removing a token is what a logout or a revocation does. Like the
 * real route it names the user in `x-codeagent-user-id` and answers 403 to a non-administrator
 * when the ingress sends `x-codeagent-require: system_admin` (nginx's auth_request does).
 */
function fakeBackend(sessions: Map<string, { user_id: string; is_system_admin: boolean }>, asked: Seen[]): Server {
  return createServer((req, res) => {
    asked.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const session = sessions.get(token);
    if (req.url === '/api/v1/auth/session' && session) {
      if (req.headers['x-codeagent-require'] === 'system_admin' && !session.is_system_admin) {
        res.writeHead(403, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: 'forbidden', message: 'system administrators only' }));
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-codeagent-user-id': session.user_id });
      return res.end(JSON.stringify(session));
    }
    if (req.url === '/api/v1/auth/session' && token === 'make-the-backend-fail') {
      res.writeHead(500, { 'content-type': 'application/json' });
      return res.end('{"error":"internal"}');
    }
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'unauthorized', message: 'token is no longer valid; log in again' }));
  });
}

// The same cases through the gateway and through nginx (auth_request) with the rendered configuration (issue 18).
describe.each(INGRESSES)('/jupyter through %s (docs/contract/spec.md §10): the session is checked with the backend on every request', (kind) => {
  const jupyterSeen: Seen[] = [];
  const bridgeSeen: Seen[] = [];
  const backendAsked: Seen[] = [];
  const sessions = new Map<string, { user_id: string; is_system_admin: boolean }>();
  const ADMIN = 'admin-token';
  const USER = 'plain-user-token';
  let jupyter: Server;
  let bridge: Server;
  let backend: Server;
  let gateway: Ingress;
  let orphan: Ingress;
  let bare: Ingress;
  let base: string;
  let orphanBase: string;

  beforeAll(async () => {
    sessions.set(ADMIN, { user_id: 'admin-1', is_system_admin: true });
    sessions.set(USER, { user_id: 'user-1', is_system_admin: false });
    jupyter = recordingServer(jupyterSeen);
    bridge = recordingServer(bridgeSeen);
    backend = fakeBackend(sessions, backendAsked);
    const [jupyterUrl, bridgeUrl, backendUrl] = await Promise.all([listenOn(jupyter), listenOn(bridge), listenOn(backend)]);
    gateway = await startIngress(kind, {
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl },
      jupyter: { url: jupyterUrl, token: JUPYTER_TOKEN },
    });
    base = gateway.base;
    // The same, with the backend down: nobody gets in.
    orphan = await startIngress(kind, {
      upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl },
      jupyter: { url: jupyterUrl, token: JUPYTER_TOKEN },
    });
    orphanBase = orphan.base;
    bare = await startIngress(kind, { upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl } });
  });
  afterAll(async () => {
    for (const s of upgradedSockets) s.destroy();
    await gateway.close();
    await orphan.close();
    await bare.close();
    for (const s of [jupyter, bridge, backend]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('answers 401 JSON without a platform login, and never reaches Jupyter', async () => {
    const before = jupyterSeen.length;
    const asked = backendAsked.length;
    const res = await fetch(`${base}/jupyter/lab`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'unauthorized' });
    expect(backendAsked.length).toBe(asked); // nothing to ask about
    const forged = await fetch(`${base}/jupyter/api/kernels`, { headers: { cookie: 'codeagent_session=not-a-jwt' } });
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ error: 'unauthorized', message: expect.stringMatching(/log in again/) as unknown });
    expect((await fetch(`${base}/jupyter/api/kernels`, { headers: { authorization: 'Bearer some-other-token' } })).status).toBe(401);
    expect(jupyterSeen.length).toBe(before);
  });

  it('asks the backend with the token as Bearer and nothing else of the client', async () => {
    await fetch(`${base}/jupyter/api/status`, { headers: { cookie: `_xsrf=abc; codeagent_session=${ADMIN}; other=1` } });
    const asked = backendAsked.at(-1)!;
    expect(asked.url).toBe('/api/v1/auth/session');
    expect(asked.method).toBe('GET');
    expect(asked.headers.authorization).toBe(`Bearer ${ADMIN}`);
    expect(asked.headers.cookie).toBeUndefined();
    expect(asked.headers['x-request-id']).toBeTruthy();
  });

  it('proxies a system administrator (cookie) with the Jupyter token injected and the platform cookie removed', async () => {
    const res = await fetch(`${base}/jupyter/api/contents?type=notebook`, { headers: { cookie: `codeagent_session=${ADMIN}; _xsrf=abc` } });
    expect(res.status).toBe(200);
    const seen = jupyterSeen.at(-1)!;
    expect(seen.url).toBe('/jupyter/api/contents?type=notebook');
    expect(seen.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
    expect(seen.headers.cookie).toBe('_xsrf=abc');
    expect(JSON.stringify(seen.headers)).not.toContain(ADMIN);
  });

  it('accepts the Bearer token too, replacing it with the Jupyter token', async () => {
    const res = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } });
    expect(res.status).toBe(200);
    expect(jupyterSeen.at(-1)!.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
  });

  it('refuses a logged-in user who is not a system administrator: 403, Jupyter never asked', async () => {
    const before = jupyterSeen.length;
    for (const headers of [{ cookie: `codeagent_session=${USER}` }, { authorization: `Bearer ${USER}` }] as Record<string, string>[]) {
      const res = await fetch(`${base}/jupyter/lab`, { headers });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'forbidden', message: expect.stringMatching(/system administrators only/) as unknown });
    }
    expect(jupyterSeen.length).toBe(before);
  });

  it('stops a session at the next request once the backend no longer accepts it (logout, revocation)', async () => {
    const token = 'short-lived-admin-token';
    sessions.set(token, { user_id: 'admin-2', is_system_admin: true });
    expect((await fetch(`${base}/jupyter/api/status`, { headers: { cookie: `codeagent_session=${token}` } })).status).toBe(200);
    sessions.delete(token);
    expect((await fetch(`${base}/jupyter/api/status`, { headers: { cookie: `codeagent_session=${token}` } })).status).toBe(401);
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels', { cookie: `codeagent_session=${token}`, origin: `http://${new URL(base).host}` })).toBe(401);
  });

  it('fails closed when the session cannot be checked: 502, Jupyter never asked', async () => {
    const before = jupyterSeen.length;
    const down = await fetch(`${orphanBase}/jupyter/lab`, { headers: { cookie: `codeagent_session=${ADMIN}` } });
    expect(down.status).toBe(502);
    expect(await down.json()).toMatchObject({ error: 'bad_gateway' });
    const broken = await fetch(`${base}/jupyter/lab`, { headers: { authorization: 'Bearer make-the-backend-fail' } });
    expect(broken.status).toBe(502);
    expect(await upgrade(orphanBase, '/jupyter/api/kernels/k1/channels', { authorization: `Bearer ${ADMIN}` })).toBe(502);
    expect(jupyterSeen.length).toBe(before);
  });

  it('refuses a cross-site write that relies on the cookie, allows a same-origin one (Origin dropped upstream)', async () => {
    const cookie = `codeagent_session=${ADMIN}`;
    const asked = backendAsked.length;
    const cross = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { cookie, origin: 'http://evil.example' } });
    expect(cross.status).toBe(403);
    expect(backendAsked.length).toBe(asked);
    const host = new URL(base).host;
    const same = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { cookie, origin: `http://${host}` } });
    expect(same.status).toBe(200);
    expect(jupyterSeen.at(-1)!.headers.origin).toBeUndefined();
  });

  it('checks websocket upgrades (kernels, terminals) the same way: 401, 403 cross-site, 403 non-admin, 101 for an administrator', async () => {
    const host = new URL(base).host;
    const asked = backendAsked.length;
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels?session_id=s', {})).toBe(401);
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels', { cookie: `codeagent_session=${ADMIN}`, origin: 'http://evil.example' })).toBe(403);
    expect(await upgrade(base, '/jupyter/terminals/websocket/1', { cookie: `codeagent_session=${USER}`, origin: `http://${host}` })).toBe(403);
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels', { authorization: `Bearer ${USER}` })).toBe(403);
    expect(backendAsked.length).toBe(asked + 2);
    expect(jupyterSeen.some((s) => s.method === 'UPGRADE')).toBe(false);
    const before = jupyterSeen.length;
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels?session_id=s', { cookie: `codeagent_session=${ADMIN}`, origin: `http://${host}` })).toBe(101);
    expect(backendAsked.at(-1)!.headers.authorization).toBe(`Bearer ${ADMIN}`);
    // The gateway answers the browser first, then opens the upstream side.
    const upgraded = () => jupyterSeen.slice(before).find((s) => s.method === 'UPGRADE');
    for (let i = 0; i < 100 && !upgraded(); i++) await new Promise((r) => setTimeout(r, 20));
    const seen = upgraded()!;
    expect(seen.url).toBe('/jupyter/api/kernels/k1/channels?session_id=s');
    expect(seen.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
    expect(seen.headers.cookie ?? '').not.toContain('codeagent_session');
  });

  it('routes /jupyter/codeagent-bridge/* to the bridge as /codeagent-bridge/*, passing the user cookie on', async () => {
    const res = await fetch(`${base}/jupyter/codeagent-bridge/providers?x=1`, { headers: { cookie: `codeagent_session=${USER}` } });
    expect(res.status).toBe(200);
    const seen = bridgeSeen.at(-1)!;
    expect(seen.url).toBe('/codeagent-bridge/providers?x=1');
    expect(seen.headers.cookie).toBe(`codeagent_session=${USER}`);
    expect(seen.headers.authorization).toBeUndefined();
  });

  it("leaves JupyterLab's own CSP alone (its pages need their inline configuration), still adds nosniff", async () => {
    const res = await fetch(`${base}/jupyter/lab`, { headers: { cookie: `codeagent_session=${ADMIN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBeNull(); // the stand-in sets none
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('answers 404 with a hint when no JupyterLab server is configured', async () => {
    const res = await fetch(`${bare.base}/jupyter/lab`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: 'not_found', message: expect.stringMatching(/JUPYTERLAB_URL/) as unknown });
  });
});

/**
 * Stands in for the backend's session check with a workspace (issue 15): members by workspace,
 * 404 for a non-member (403 marked `x-codeagent-refusal: not_found` when nginx asks with
 * `x-codeagent-require: member`), 403 for a viewer's write.
 */
function fakeWorkspaceBackend(sessions: Map<string, string>, members: Map<string, Map<string, string>>, asked: Seen[]): Server {
  return createServer((req, res) => {
    asked.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const user = sessions.get(token);
    const send = (status: number, body: object, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.url !== '/api/v1/auth/session' || !user) return send(401, { error: 'unauthorized', message: 'token is no longer valid; log in again' });
    const ws = String(req.headers['x-codeagent-workspace'] ?? '');
    const role = members.get(ws)?.get(user);
    if (!role) {
      if (req.headers['x-codeagent-require'] === 'member') return send(403, { error: 'forbidden' }, { 'x-codeagent-refusal': 'not_found' });
      return send(404, { error: 'not_found', message: 'workspace not found' });
    }
    if (role === 'viewer' && req.headers['x-codeagent-access'] !== 'read') return send(403, { error: 'forbidden', message: 'viewers read only' });
    send(200, { user_id: user, is_system_admin: false, workspace_role: role }, { 'x-codeagent-user-id': user });
  });
}

describe.each(INGRESSES)("a workspace's JupyterLab through %s (issue 15): members only, viewers read only", (kind) => {
  const WS = '3f2b8c1e-1d2a-4c3b-9e8f-0a1b2c3d4e5f';
  const OTHER_WS = '7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d';
  const runtimeSeen: Seen[] = [];
  const bridgeSeen: Seen[] = [];
  const backendAsked: Seen[] = [];
  const sessions = new Map([
    ['editor-token', 'editor-1'],
    ['viewer-token', 'viewer-1'],
    ['outsider-token', 'outsider-1'],
  ]);
  const members = new Map([
    [
      WS,
      new Map([
        ['editor-1', 'editor'],
        ['viewer-1', 'viewer'],
      ]),
    ],
  ]);
  let runtime: Server;
  let bridge: Server;
  let backend: Server;
  let ingress: Ingress;
  let base: string;

  beforeAll(async () => {
    runtime = recordingServer(runtimeSeen);
    bridge = recordingServer(bridgeSeen);
    backend = fakeWorkspaceBackend(sessions, members, backendAsked);
    const [runtimeUrl, bridgeUrl, backendUrl] = await Promise.all([listenOn(runtime), listenOn(bridge), listenOn(backend)]);
    ingress = await startIngress(kind, {
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl },
      jupyter: { url: runtimeUrl, token: JUPYTER_TOKEN, perWorkspace: true },
    });
    base = ingress.base;
  });
  afterAll(async () => {
    for (const s of upgradedSockets) s.destroy();
    await ingress.close();
    for (const s of [runtime, bridge, backend]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  const bearerOf = (token: string) => ({ authorization: `Bearer ${token}` });

  it('names the workspace and whether the request writes in the session check; a member reaches the runtime with the lab token', async () => {
    const res = await fetch(`${base}/jupyter/${WS}/api/contents`, { headers: bearerOf('editor-token') });
    expect(res.status).toBe(200);
    const asked = backendAsked.at(-1)!;
    expect(asked.headers['x-codeagent-workspace']).toBe(WS);
    expect(asked.headers['x-codeagent-access']).toBe('read');
    const seen = runtimeSeen.at(-1)!;
    expect(seen.url).toBe(`/jupyter/${WS}/api/contents`);
    expect(seen.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
    expect((await fetch(`${base}/jupyter/${WS}/api/contents/a.ipynb`, { method: 'PUT', headers: bearerOf('editor-token') })).status).toBe(200);
    expect(backendAsked.at(-1)!.headers['x-codeagent-access']).toBe('write');
  });

  it('names the checked user to the runtime, never the one a client names (decision 0251)', async () => {
    expect((await fetch(`${base}/jupyter/${WS}/lab/api/settings`, { headers: bearerOf('editor-token') })).status).toBe(200);
    expect(runtimeSeen.at(-1)!.headers['x-codeagent-user-id']).toBe('editor-1');
    const forged = await fetch(`${base}/jupyter/${WS}/lab/api/settings`, { headers: { ...bearerOf('editor-token'), 'x-codeagent-user-id': 'viewer-1' } });
    expect(forged.status).toBe(200);
    expect(runtimeSeen.at(-1)!.headers['x-codeagent-user-id']).toBe('editor-1');
  });

  it('answers 404 to a non-member, for an unknown workspace and a path without one, on HTTP and websockets', async () => {
    const before = runtimeSeen.length;
    for (const ws of [WS, OTHER_WS]) {
      const res = await fetch(`${base}/jupyter/${ws}/lab`, { headers: bearerOf('outsider-token') });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: 'not_found', message: expect.stringMatching(/not a member/) as unknown });
      expect(await upgrade(base, `/jupyter/${ws}/api/kernels/k1/channels`, bearerOf('outsider-token'))).toBe(404);
    }
    const none = await fetch(`${base}/jupyter/lab`, { headers: bearerOf('editor-token') });
    expect(none.status).toBe(404);
    expect(await none.json()).toMatchObject({ error: 'not_found', message: expect.stringMatching(/\/jupyter\/<workspace id>\//) as unknown });
    expect(runtimeSeen.length).toBe(before);
  });

  it('lets a viewer read but not write or open websockets (403)', async () => {
    expect((await fetch(`${base}/jupyter/${WS}/api/contents/a.ipynb`, { headers: bearerOf('viewer-token') })).status).toBe(200);
    const before = runtimeSeen.length;
    for (const method of ['PUT', 'PATCH', 'POST', 'DELETE']) {
      const res = await fetch(`${base}/jupyter/${WS}/api/contents/a.ipynb`, { method, headers: bearerOf('viewer-token') });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'forbidden', message: expect.stringMatching(/viewers/) as unknown });
    }
    expect(await upgrade(base, `/jupyter/${WS}/api/kernels/k1/channels`, bearerOf('viewer-token'))).toBe(403);
    expect(await upgrade(base, `/jupyter/${WS}/terminals/websocket/1`, bearerOf('viewer-token'))).toBe(403);
    expect(runtimeSeen.length).toBe(before);
  });

  it('sends a browser without a valid session to the login page and back; API calls get 401 JSON', async () => {
    const page = await fetch(`${base}/jupyter/${WS}/lab`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toMatch(new RegExp(`/login\\?next=(%2Fjupyter%2F${WS}%2Flab|/jupyter/${WS}/lab)$`));
    const revoked = await fetch(`${base}/jupyter/${WS}/lab`, { headers: { accept: 'text/html', cookie: 'codeagent_session=logged-out' }, redirect: 'manual' });
    expect(revoked.status).toBe(302);
    const api = await fetch(`${base}/jupyter/${WS}/api/contents`, { headers: { accept: 'application/json' } });
    expect(api.status).toBe(401);
    expect(await api.json()).toMatchObject({ error: 'unauthorized' });
  });

  it("routes the bridge below a workspace's base URL to the bridge, as /codeagent-bridge/workspaces/<ws>/* (the bridge checks membership, decision 0240)", async () => {
    const res = await fetch(`${base}/jupyter/${WS}/codeagent-bridge/providers?x=1`, { headers: { cookie: 'codeagent_session=editor-token' } });
    expect(res.status).toBe(200);
    const seen = bridgeSeen.at(-1)!;
    expect(seen.url).toBe(`/codeagent-bridge/workspaces/${WS}/providers?x=1`);
    expect(seen.headers.cookie).toBe('codeagent_session=editor-token');
    const bare = await fetch(`${base}/jupyter/${WS}/codeagent-bridge`, { headers: { cookie: 'codeagent_session=editor-token' } });
    expect(bare.status).toBe(200);
    expect(bridgeSeen.at(-1)!.url).toBe(`/codeagent-bridge/workspaces/${WS}`);
  });
});

// Lab saves through the gateway's framework path (decisions 0258, 0261): a small body is read
// whole before it takes a connection of the labs' pool, and a streamed one reaches the lab whole
// only if the member's access still holds once it has arrived.
describe("lab requests with bodies through the gateway's framework path", () => {
  const WS = '3f2b8c1e-1d2a-4c3b-9e8f-0a1b2c3d4e5f';
  const sessions = new Map([
    ['keeper-token', 'keeper-1'],
    ['leaver-token', 'leaver-1'],
  ]);
  const members = new Map([
    [
      WS,
      new Map([
        ['keeper-1', 'editor'],
        ['leaver-1', 'editor'],
      ]),
    ],
  ]);
  /** What the lab received of each request: bytes, and whether its body ended. */
  const received: { url: string; bytes: number; ended: boolean }[] = [];
  let lab: Server;
  let backend: Server;
  let ingress: Ingress;
  const holding: ClientRequest[] = [];

  beforeAll(async () => {
    lab = createServer((req, res) => {
      const entry = { url: req.url ?? '', bytes: 0, ended: false };
      received.push(entry);
      req.on('data', (c: Buffer) => (entry.bytes += c.length));
      req.on('end', () => {
        entry.ended = true;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    backend = fakeWorkspaceBackend(sessions, members, []);
    const [labUrl, backendUrl] = await Promise.all([listenOn(lab), listenOn(backend)]);
    ingress = await startIngress('gateway', {
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' },
      jupyter: { url: labUrl, token: JUPYTER_TOKEN, perWorkspace: true },
    });
  });
  afterAll(async () => {
    for (const req of holding) req.destroy();
    await ingress?.close();
    await Promise.all([stopServer(lab), stopServer(backend)]);
  });

  /** A lab save that sends `sent` of its `length` bytes now; `rest` sends the others and resolves with the status. */
  function save(token: string, name: string, length: number, sent: number) {
    const { port } = new URL(ingress.base);
    const req = request({
      host: '127.0.0.1',
      port,
      path: `/jupyter/${WS}/api/contents/${name}`,
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': length },
    });
    holding.push(req);
    const status = new Promise<number>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', () => resolve(0));
    });
    req.write(Buffer.alloc(sent, 0x20));
    return { rest: () => (req.end(Buffer.alloc(length - sent, 0x20)), status) };
  }

  it("a member's 70 slow small saves take none of the labs' connections: another member's request is answered", async () => {
    for (let i = 0; i < 70; i++) save('keeper-token', `slow-${i}.txt`, 60_000, 10);
    await new Promise((r) => setTimeout(r, 500));
    const other = await fetch(`${ingress.base}/jupyter/${WS}/api/contents`, {
      headers: { authorization: 'Bearer leaver-token' },
      signal: AbortSignal.timeout(5_000),
    });
    expect(other.status).toBe(200);
    expect(received.filter((r) => r.url.includes('/slow-'))).toEqual([]);
  });

  it("a streamed save reaches the lab whole only if the member's access holds once it has arrived", async () => {
    const kept = save('keeper-token', 'kept.bin', 300_000, 200_000);
    const cut = save('leaver-token', 'cut.bin', 300_000, 200_000);
    for (let i = 0; received.filter((r) => r.url.endsWith('.bin') && r.bytes > 0).length < 2; i++) {
      if (i > 100) throw new Error('the saves never reached the lab');
      await new Promise((r) => setTimeout(r, 50));
    }
    // The member is removed while the save's body arrives.
    members.get(WS)!.delete('leaver-1');
    expect(await kept.rest()).toBe(200);
    expect(await cut.rest()).toBe(404);
    await new Promise((r) => setTimeout(r, 200));
    const at = (name: string) => received.find((r) => r.url.endsWith(name))!;
    expect(at('kept.bin')).toMatchObject({ bytes: 300_000, ended: true });
    expect(at('cut.bin').ended).toBe(false);
    expect(at('cut.bin').bytes).toBeLessThan(300_000);
  });
});
