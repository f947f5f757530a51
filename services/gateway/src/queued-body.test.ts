// An upload waiting for a connection of a component's pool whose client goes away: the gateway
// lives on (it died of the body stream's unheard error, and every user's connections with it).
import { createServer, request, type ClientRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngress, type Ingress } from './ingress-testing.js';
import { UPSTREAMS } from './routes.js';

describe('an upload queued for a full pool whose client goes away', () => {
  let upstream: Server;
  let gateway: Ingress;
  const held: IncomingMessage[] = [];
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    // The backend: holds every upload (reads it, never answers), answers anything else.
    upstream = createServer((req, res) => {
      if (req.method === 'PUT') {
        held.push(req);
        req.resume();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    gateway = await startIngress('gateway', { upstreams: { backend: url, clusterAdmin: url, bridge: url }, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await gateway?.close();
    upstream?.closeAllConnections();
    await new Promise((r) => upstream?.close(r));
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
