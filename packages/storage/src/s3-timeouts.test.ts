import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore, S3_TIMEOUTS } from './s3.js';

/** An S3 endpoint that takes connections and never answers (a hung server, a black-holed path). */
describe('S3 requests end when the server does not answer', () => {
  let silent: Server;
  const held: Socket[] = [];
  let endpoint: string;
  beforeAll(async () => {
    silent = createServer((socket) => {
      held.push(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
  });

  const store = (timeouts?: { connectMs: number; idleMs: number }) =>
    new S3ObjectStore({
      client: { endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'k', secretAccessKey: 's' }, maxAttempts: 1 },
      buckets: { workspace: 'w', version: 'v', run_log: 'r', trash: 't' },
      ...(timeouts ? { timeouts } : {}),
    });

  it('a request that gets no byte for the idle limit fails (it waited for good)', async () => {
    const started = Date.now();
    await expect(store({ connectMs: 1000, idleMs: 500 }).head('workspace', 'a.txt')).rejects.toThrow(/timed out|TimeoutError|inactivity/i);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('by default: 10 s to connect, 10 minutes without a byte', () => {
    expect(S3_TIMEOUTS).toEqual({ connectMs: 10_000, idleMs: 600_000 });
  });
});
