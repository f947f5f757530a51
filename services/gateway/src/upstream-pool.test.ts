import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamPool } from './upstream-pool.js';

describe('UpstreamPool.close', () => {
  let server: Server;
  let url: string;
  let received = 0;
  beforeAll(async () => {
    // An upstream that reads the request and never answers.
    server = createServer(() => void received++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('aborts a request still in flight after the grace period instead of waiting for it', async () => {
    const pool = new UpstreamPool({ name: 'backend', urls: [url], healthPath: '/livez', connections: 1, timeoutMs: 600_000 });
    const pending = pool.instances[0]!.pool.request({ path: '/never', method: 'GET' });
    const outcome = pending.then(
      () => 'answered',
      (err: Error) => err.name,
    );
    // Wait until the request has reached the upstream.
    await new Promise<void>((resolve) => {
      const poll = () => (received > 0 ? resolve() : setTimeout(poll, 10));
      poll();
    });
    await pool.close(50);
    expect(await outcome).not.toBe('answered');
  });

  it('closes at once when nothing is in flight', async () => {
    const pool = new UpstreamPool({ name: 'backend', urls: [url], healthPath: '/livez', connections: 1, timeoutMs: 600_000 });
    await pool.close();
    expect(pool.instances[0]!.pool.closed).toBe(true);
  });
});
