import { request, type ClientRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createAndLogin, startTestBackend, type TestBackend, type WorkspaceDto } from '../testing.js';
import { DOWNLOADS_PER_USER } from './data-resources.js';

/**
 * Downloads under way per user: each holds a connection between the gateway and the backend for
 * as long as the client reads, so a client that reads at a trickle could hold them all.
 */
describe(`downloads under way per user (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  const SIZE = 48 * 1024 * 1024; // far more than loopback's socket buffers: an unread download stays open
  let b: TestBackend;
  let base: string;
  let ws: string;
  let slow: { id: string; token: string };
  let other: { id: string; token: string };
  beforeAll(async () => {
    b = await startTestBackend({ maxUploadBytes: SIZE });
    base = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    ws = (
      await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'downloads' } })
    ).json<WorkspaceDto>().id;
    slow = await createAndLogin(b, 'slow-reader@example.com');
    other = await createAndLogin(b, 'other-reader@example.com');
    for (const [user, role] of [
      [slow, 'viewer'],
      [other, 'viewer'],
    ] as const) {
      await b.app.inject({
        method: 'POST',
        url: `/api/v1/platform/workspaces/${ws}/members`,
        headers: bearer(b.adminToken),
        payload: { user_id: user.id, role },
      });
    }
    const put = await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, {
      method: 'PUT',
      body: Buffer.alloc(SIZE, 1),
      headers: bearer(b.adminToken),
    });
    expect(put.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await b.close();
  });

  /** A download whose body is never read: it stays under way until destroyed. */
  const hold = (token: string) =>
    new Promise<{ status: number; req: ClientRequest }>((resolve, reject) => {
      const u = new URL(`${base}/api/v1/data-resources/${ws}/objects/big.bin`);
      const req = request({ host: u.hostname, port: u.port, path: u.pathname, agent: false, headers: bearer(token) }, (res) => {
        res.pause();
        resolve({ status: res.statusCode ?? 0, req });
      });
      req.on('error', () => undefined);
      req.once('error', reject);
      req.end();
    });

  it(`takes ${DOWNLOADS_PER_USER} at once from one user, refuses more with 429 while they last, and none of another user's`, async () => {
    const held = await Promise.all(Array.from({ length: DOWNLOADS_PER_USER }, () => hold(slow.token)));
    try {
      expect(held.map((h) => h.status)).toEqual(Array(DOWNLOADS_PER_USER).fill(200));
      const more = await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, { headers: bearer(slow.token) });
      expect(more.status).toBe(429);
      expect(await more.json()).toMatchObject({ error: 'too_many_requests', message: expect.stringMatching(/downloads under way/) as unknown });
      // Small reads are never counted: they free their connection at once.
      const small = await Promise.all(
        Array.from({ length: 40 }, () =>
          fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, { headers: { ...bearer(slow.token), range: 'bytes=0-1023' } }),
        ),
      );
      expect(small.map((r) => r.status)).toEqual(Array(40).fill(206));
      await Promise.all(small.map((r) => r.arrayBuffer()));
      // HEAD and a conditional GET that hits send nothing: not counted.
      expect((await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, { method: 'HEAD', headers: bearer(slow.token) })).status).toBe(200);
      // Another user is not held back.
      const theirs = await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, {
        headers: { ...bearer(other.token), range: `bytes=0-${2 * 1024 * 1024 - 1}` },
      });
      expect(theirs.status).toBe(206);
      expect((await theirs.arrayBuffer()).byteLength).toBe(2 * 1024 * 1024);
    } finally {
      for (const h of held) h.req.destroy();
    }
    // Closed downloads give their places back.
    for (let i = 0; i < 50; i++) {
      const again = await fetch(`${base}/api/v1/data-resources/${ws}/objects/big.bin`, {
        headers: { ...bearer(slow.token), range: `bytes=0-${2 * 1024 * 1024 - 1}` },
      });
      await again.arrayBuffer();
      if (again.status === 206) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the places of closed downloads were not given back');
  }, 60_000);
});
