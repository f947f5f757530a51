import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGRESSES, startIngress, type Ingress } from './ingress-testing.js';

function listenOn(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

/** A stand-in backend: echoes what it received, streams, or hangs, depending on the path. */
function fakeUpstream(): Server {
  return createServer((req, res) => {
    if (req.url?.startsWith('/api/v1/hang')) return; // never answers
    if (req.url?.startsWith('/api/v1/first-chunk')) {
      // Answers as soon as the first body chunk arrives: only possible if the gateway streams.
      req.once('data', (chunk: Buffer) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(`first chunk of ${chunk.length} bytes`);
        req.resume();
      });
      return;
    }
    if (req.url?.startsWith('/api/v1/count')) {
      let n = 0;
      req.on('data', (c: Buffer) => (n += c.length));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ bytes: n }));
      });
      return;
    }
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
  });
}

// The same cases through the gateway and through nginx with the rendered configuration (issue 18).
describe.each(INGRESSES)('ingress routing through %s', (kind) => {
  let upstream: Server;
  let closedPort: string;
  let gateway: Ingress;
  let base: string;

  beforeAll(async () => {
    upstream = fakeUpstream();
    const upstreamUrl = await listenOn(upstream);
    const closed = createServer();
    closedPort = await listenOn(closed);
    await new Promise((r) => closed.close(r));
    gateway = await startIngress(kind, {
      upstreams: { backend: upstreamUrl, clusterAdmin: closedPort, bridge: closedPort },
      timeoutMs: 500,
    });
    base = gateway.base;
  });
  afterAll(async () => {
    await gateway.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  it('routes /api/v1/* to the backend with method, path, query and body intact', async () => {
    const res = await fetch(`${base}/api/v1/platform/users?limit=5`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-upstream')).toBe('yes');
    const seen = (await res.json()) as { method: string; url: string; body: string };
    expect(seen).toMatchObject({ method: 'POST', url: '/api/v1/platform/users?limit=5', body: '{"a":1}' });
  });

  it('passes x-request-id through, makes one when missing, and sets x-forwarded-*', async () => {
    const given = await fetch(`${base}/api/v1/echo`, { headers: { 'x-request-id': 'req-42', host: 'platform.example' } });
    expect(given.headers.get('x-request-id')).toBe('req-42');
    const seen = (await given.json()) as { headers: IncomingHttpHeaders };
    expect(seen.headers['x-request-id']).toBe('req-42');
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-host']).toBeTruthy();

    const made = await fetch(`${base}/api/v1/echo`);
    const id = made.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(((await made.json()) as { headers: IncomingHttpHeaders }).headers['x-request-id']).toBe(id);
  });

  it('streams request bodies: the upstream answers after the first chunks, before the upload ends', async () => {
    const url = new URL(`${base}/api/v1/first-chunk`);
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'PUT', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => {
          req.destroy();
          resolve(text);
        });
      });
      req.on('error', () => undefined);
      // (The gateway reads a chunked body's first 64 KiB before it sends it on: more than that.)
      req.write(Buffer.alloc(128 * 1024, 1));
      // The rest of the body is never sent: a buffering proxy would wait forever.
      setTimeout(() => reject(new Error('no answer while the upload was still open: the gateway buffers')), 3000).unref();
    });
    expect(answer).toMatch(/^first chunk of \d+ bytes$/);
  });

  it('a chunked body that trickles reaches the component only once it is whole (or larger than 64 KiB): a slow client holds none of its connections', async () => {
    if (kind !== 'gateway') return; // nginx streams every body (proxy_request_buffering off)
    const url = new URL(`${base}/api/v1/first-chunk`);
    let answered = false;
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'PUT', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
      answered = true;
      res.resume();
    });
    req.on('error', () => undefined);
    req.write('a few bytes');
    await new Promise((r) => setTimeout(r, 300));
    // Sent on at once, the component would have answered after this first chunk.
    expect(answered).toBe(false);
    req.destroy();
    // A whole small chunked body goes through as before.
    const whole = await fetch(`${base}/api/v1/echo`, {
      method: 'POST',
      body: new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('chunked '));
          c.enqueue(new TextEncoder().encode('and whole'));
          c.close();
        },
      }),
      duplex: 'half',
    });
    expect(((await whole.json()) as { body: string }).body).toBe('chunked and whole');
  });

  it('carries a 64 MiB body through without loss', async () => {
    const size = 64 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, 7);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= size) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${base}/api/v1/count`, { method: 'PUT', body, duplex: 'half' });
    expect(await res.json()).toEqual({ bytes: size });
  });

  it('answers 502 bad_gateway when a component is down', async () => {
    for (const path of ['/admin/clusters', '/mcp', '/codeagent-bridge/hello']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(502);
      expect(await res.json()).toMatchObject({ error: 'bad_gateway' });
    }
  });

  it('answers 504 when the component does not answer in time', async () => {
    const res = await fetch(`${base}/api/v1/hang`);
    expect(res.status).toBe(504);
    expect(((await res.json()) as { error: string }).error).toBe('gateway_timeout');
  });

  it('never routes /internal/*, with or without a token, whatever the method', async () => {
    for (const method of ['GET', 'POST', 'PUT', 'DELETE']) {
      for (const path of ['/internal/v1/objects', '/internal/v1/uploads', '/internal', '/internal/v1/objects?area=workspace&key=a']) {
        const res = await fetch(`${base}${path}`, { method, headers: { 'x-internal-service-token': 'anything' } });
        expect(res.status, `${method} ${path}`).toBe(404);
      }
    }
  });

  it('answers unknown routes with 404 not_found JSON and serves the start page at /', async () => {
    const res = await fetch(`${base}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toBe('not_found');
    const home = await fetch(`${base}/`);
    expect(home.status).toBe(200);
    expect(home.headers.get('content-type')).toMatch(/text\/html/);
  });
});
