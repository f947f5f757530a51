import { request, type ClientRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from '../testing.js';
import { LARGE_BODIES_PER_USER as UPLOADS_PER_USER, largeBodiesUnderWay as uploadsUnderWay } from './large-bodies.js';

/**
 * Uploads under way per user (decision 0256): each holds a connection between the gateway and
 * the backend while its body arrives, so one editor's slow uploads could hold them all.
 */
describe(`uploads under way per user (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let base: string;
  let ws: string;
  let slow: { id: string; token: string };
  let other: { id: string; token: string };
  beforeAll(async () => {
    b = await startTestBackend({ maxUploadBytes: 64 * 1024 * 1024 });
    base = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    ws = await createWorkspace(b, 'uploads');
    slow = await createAndLogin(b, 'slow-writer@example.com');
    other = await createAndLogin(b, 'other-writer@example.com');
    await addMembers(b, ws, [
      [slow, 'editor'],
      [other, 'editor'],
    ]);
  }, 60_000);
  afterAll(async () => {
    await b.close();
  });

  /** An upload that sends 100 KiB of the 10 MB it announces, then waits. */
  const hold = (token: string, i: number): ClientRequest => {
    const url = new URL(`${base}/api/v1/data-resources/${ws}/objects/slow-${i}.bin`);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'PUT', headers: { ...bearer(token), 'content-length': 10_000_000 } });
    req.on('error', () => undefined);
    req.write(Buffer.alloc(100 * 1024, 1));
    return req;
  };
  /** A whole upload of 100 KiB: counted (more than the 64 KiB the gateway reads first), but over at once. */
  const whole = (token: string, path: string, method = 'PUT', prefix = 'data-resources') =>
    fetch(`${base}/api/v1/${prefix}/${ws}/${prefix === 'dav' ? '' : 'objects/'}${path}`, {
      method,
      body: Buffer.alloc(100 * 1024, 2),
      headers: bearer(token),
    });

  it(`takes ${UPLOADS_PER_USER} at once from one user, refuses more with 429 before reading them, and none of another user's`, async () => {
    const held = Array.from({ length: UPLOADS_PER_USER }, (_, i) => hold(slow.token, i));
    try {
      // Once every held upload has its place, a whole small one is refused at once.
      for (let i = 0; uploadsUnderWay(slow.id) < UPLOADS_PER_USER; i++) {
        if (i > 200) throw new Error(`only ${uploadsUnderWay(slow.id)} uploads reached the backend`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const refused = await whole(slow.token, 'probe.txt');
      expect(refused.status).toBe(429);
      expect(await refused.json()).toMatchObject({
        error: 'too_many_requests',
        message: expect.stringMatching(/uploads or other large requests under way/) as unknown,
      });
      // WebDAV's PUT and the form upload count too.
      expect((await whole(slow.token, 'dav.txt', 'PUT', 'dav')).status).toBe(429);
      const form = new FormData();
      form.append('path', 'form.txt');
      form.append('file', new Blob([Buffer.alloc(100 * 1024, 3)]), 'form.txt');
      expect((await fetch(`${base}/api/v1/data-resources/${ws}/uploads`, { method: 'POST', body: form, headers: bearer(slow.token) })).status).toBe(429);
      // Small uploads (sent on whole by the gateway) are not counted; another user is not held back.
      expect(
        (
          await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              fetch(`${base}/api/v1/data-resources/${ws}/objects/small-${i}.txt`, { method: 'PUT', body: 'small', headers: bearer(slow.token) }),
            ),
          )
        ).map((r) => r.status),
      ).toEqual(Array(20).fill(201));
      expect((await whole(other.token, 'theirs.txt')).status).toBe(201);
    } finally {
      for (const h of held) h.destroy();
    }
    // Ended uploads give their places back (the content of none of them was stored).
    for (let i = 0; uploadsUnderWay(slow.id) > 0; i++) {
      if (i > 200) throw new Error(`${uploadsUnderWay(slow.id)} places are still taken`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await whole(slow.token, 'after.txt')).status).toBe(201);
    const stored = await fetch(`${base}/api/v1/data-resources/${ws}/objects/slow-0.bin`, { headers: bearer(slow.token) });
    expect(stored.status).toBe(404);
  }, 60_000);

  it('counts a slow large body to any route the same, a stranger’s to a workspace they are not in included', async () => {
    const stranger = await createAndLogin(b, 'stranger-writer@example.com');
    const slowJson = (): ClientRequest => {
      const url = new URL(`${base}/api/v1/workspaces/${ws}/runs`);
      const req = request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { ...bearer(stranger.token), 'content-type': 'application/json', 'content-length': 200_000 },
      });
      req.on('error', () => undefined);
      req.write('{"notebook_path": "x.ipynb", "parameters": {"a": "');
      return req;
    };
    const held = Array.from({ length: UPLOADS_PER_USER }, slowJson);
    try {
      for (let i = 0; uploadsUnderWay(stranger.id) < UPLOADS_PER_USER; i++) {
        if (i > 200) throw new Error(`only ${uploadsUnderWay(stranger.id)} requests reached the backend`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const more = await fetch(`${base}/api/v1/workspaces/${ws}/runs`, {
        method: 'POST',
        headers: { ...bearer(stranger.token), 'content-type': 'application/json' },
        body: JSON.stringify({ notebook_path: 'x.ipynb', parameters: { a: 'x'.repeat(100 * 1024) } }),
      });
      expect(more.status).toBe(429);
      // Small requests of theirs still pass (and are answered as ever: not a member, 404).
      expect((await fetch(`${base}/api/v1/workspaces/${ws}/runs`, { headers: bearer(stranger.token) })).status).toBe(404);
    } finally {
      for (const h of held) h.destroy();
    }
  });
});
