import { createHash } from 'node:crypto';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { issueUserToken } from '@codeagent/auth';
import { buildGatewayApp } from './app.js';

const SECRET = 'gateway-test-secret-long-enough-for-hs256-0123456789';
const JUPYTER_TOKEN = 'the-jupyter-servers-own-token';

function listenOn(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

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
    const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    upgradedSockets.add(socket);
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  });
  return server;
}

/** Opens a websocket handshake through the gateway; resolves with 101 or the refusal's status. */
function upgrade(base: string, path: string, headers: Record<string, string>): Promise<number> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname + url.search,
      agent: false, // a refused handshake closes its socket: never reuse one
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve(101);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('gateway /jupyter (SPEC §10)', () => {
  const jupyterSeen: Seen[] = [];
  const bridgeSeen: Seen[] = [];
  let jupyter: Server;
  let bridge: Server;
  let gateway: FastifyInstance;
  let bare: FastifyInstance;
  let base: string;
  let token: string;

  beforeAll(async () => {
    jupyter = recordingServer(jupyterSeen);
    bridge = recordingServer(bridgeSeen);
    const [jupyterUrl, bridgeUrl] = await Promise.all([listenOn(jupyter), listenOn(bridge)]);
    gateway = await buildGatewayApp({
      upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl },
      jupyter: { url: jupyterUrl, token: JUPYTER_TOKEN },
      jwtSecret: SECRET,
    });
    base = await gateway.listen({ host: '127.0.0.1', port: 0 });
    bare = await buildGatewayApp({ upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl } });
    token = (await issueUserToken('user-1', SECRET, 600)).token;
  });
  afterAll(async () => {
    for (const s of upgradedSockets) s.destroy();
    await gateway.close();
    await bare.close();
    for (const s of [jupyter, bridge]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('answers 401 JSON without a platform login, and never reaches Jupyter', async () => {
    const before = jupyterSeen.length;
    const res = await fetch(`${base}/jupyter/lab`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'unauthorized' });
    const forged = await fetch(`${base}/jupyter/api/kernels`, { headers: { cookie: 'codeagent_session=not-a-jwt' } });
    expect(forged.status).toBe(401);
    const otherSecret = (await issueUserToken('user-1', 'x'.repeat(48), 600)).token;
    expect((await fetch(`${base}/jupyter/api/kernels`, { headers: { authorization: `Bearer ${otherSecret}` } })).status).toBe(401);
    expect(jupyterSeen.length).toBe(before);
  });

  it('proxies a logged-in user (cookie) with the Jupyter token injected and the platform cookie removed', async () => {
    const res = await fetch(`${base}/jupyter/api/contents?type=notebook`, { headers: { cookie: `codeagent_session=${token}; _xsrf=abc` } });
    expect(res.status).toBe(200);
    const seen = jupyterSeen.at(-1)!;
    expect(seen.url).toBe('/jupyter/api/contents?type=notebook');
    expect(seen.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
    expect(seen.headers.cookie).toBe('_xsrf=abc');
    expect(JSON.stringify(seen.headers)).not.toContain(token);
  });

  it('accepts the Bearer token too, replacing it with the Jupyter token', async () => {
    const res = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(jupyterSeen.at(-1)!.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
  });

  it('refuses a cross-site write that relies on the cookie, allows a same-origin one (Origin dropped upstream)', async () => {
    const cookie = `codeagent_session=${token}`;
    const cross = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { cookie, origin: 'http://evil.example' } });
    expect(cross.status).toBe(403);
    const host = new URL(base).host;
    const same = await fetch(`${base}/jupyter/api/kernels`, { method: 'POST', headers: { cookie, origin: `http://${host}` } });
    expect(same.status).toBe(200);
    expect(jupyterSeen.at(-1)!.headers.origin).toBeUndefined();
  });

  it('proxies websockets (kernels) only for a logged-in user, with the Jupyter token', async () => {
    const host = new URL(base).host;
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels?session_id=s', {})).toBe(401);
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels', { cookie: `codeagent_session=${token}`, origin: 'http://evil.example' })).toBe(403);
    const before = jupyterSeen.length;
    expect(await upgrade(base, '/jupyter/api/kernels/k1/channels?session_id=s', { cookie: `codeagent_session=${token}`, origin: `http://${host}` })).toBe(101);
    // The gateway answers the browser first, then opens the upstream side.
    const upgraded = () => jupyterSeen.slice(before).find((s) => s.method === 'UPGRADE');
    for (let i = 0; i < 100 && !upgraded(); i++) await new Promise((r) => setTimeout(r, 20));
    const seen = upgraded()!;
    expect(seen.url).toBe('/jupyter/api/kernels/k1/channels?session_id=s');
    expect(seen.headers.authorization).toBe(`token ${JUPYTER_TOKEN}`);
    expect(seen.headers.cookie ?? '').not.toContain('codeagent_session');
  });

  it('routes /jupyter/codeagent-bridge/* to the bridge as /codeagent-bridge/*, passing the user cookie on', async () => {
    const res = await fetch(`${base}/jupyter/codeagent-bridge/providers?x=1`, { headers: { cookie: `codeagent_session=${token}` } });
    expect(res.status).toBe(200);
    const seen = bridgeSeen.at(-1)!;
    expect(seen.url).toBe('/codeagent-bridge/providers?x=1');
    expect(seen.headers.cookie).toBe(`codeagent_session=${token}`);
    expect(seen.headers.authorization).toBeUndefined();
  });

  it('answers 404 with a hint when no JupyterLab server is configured', async () => {
    const res = await bare.inject({ method: 'GET', url: '/jupyter/lab' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: 'not_found' });
  });
});
