import { request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { serviceKit } from './plugin.js';
import { lingerOnEarlyAnswers } from './linger.js';
import { UnauthorizedError } from './errors.js';

interface Answer {
  status: number;
  body: string;
}

/** Node's own http client, which loses an early answer when the server resets the connection (EPIPE). */
function post(base: string, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...headers },
      },
      (res: IncomingMessage) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('answers before the body was read (413, 401) reach the client', () => {
  let app: FastifyInstance;
  let base: string;
  const big = Buffer.alloc(4 * 1024 * 1024, 0x61);

  beforeAll(async () => {
    app = Fastify({ bodyLimit: 1024 * 1024 });
    await app.register(serviceKit);
    app.post('/echo', (req) => ({ got: JSON.stringify(req.body).length }));
    app.post('/private', { onRequest: async () => Promise.reject(new UnauthorizedError()) }, () => ({ never: true }));
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => app.close());

  it('answers 413 payload_too_large, with the limit, to a client still sending 4 MiB', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await post(base, '/echo', big);
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body)).toEqual({ error: 'payload_too_large', message: 'request body is larger than the 1048576 bytes this route accepts' });
    }
  });

  it('answers 413 to a chunked body that passes the limit while it streams', async () => {
    const res = await fetch(`${base}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([big]).stream(),
      duplex: 'half',
    });
    expect(res.status).toBe(413);
  });

  it('answers 401 to a client still sending its body', async () => {
    const res = await post(base, '/private', big);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ error: 'unauthorized' });
  });

  it('keeps the connection usable: the rest is discarded and the next request on it is answered', async () => {
    const port = Number(new URL(base).port);
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    const rest = Buffer.alloc(2 * 1024 * 1024, 0x61);
    socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${rest.length}\r\n\r\n`);
    socket.write(rest);
    socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{"a":1}');
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    expect(statuses).toEqual(['413', '200']);
    expect(received).toContain('{"got":7}');
  });
});

describe('the discarding is bounded', () => {
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    app = Fastify();
    lingerOnEarlyAnswers(app, { idleMs: 100, lingerMs: 1000 });
    app.post('/early', { onRequest: async (_req, reply) => reply.code(403).send('no') }, () => 'never');
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => app.close());

  it('closes a connection whose client stops sending the rest of a refused body', async () => {
    const socket = connect(Number(new URL(base).port), '127.0.0.1');
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.write('POST /early HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\nonly a little');
    // The server gives up on the silent rest and closes; without the bound this would hang.
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    expect(received).toMatch(/^HTTP\/1\.1 403/);
  });

  it('closes a connection whose client keeps sending for longer than the linger time', async () => {
    const socket = connect(Number(new URL(base).port), '127.0.0.1');
    let received = '';
    socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.write('POST /early HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
    const chunk = `${(16).toString(16)}\r\n${'x'.repeat(16)}\r\n`;
    const drip = setInterval(() => socket.writable && socket.write(chunk), 20);
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    clearInterval(drip);
    expect(received).toMatch(/^HTTP\/1\.1 403/);
  });
});
