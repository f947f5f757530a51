// Several instances of a component behind one ingress (issue 18): balanced, a dead instance
// skipped, one user kept on one Jupyter instance over HTTP and websockets. Through the gateway
// and through nginx with the rendered configuration.
import { createServer, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGRESSES, startIngress, type Ingress } from './ingress-testing.js';
import { UpstreamPool } from './upstream-pool.js';
import { acceptWebsocket, listenOn, stopServer as stop, upgrade } from './upstream-testing.js';

const JUPYTER_TOKEN = 'replica-jupyter-token';
const sockets = new Set<Duplex>();

/** An instance that names itself in every answer (and accepts websockets). */
function instance(name: string, seen: string[]): Server {
  const server = createServer((req, res) => {
    seen.push(`${name} ${req.method} ${req.url}`);
    if (req.url === '/readyz' || req.url === '/jupyter/api') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"status":"ok"}');
    }
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ instance: name, body }));
    });
  });
  server.on('upgrade', (req, socket) => {
    seen.push(`${name} UPGRADE ${req.url}`);
    acceptWebsocket(req, socket, sockets);
  });
  return server;
}

/** The backend's session route for three administrators: their token is their user id. */
function sessionBackend(): Server {
  return createServer((req, res) => {
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (req.url === '/api/v1/auth/session' && /^admin-\d$/.test(token)) {
      res.writeHead(200, { 'content-type': 'application/json', 'x-codeagent-user-id': token });
      return res.end(JSON.stringify({ user_id: token, is_system_admin: true }));
    }
    res.writeHead(req.url === '/readyz' ? 200 : 401, { 'content-type': 'application/json' });
    res.end('{}');
  });
}

describe.each(INGRESSES)('replicas behind %s', (kind) => {
  const seen: string[] = [];
  let a: Server;
  let b: Server;
  let jupyters: Server[];
  let sessions: Server;
  let ingress: Ingress;

  beforeAll(async () => {
    a = instance('a', seen);
    b = instance('b', seen);
    jupyters = [instance('j1', seen), instance('j2', seen), instance('j3', seen)];
    sessions = sessionBackend();
    const [aUrl, bUrl, sessionUrl, ...jupyterUrls] = await Promise.all([listenOn(a), listenOn(b), listenOn(sessions), ...jupyters.map((j) => listenOn(j))]);
    ingress = await startIngress(kind, {
      // The bridge stands for any balanced component; the session backend answers /jupyter's checks.
      upstreams: { backend: sessionUrl, clusterAdmin: [aUrl, bUrl], bridge: [aUrl, bUrl] },
      jupyter: { url: jupyterUrls, token: JUPYTER_TOKEN },
    });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await ingress.close();
    for (const s of [a, b, sessions, ...jupyters]) if (s.listening) await stop(s);
  });

  it('spreads requests over the instances', async () => {
    const answered = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${ingress.base}/admin/clusters`);
      expect(res.status).toBe(200);
      answered.add(((await res.json()) as { instance: string }).instance);
    }
    expect([...answered].sort()).toEqual(['a', 'b']);
  });

  it('keeps one user on one Jupyter instance, for HTTP and websockets alike', async () => {
    for (const user of ['admin-1', 'admin-2', 'admin-3']) {
      const from = seen.length;
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${ingress.base}/jupyter/api/contents/${i}`, { headers: { authorization: `Bearer ${user}` } });
        expect(res.status).toBe(200);
      }
      expect(await upgrade(ingress.base, '/jupyter/api/kernels/k/channels', { authorization: `Bearer ${user}` })).toBe(101);
      for (let i = 0; i < 50 && !seen.slice(from).some((s) => s.includes('UPGRADE')); i++) await new Promise((r) => setTimeout(r, 20));
      const mine = seen.slice(from).filter((s) => /^j\d /.test(s) && !s.endsWith('/jupyter/api'));
      expect(mine.length, user).toBe(7);
      expect(new Set(mine.map((s) => s.split(' ')[0])).size, `${user}: ${mine.join(', ')}`).toBe(1);
    }
  });

  it('skips an instance that died: every request still succeeds, bodies included', async () => {
    await stop(a);
    const statuses: number[] = [];
    const instances = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${ingress.base}/codeagent-bridge/x`, i % 2 === 0 ? {} : { method: 'POST', body: `payload ${i}` });
      statuses.push(res.status);
      const body = (await res.json()) as { instance: string; body: string };
      instances.add(body.instance);
      if (i % 2 === 1) expect(body.body).toBe(`payload ${i}`);
    }
    expect(statuses).toEqual(Array(20).fill(200));
    expect([...instances]).toEqual(['b']);
  });
});

describe('UpstreamPool', () => {
  it('takes an instance back once its health check passes again', async () => {
    const seen: string[] = [];
    const one = instance('one', seen);
    const two = instance('two', seen);
    const [oneUrl, twoUrl] = await Promise.all([listenOn(one), listenOn(two)]);
    const pool = new UpstreamPool({ name: 'test', urls: [oneUrl, twoUrl], healthPath: '/readyz', connections: 4, timeoutMs: 5000, healthIntervalMs: 60_000 });
    try {
      const port = Number(new URL(oneUrl).port);
      await stop(one);
      // A GET to the dead instance fails over to the live one and marks the dead one down.
      for (let i = 0; i < 4; i++) {
        const res = await pool.request({ method: 'GET', path: '/x' });
        expect(((await res.body.json()) as { instance: string }).instance).toBe('two');
      }
      expect(pool.instances.map((i) => i.up)).toEqual([false, true]);
      await pool.checkAll();
      expect(pool.instances.map((i) => i.up)).toEqual([false, true]);
      const again = instance('one', seen);
      await listenOn(again, port);
      await pool.checkAll();
      expect(pool.instances.map((i) => i.up)).toEqual([true, true]);
      const answered = new Set<string>();
      for (let i = 0; i < 4; i++) answered.add(((await (await pool.request({ method: 'GET', path: '/x' })).body.json()) as { instance: string }).instance);
      expect([...answered].sort()).toEqual(['one', 'two']);
      await stop(again);
    } finally {
      await pool.close();
      await stop(two);
    }
  });

  it('never sends a streamed body twice: a POST whose instance is gone fails instead', async () => {
    const seen: string[] = [];
    const live = instance('live', seen);
    const liveUrl = await listenOn(live);
    const dead = createServer();
    const deadUrl = await listenOn(dead);
    await stop(dead);
    // A stream that the dead instance's refused connection never read would be safe to resend,
    // but the pool cannot know that: only bodies in memory are sent again.
    const pool = new UpstreamPool({ name: 'test', urls: [deadUrl, liveUrl], healthPath: '/readyz', connections: 4, timeoutMs: 5000 });
    try {
      const { Readable } = await import('node:stream');
      const results = await Promise.allSettled(
        [0, 1].map((i) => pool.request({ origin: i === 0 ? deadUrl : liveUrl, method: 'POST', path: '/x', body: Readable.from([Buffer.from('streamed')]) })),
      );
      expect(results[0]!.status).toBe('rejected');
      expect(results[1]!.status).toBe('fulfilled');
      // A body in memory (or none) goes to the other instance.
      const res = await pool.request({ origin: deadUrl, method: 'POST', path: '/x', body: 'in memory' });
      expect(await res.body.json()).toEqual({ instance: 'live', body: 'in memory' });
    } finally {
      await pool.close();
      await stop(live);
    }
  });
});
