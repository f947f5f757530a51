// Slow uploads, however many, never take the connections every other request needs (decision
// 0258): a component's requests whose body streams on go over connections of their own.
import { createServer, request, type ClientRequest, type IncomingMessage, type RequestListener } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngress } from './ingress-testing.js';
import { listenOn, stopServer } from './upstream-testing.js';
import { UPSTREAMS, largeAnswer } from './routes.js';
import { SMALL_BODY_BYTES } from './upstream-pool.js';

/** A stand-in for every component, answering with `handler`, and the gateway in front of it. */
async function behindGateway(handler: RequestListener, fastPath = true): Promise<{ base: string; close(): Promise<void> }> {
  const upstream = createServer(handler);
  const url = await listenOn(upstream);
  const gateway = await startIngress('gateway', { upstreams: { backend: url, clusterAdmin: url, bridge: url }, timeoutMs: 30_000, fastPath });
  return {
    base: gateway.base,
    async close() {
      await gateway.close();
      await stopServer(upstream);
    },
  };
}

describe.each([
  { path: 'fast path', fastPath: true },
  { path: "the framework's proxy", fastPath: false },
])('the gateway full of held uploads ($path)', ({ fastPath }) => {
  let gateway: Awaited<ReturnType<typeof behindGateway>>;
  const held: IncomingMessage[] = [];
  const holding: ClientRequest[] = [];

  beforeAll(async () => {
    // The backend: holds every large upload (reads it, never answers), answers anything else.
    gateway = await behindGateway((req, res) => {
      if (req.method === 'PUT' && Number(req.headers['content-length'] ?? Infinity) > SMALL_BODY_BYTES) {
        held.push(req);
        req.resume();
        return;
      }
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    }, fastPath);
  });
  afterAll(async () => {
    for (const req of holding) req.destroy();
    await gateway?.close();
  });

  it('answers requests without a large body at once, and queues the next upload', async () => {
    const { port } = new URL(gateway.base);
    // A streamed upload (declared larger than the 64 KiB the gateway reads first) that sends
    // 100 KiB of its 1 MB and then waits, as a client sending a byte now and then would.
    const upload = (): ClientRequest => {
      const req = request({ host: '127.0.0.1', port, path: '/api/v1/data-resources/w/objects/f.bin', method: 'PUT', headers: { 'content-length': 1_000_000 } });
      req.on('error', () => undefined);
      req.write(Buffer.alloc(100 * 1024, 1));
      holding.push(req);
      return req;
    };
    const connections = UPSTREAMS.backend.connections;
    for (let i = 0; i < connections; i++) upload();
    for (let i = 0; held.length < connections; i++) {
      if (i > 300) throw new Error(`only ${held.length} of ${connections} uploads reached the backend`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Every connection for uploads is held: one more waits for one of them.
    upload();
    await new Promise((r) => setTimeout(r, 300));
    expect(held).toHaveLength(connections);

    // Everything else still reaches the backend at once: reads, small bodies, a small PUT.
    const signal = AbortSignal.timeout(5_000);
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, () => fetch(`${gateway.base}/api/v1/auth/me`, { signal })),
      fetch(`${gateway.base}/api/v1/workspaces`, { method: 'POST', body: '{"name":"x"}', headers: { 'content-type': 'application/json' }, signal }),
      fetch(`${gateway.base}/api/v1/data-resources/w/objects/small.txt`, { method: 'PUT', body: 'x'.repeat(SMALL_BODY_BYTES), signal }),
    ]);
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    expect(held).toHaveLength(connections);

    // One held upload ends: the queued one takes its connection.
    held[0]!.socket.destroy();
    for (let i = 0; held.length < connections + 1; i++) {
      if (i > 100) throw new Error('the queued upload never reached the backend');
      await new Promise((r) => setTimeout(r, 50));
    }
  });
});

describe.each([
  { path: 'fast path', fastPath: true },
  { path: "the framework's proxy", fastPath: false },
])('small bodies sent slowly ($path)', ({ fastPath }) => {
  let gateway: Awaited<ReturnType<typeof behindGateway>>;
  const holding: ClientRequest[] = [];
  /** Every request that reached the backend, by path. */
  const seen: string[] = [];
  beforeAll(async () => {
    gateway = await behindGateway((req, res) => {
      seen.push(req.url ?? '');
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    }, fastPath);
  });
  afterAll(async () => {
    for (const req of holding) req.destroy();
    await gateway?.close();
  });

  it('takes no connection for a small body sent slowly: it is read whole before it goes on', async () => {
    const { port } = new URL(gateway.base);
    // 140 logins declaring 16,000 bytes each, of which 10 come (a logged-out client, no account needed).
    const slow = Array.from({ length: 140 }, () => {
      const req = request({
        host: '127.0.0.1',
        port,
        path: '/api/v1/auth/login',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': 16_000 },
      });
      req.on('error', () => undefined);
      req.write('{"email":"');
      holding.push(req);
      return req;
    });
    await new Promise((r) => setTimeout(r, 500));
    const signal = AbortSignal.timeout(5_000);
    const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${gateway.base}/api/v1/auth/me`, { signal })));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    // None of the slow ones reached the backend.
    expect(seen.filter((url) => url === '/api/v1/auth/login')).toEqual([]);
    for (const req of slow) req.destroy();
  });
});

describe('downloads read slowly', () => {
  let gateway: Awaited<ReturnType<typeof behindGateway>>;
  const clients: ClientRequest[] = [];
  let started = 0;
  beforeAll(async () => {
    // The backend: a file's content starts and never ends (a client reading at a trickle holds it as long).
    gateway = await behindGateway((req, res) => {
      if (req.url?.includes('/objects/big.bin')) {
        started++;
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 10_000_000 });
        res.write(Buffer.alloc(1024));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await gateway?.close();
  });

  it('take none of the connections every other request needs', async () => {
    const { port } = new URL(gateway.base);
    const connections = UPSTREAMS.backend.connections;
    for (let i = 0; i < connections; i++) {
      const req = request({ host: '127.0.0.1', port, path: `/api/v1/data-resources/w/objects/big.bin?i=${i}`, method: 'GET' });
      req.on('error', () => undefined);
      req.on('response', (res) => res.pause());
      req.end();
      clients.push(req);
    }
    for (let i = 0; started < connections; i++) {
      if (i > 300) throw new Error(`only ${started} of ${connections} downloads started`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const signal = AbortSignal.timeout(5_000);
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, () => fetch(`${gateway.base}/api/v1/auth/me`, { signal })),
      fetch(`${gateway.base}/api/v1/data-resources/w/objects?prefix=`, { signal }),
    ]);
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
  });

  it('are told apart by method and path (the component’s, decoded as the component decodes it)', () => {
    for (const [method, path] of [
      ['GET', '/api/v1/dav/w/a.csv'],
      ['PROPFIND', '/api/v1/dav/w/big-folder/'],
      ['GET', '/api/v1/data-resources/w/objects/a.csv'],
      ['GET', '/api/v1/data-resources/w/%6Fbjects/a.csv'],
      ['GET', '/api/v1/%64ata-resources/w/objects/a.csv'],
      ['GET', '/api/v1/data-resources/w/versions/a.csv?version_id=v'],
      ['GET', '/api/v1/data-resources/w/archive?prefix=x/'],
      ['GET', '/api/v1/data-resources/w/archive'],
      ['GET', '/api/v1/workspaces/w/runs/r/log'],
      ['GET', '/jupyter/w/files/a.csv'],
      ['GET', '/jupyter/w/api/contents/a.ipynb'],
      ['GET', '/jupyter/w/api/contents'],
      ['GET', '/jupyter/w/nbconvert/notebook/big.ipynb?download=true'],
      ['GET', '/jupyter/w/static/lab/vendors.js'],
      ['GET', '/jupyter/w/lab'],
    ] as const)
      expect(largeAnswer(method, path), `${method} ${path}`).toBe(true);
    for (const [method, path] of [
      ['GET', '/api/v1/auth/me'],
      ['GET', '/api/v1/data-resources/w/objects?prefix='],
      ['GET', '/api/v1/data-resources/w/trash'],
      ['GET', '/api/v1/data-resources/w/archived'],
      ['GET', '/api/v1/workspaces/w/runs/r'],
      ['GET', '/api/v1/%zz/objects/a.csv'],
      ['HEAD', '/api/v1/data-resources/w/objects/a.csv'],
      ['PROPFIND', '/jupyter/w/files/'],
      ['GET', '/jupyter/w/api/kernels'],
      ['GET', '/jupyter/w/api/status'],
      ['GET', '/jupyter/w/api/contentsx'],
    ] as const)
      expect(largeAnswer(method, path), `${method} ${path}`).toBe(false);
  });
});

// An upload waiting for a connection of a full pool whose client goes away: the gateway lives on
// (it died of the body stream's unheard error, and every user's connections with it).
describe('an upload queued for a full pool whose client goes away', () => {
  let gateway: Awaited<ReturnType<typeof behindGateway>>;
  const held: IncomingMessage[] = [];
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    // The backend: holds every upload (reads it, never answers), answers anything else.
    gateway = await behindGateway((req, res) => {
      if (req.method === 'PUT') {
        held.push(req);
        req.resume();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await gateway?.close();
  });

  it('ends that request alone; the gateway answers the next ones', async () => {
    const { port } = new URL(gateway.base);
    // A streamed upload (declared larger than the 64 KiB the gateway reads first) that sends
    // 100 KiB of its 1 MB and then waits.
    const upload = (): ClientRequest => {
      const req = request({ host: '127.0.0.1', port, path: '/api/v1/data-resources/w/objects/f.bin', method: 'PUT', headers: { 'content-length': 1_000_000 } });
      req.on('error', () => undefined);
      req.write(Buffer.alloc(100 * 1024, 1));
      return req;
    };
    const pool = UPSTREAMS.backend.connections;
    const holding = Array.from({ length: pool }, upload);
    for (let i = 0; held.length < pool; i++) {
      if (i > 300) throw new Error(`only ${held.length} of ${pool} uploads reached the backend`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // One more waits in the pool's queue; its client goes away.
    const queued = upload();
    await new Promise((r) => setTimeout(r, 300));
    expect(held).toHaveLength(pool);
    queued.destroy();
    await new Promise((r) => setTimeout(r, 500));
    expect(uncaught).toEqual([]);
    // The held uploads end; the gateway still answers.
    for (const req of holding) req.destroy();
    for (const req of held) req.socket.destroy();
    const res = await fetch(`${gateway.base}/api/v1/health`);
    expect(res.status).toBe(200);
    expect(uncaught).toEqual([]);
  });
});
