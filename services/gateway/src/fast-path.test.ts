// The gateway's fast path (decision 0192) against the framework's proxies it stands in for: the
// same requests through a gateway with it and one without, the same answers and the same requests
// upstream; and what only the fast path does (raw query strings, hop-by-hop headers dropped,
// small bodies sent again to another instance).
import { createHash } from 'node:crypto';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@codeagent/service-kit/http';
import Fastify, { type FastifyInstance } from 'fastify';
import { buildGatewayApp, fastPathTaken } from './app.js';
import type { InProcessHandler } from './fast-path.js';
import { closeNow } from './ingress-testing.js';
import { listenOn, nodeRequest, stopServer, type NodeAnswer } from './upstream-testing.js';

const WS = '0a1b2c3d-0000-4000-8000-00000000abcd';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
  sha256: string;
}

/** A component that reports what reached it, and answers as the path asks. */
function component(seen: Seen[]): Server {
  return createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.includes('early-413')) {
      // Answers before reading the body (a size limit on the declared length).
      res.writeHead(413, { 'content-type': 'application/json' });
      return res.end('{"error":"payload_too_large"}');
    }
    if (url.includes('slow')) return setTimeout(() => res.writeHead(200).end('late'), 2000).unref();
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      hash.update(c);
    });
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url, headers: req.headers, bytes, sha256: hash.digest('hex') });
      if (url.includes('own-csp')) {
        res.writeHead(404, { 'content-type': 'text/html', 'content-security-policy': 'sandbox', 'referrer-policy': 'no-referrer' });
        return res.end('<p>no</p>');
      }
      if (url.includes('hop')) {
        res.writeHead(200, { connection: 'x-private', 'x-private': 'upstream only', 'keep-alive': 'timeout=5', 'x-public': 'yes' });
        return res.end('hop');
      }
      if (url.includes('unavailable')) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        return res.end('{"error":"service_unavailable"}');
      }
      if (url.includes('repeated')) {
        // Repeated headers stay separate lines; a Connection header naming none.
        res.writeHead(200, [
          ['set-cookie', 'a=1; Path=/'],
          ['set-cookie', 'b=2; Path=/'],
          ['x-many', 'one'],
          ['x-many', 'two'],
          ['connection', 'keep-alive'],
        ] as unknown as Record<string, string>);
        return res.end('repeated');
      }
      if (url.includes('download')) {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return res.end(big);
      }
      if (url.includes('redirect')) {
        res.writeHead(302, { location: '/codeagent-bridge/elsewhere' });
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': String(req.headers['x-request-id']) });
      res.end(JSON.stringify({ method: req.method, url, bytes }));
    });
  });
}

/** One request through Node's client (upstream-testing.ts). */
const send = (base: string, method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | Buffer[]): Promise<NodeAnswer> =>
  nodeRequest(base, path, { method, headers, ...(body !== undefined ? { body } : {}) });

/** What must be the same on both ways (the date and a generated request id differ by nature). */
function comparable(a: NodeAnswer): object {
  // (An empty answer of unknown length may be framed either way.)
  const { date: _date, connection: _connection, 'keep-alive': _keepAlive, 'x-request-id': id, 'transfer-encoding': _te, ...headers } = a.headers;
  if (headers['content-length'] === '0') delete headers['content-length'];
  return { status: a.status, body: a.body.replace(/[0-9a-f-]{36}/g, 'ID'), headers, id: id === 'given-id.1' ? id : typeof id };
}

function comparableSeen(s: Seen): object {
  const { host: _host, connection: _connection, 'x-request-id': id, 'x-forwarded-host': forwardedHost, ...headers } = s.headers;
  // Each gateway listens on its own port.
  return { ...s, headers, forwardedHost: String(forwardedHost).replace(/:\d+$/, ':PORT'), id: id === 'given-id.1' ? id : typeof id };
}

const MiB = 1024 * 1024;
const big = Buffer.alloc(3 * MiB, 7);

/** The gateways the corpus goes through: every component at `url`, small limits. */
const corpusOptions = (url: string) => ({ upstreams: { backend: url, clusterAdmin: url, bridge: url }, maxUploadBytes: 5 * MiB, timeoutMs: 500 });

/** The corpus: [method, path, headers, body]. */
const CORPUS: [string, string, Record<string, string>, (Buffer | Buffer[])?][] = [
  ['GET', '/api/v1/auth/me', { authorization: 'Bearer t' }],
  ['GET', '/api/v1', {}],
  ['GET', '/api/v1/', {}],
  ['GET', '/api/v1/objects?prefix=a&limit=5', { 'x-request-id': 'given-id.1' }],
  ['GET', '/api/v1/x', { 'x-request-id': 'not a valid id!' }],
  ['HEAD', '/api/v1/x', {}],
  ['DELETE', '/api/v1/x', {}],
  ['OPTIONS', '/api/v1/x', { origin: 'http://elsewhere' }],
  ['POST', '/api/v1/auth/login', { 'content-type': 'application/json' }, Buffer.from('{"email":"a@b.c","password":"pw"}')],
  ['PUT', '/api/v1/data-resources/ws/objects/big.bin', { 'content-type': 'application/octet-stream' }, big],
  ['PUT', '/api/v1/data-resources/ws/objects/chunked.bin', {}, [Buffer.alloc(100_000, 1), Buffer.alloc(200_000, 2)]],
  ['PUT', '/api/v1/early-413', { 'content-type': 'application/octet-stream' }, big],
  ['PROPFIND', '/api/v1/dav/ws/', { depth: '1' }, Buffer.from('<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>')],
  ['PROPFIND', '/api/v1/not-dav', { depth: '1' }],
  ['GET', '/api/v1/own-csp', {}],
  ['GET', '/admin/clusters', {}],
  ['GET', '/mcp', { accept: 'text/event-stream' }],
  ['GET', '/codeagent-bridge/health', {}],
  ['GET', `/jupyter/${WS}/codeagent-bridge/sessions`, {}],
  ['GET', '/jupyter/codeagent-bridge/redirect', {}],
  ['GET', '/api/v1/a/%2e%2e/internal/b', {}],
  ['GET', '/internal/secrets', {}],
  ['GET', '/api/v1x', {}],
  ['GET', '/jupyter/lab', {}],
  ['POST', '/api/v1/too-big', { 'content-length': String(6 * MiB) }, undefined],
  ['GET', '/api/v1/slow', {}],
  ['GET', '/api/v1/repeated', {}],
  ['GET', '/api/v1/download', {}],
];

/** Paths of the corpus the fast path takes on (the others go to Fastify). */
const plainPath = (path: string) => !/%2e|^\/internal|^\/api\/v1x|^\/jupyter\/lab|too-big|not-dav/.test(path);

describe('gateway fast path', () => {
  const seen: Seen[] = [];
  let upstream: Server;
  let fast: FastifyInstance;
  let framework: FastifyInstance;
  let fastBase: string;
  let frameworkBase: string;

  beforeAll(async () => {
    upstream = component(seen);
    const url = await listenOn(upstream);
    const opts = corpusOptions(url);
    fast = await buildGatewayApp(opts);
    framework = await buildGatewayApp({ ...opts, fastPath: false });
    fastBase = await fast.listen({ host: '127.0.0.1', port: 0 });
    frameworkBase = await framework.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await closeNow(fast);
    await closeNow(framework);
    await stopServer(upstream);
  });

  it.each(CORPUS)('%s %s: the same answer, and the same request upstream, both ways', async (method, path, headers, body) => {
    const takenBefore = fastPathTaken(fast);
    seen.length = 0;
    const viaFramework = await send(frameworkBase, method, path, headers, body === undefined ? undefined : body);
    const frameworkSeen = seen.splice(0);
    const viaFast = await send(fastBase, method, path, headers, body === undefined ? undefined : body);
    const fastSeen = seen.splice(0);
    expect(comparable(viaFast)).toEqual(comparable(viaFramework));
    expect(fastSeen.map(comparableSeen)).toEqual(frameworkSeen.map(comparableSeen));
    expect(fastPathTaken(framework)).toBe(0);
    // Every request the fast path is for went through it; the others went to Fastify.
    expect(fastPathTaken(fast) - takenBefore, 'taken by the fast path').toBe(plainPath(path) ? 1 : 0);
  });

  it('passes the query string on as the client wrote it (the framework proxy re-encodes it)', async () => {
    seen.length = 0;
    await send(fastBase, 'GET', '/api/v1/objects?prefix=a+b%2Fc&x');
    expect(seen[0]?.url).toBe('/api/v1/objects?prefix=a+b%2Fc&x');
  });

  it("passes a component's 503 on at once, asked once, both ways (@fastify/reply-from asked again up to ten times)", async () => {
    for (const base of [fastBase, frameworkBase]) {
      seen.length = 0;
      const answer = await send(base, 'GET', '/api/v1/unavailable');
      expect(answer.status).toBe(503);
      expect(answer.headers['retry-after']).toBe('1');
      expect(seen).toHaveLength(1);
    }
  });

  it('drops hop-by-hop headers both ways, and what the client claims to be', async () => {
    seen.length = 0;
    const answer = await send(fastBase, 'GET', '/api/v1/hop', {
      connection: 'keep-alive, x-hop',
      'x-hop': 'for the gateway only',
      'keep-alive': 'timeout=1',
      te: 'trailers',
      'x-forwarded-for': '10.9.9.9',
      'x-forwarded-host': 'evil.example',
      forwarded: 'for=10.9.9.9',
    });
    const got = seen[0]!.headers;
    expect(got['x-hop']).toBeUndefined();
    expect(got['keep-alive']).toBeUndefined();
    expect(got.te).toBeUndefined();
    expect(got.forwarded).toBeUndefined();
    expect(got['x-forwarded-for']).toBe('127.0.0.1');
    expect(got['x-forwarded-host']).toBe(new URL(fastBase).host);
    expect(answer.headers['x-private']).toBeUndefined();
    expect(answer.headers['keep-alive']).not.toBe('timeout=5'); // (the gateway's own is about its connection)
    expect(answer.headers['x-public']).toBe('yes');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
  });

  it('a client that stops sending a small body is cut off, and no request reaches the component', async () => {
    seen.length = 0;
    const url = new URL(fastBase);
    const closed = await new Promise<boolean>((resolve) => {
      const req = request({ host: url.hostname, port: url.port, method: 'POST', path: '/api/v1/x', headers: { 'content-length': '100' }, agent: false });
      req.on('error', () => resolve(true));
      req.on('response', () => resolve(false));
      req.write('only part of it');
    });
    expect(closed).toBe(true);
    expect(seen).toEqual([]);
  });
});

describe('gateway fast path, the backend in its process (BACKEND_IN_GATEWAY, decision 0194)', () => {
  const seen: Seen[] = [];
  let upstream: Server;
  let network: FastifyInstance;
  let inProcess: FastifyInstance;
  let networkBase: string;
  let inProcessBase: string;
  let handedOver = 0;

  beforeAll(async () => {
    upstream = component(seen);
    const url = await listenOn(upstream);
    // The same component's request handler, called in the gateway's process.
    const handle = upstream.listeners('request')[0] as InProcessHandler;
    const opts = corpusOptions(url);
    network = await buildGatewayApp(opts);
    inProcess = await buildGatewayApp({
      ...opts,
      inProcess: {
        backend: (req, res) => {
          handedOver++;
          handle(req, res);
        },
      },
    });
    networkBase = await network.listen({ host: '127.0.0.1', port: 0 });
    inProcessBase = await inProcess.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await closeNow(network);
    await closeNow(inProcess);
    await stopServer(upstream);
  });

  // (`slow`: in the process there is no network hop whose answer could be late; the backend's own limits apply.)
  it.each(CORPUS.filter(([, path]) => !path.includes('slow')))(
    '%s %s: the same answer, and the same request reaching the component, as over the network',
    async (method, path, headers, body) => {
      seen.length = 0;
      const before = handedOver;
      const viaNetwork = await send(networkBase, method, path, headers, body);
      const networkSeen = seen.splice(0);
      expect(handedOver).toBe(before);
      const viaProcess = await send(inProcessBase, method, path, headers, body);
      const processSeen = seen.splice(0);
      expect(comparable(viaProcess)).toEqual(comparable(viaNetwork));
      expect(processSeen.map(comparableSeen)).toEqual(networkSeen.map(comparableSeen));
      // The backend's plain requests were handed over; the other components' went over the network.
      expect(handedOver - before, 'handed over in the process').toBe(plainPath(path) && path.startsWith('/api/v1') ? 1 : 0);
    },
  );

  it("replaces what the client claims to be, and keeps hop-by-hop headers from the component's answer", async () => {
    seen.length = 0;
    const answer = await send(inProcessBase, 'GET', '/api/v1/hop', {
      connection: 'keep-alive, x-hop',
      'x-hop': 'for the gateway only',
      'x-forwarded-for': '10.9.9.9',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'evil.example',
      forwarded: 'for=10.9.9.9',
      'x-real-ip': '10.9.9.9',
    });
    const got = seen[0]!.headers;
    expect(got['x-hop']).toBeUndefined();
    expect(got.forwarded).toBeUndefined();
    expect(got['x-real-ip']).toBeUndefined();
    expect(got['x-forwarded-for']).toBe('127.0.0.1');
    expect(got['x-forwarded-proto']).toBe('http');
    expect(got['x-forwarded-host']).toBe(new URL(inProcessBase).host);
    expect(answer.headers['x-private']).toBeUndefined();
    expect(answer.headers['keep-alive']).not.toBe('timeout=5');
    expect(answer.headers['x-public']).toBe('yes');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['content-security-policy']).toBe("default-src 'none'; frame-ancestors 'none'; sandbox");
  });

  it('a Fastify app in the process (as the backend) sees the client as over the network, and reads a chunked body', async () => {
    // The backend's trust: X-Forwarded-* from loopback only (services/backend/src/app.ts).
    const backend = Fastify({ trustProxy: ['127.0.0.1', '::1'] });
    backend.get('/api/v1/who', (req, reply) => reply.send({ ip: req.ip, host: req.host, protocol: req.protocol }));
    backend.post('/api/v1/echo', (req, reply) => reply.send({ body: req.body }));
    backend.put('/api/v1/count', (req, reply) => reply.send({ bytes: req.body }));
    backend.removeAllContentTypeParsers();
    backend.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, JSON.parse(body as string) as unknown));
    // Any other body (or one without a type): its length.
    backend.addContentTypeParser('*', (_req, payload, done) => {
      let bytes = 0;
      payload.on('data', (c: Buffer) => (bytes += c.length));
      payload.on('end', () => done(null, bytes));
    });
    await backend.ready();
    const gateway = await buildGatewayApp({
      upstreams: { backend: 'http://127.0.0.1:1', clusterAdmin: 'http://127.0.0.1:1', bridge: 'http://127.0.0.1:1' },
      inProcess: { backend: (req, res) => backend.routing(req, res) },
    });
    const base = await gateway.listen({ host: '127.0.0.1', port: 0 });
    try {
      const who = await send(base, 'GET', '/api/v1/who', { 'x-forwarded-for': '10.9.9.9', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' });
      expect(JSON.parse(who.body)).toEqual({ ip: '127.0.0.1', host: new URL(base).host, protocol: 'http' });
      expect(who.headers['x-content-type-options']).toBe('nosniff');
      const echo = await send(base, 'POST', '/api/v1/echo', { 'content-type': 'application/json' }, [Buffer.from('{"a":'), Buffer.from('[1,2]}')]);
      expect(JSON.parse(echo.body)).toEqual({ body: { a: [1, 2] } });
      // A chunked body without a type is still a body (Fastify looks at Transfer-Encoding).
      const counted = await send(base, 'PUT', '/api/v1/count', {}, [Buffer.alloc(70_000, 1), Buffer.alloc(30_000, 2)]);
      expect(JSON.parse(counted.body)).toEqual({ bytes: 100_000 });
    } finally {
      await closeNow(gateway);
      await backend.close();
    }
  });
});

describe('gateway access log', () => {
  /** The access-log lines (`msg: request`) a gateway at `level` writes while `work` sends it requests. */
  async function linesOf(level: string, fastPath: boolean, work: (base: string, app: FastifyInstance) => Promise<void>): Promise<Record<string, unknown>[]> {
    const upstream = component([]);
    const url = await listenOn(upstream);
    const out = new PassThrough();
    const lines: Record<string, unknown>[] = [];
    out.on('data', (c: Buffer) => {
      for (const line of c.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
    });
    const app = await buildGatewayApp({
      upstreams: { backend: url, clusterAdmin: url, bridge: url },
      loggerInstance: createLogger({ level, format: 'json' }, 'gateway', out),
      accessLog: true,
      fastPath,
    });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      await work(base, app);
      // (A line is written when the answer's connection closes.)
      for (let i = 0; i < 50 && !lines.some((l) => l.msg === 'request'); i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 50));
      return lines.filter((l) => l.msg === 'request');
    } finally {
      await closeNow(app);
      await stopServer(upstream);
    }
  }
  const oneRequest = (fastPath: boolean) => async (base: string, app: FastifyInstance) => {
    expect((await send(base, 'GET', '/api/v1/objects?token=s3cr3t&limit=5')).status).toBe(200);
    expect(fastPathTaken(app)).toBe(fastPath ? 1 : 0);
  };

  it('logs 499 for a request whose client went away before the answer (it said 200)', async () => {
    const lines = await linesOf('info', true, async (base) => {
      await expect(fetch(`${base}/api/v1/slow`, { signal: AbortSignal.timeout(200) })).rejects.toThrow();
    });
    expect(lines).toMatchObject([{ method: 'GET', url: '/api/v1/slow', status: 499 }]);
  });

  it.each([true, false])('writes one line per request at info, the secret redacted, none at warn (fast path: %s)', async (fastPath) => {
    const [line, ...more] = await linesOf('info', fastPath, oneRequest(fastPath));
    expect(more).toEqual([]);
    expect(line).toMatchObject({ method: 'GET', status: 200 });
    expect(line!.url).toMatch(/^\/api\/v1\/objects\?token=[^&]+&limit=5$/);
    expect(JSON.stringify(line)).not.toContain('s3cr3t');
    expect(typeof line!.ms).toBe('number');
    expect(await linesOf('warn', fastPath, oneRequest(fastPath))).toEqual([]);
  });
});

describe('gateway fast path, a long answer', () => {
  /** A component writing `total` bytes as fast as the gateway takes them; `written` counts what it got rid of. */
  function streaming(total: number) {
    const state = { written: 0, closedEarly: false, done: false };
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      const chunk = Buffer.alloc(64 * 1024, 1);
      const more = () => {
        while (state.written < total) {
          state.written += chunk.length;
          if (!res.write(chunk)) return res.once('drain', more);
        }
        state.done = true;
        res.end();
      };
      res.on('close', () => {
        if (!res.writableFinished) state.closedEarly = true;
      });
      more();
    });
    return { server, state };
  }
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('holds the component back while the client does not read (no buffering of the whole answer), then delivers every byte', async () => {
    const total = 256 * MiB;
    const { server, state } = streaming(total);
    const url = await listenOn(server);
    const app = await buildGatewayApp({ upstreams: { backend: url, clusterAdmin: url, bridge: url } });
    const base = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    try {
      const received = await new Promise<number>((resolve, reject) => {
        const req = request({ host: base.hostname, port: base.port, path: '/api/v1/big', agent: false }, (res) => {
          res.pause();
          void (async () => {
            await wait(1000);
            // Socket buffers and stream marks on both hops: some MiB, far from the whole answer.
            expect(state.written).toBeLessThan(64 * MiB);
            expect(state.done).toBe(false);
            let bytes = 0;
            res.on('data', (c: Buffer) => (bytes += c.length));
            res.on('end', () => resolve(bytes));
            res.resume();
          })().catch(reject);
        });
        req.on('error', reject);
        req.end();
      });
      expect(received).toBe(total);
      expect(fastPathTaken(app)).toBe(1);
    } finally {
      await closeNow(app);
      await stopServer(server);
    }
  });

  it('stops the request upstream when the client goes away in the middle of the answer', async () => {
    const { server, state } = streaming(1024 * MiB);
    const url = await listenOn(server);
    const app = await buildGatewayApp({ upstreams: { backend: url, clusterAdmin: url, bridge: url } });
    const base = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    try {
      await new Promise<void>((resolve) => {
        const req = request({ host: base.hostname, port: base.port, path: '/api/v1/big', agent: false }, (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => {
            bytes += c.length;
            if (bytes > 4 * MiB) {
              req.destroy();
              resolve();
            }
          });
        });
        req.on('error', () => undefined);
        req.end();
      });
      for (let i = 0; i < 100 && !state.closedEarly; i++) await wait(20);
      expect(state.closedEarly).toBe(true);
      expect(state.done).toBe(false);
      expect(fastPathTaken(app)).toBe(1);
    } finally {
      await closeNow(app);
      await stopServer(server);
    }
  });
});

describe('gateway fast path, several instances', () => {
  it('sends a small body to another instance when the first is gone', async () => {
    const seen: Seen[] = [];
    const live = component(seen);
    const liveUrl = await listenOn(live);
    const dead = createServer();
    const deadUrl = await listenOn(dead);
    await stopServer(dead);
    const app = await buildGatewayApp({ upstreams: { backend: [deadUrl, liveUrl], clusterAdmin: liveUrl, bridge: liveUrl } });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      for (let i = 0; i < 4; i++) {
        const answer = await send(base, 'POST', '/api/v1/auth/login', { 'content-type': 'application/json' }, Buffer.from(`{"n":${i}}`));
        expect(answer.status).toBe(200);
      }
      expect(seen.map((s) => s.bytes)).toEqual([7, 7, 7, 7]);
      expect(fastPathTaken(app)).toBe(4);
    } finally {
      await closeNow(app);
      await stopServer(live);
    }
  });
});
