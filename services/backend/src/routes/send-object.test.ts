import { request } from 'node:http';
import { Readable } from 'node:stream';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObjectDto, WorkspaceFiles } from '@codeagent/files';
import { DOWNLOADS_PER_USER, sendObject } from './data-resources.js';

const MiB = 1024 * 1024;
const object: ObjectDto = {
  path: 'big.bin',
  size: 2 * MiB,
  sha256: 'a'.repeat(64),
  content_type: 'application/octet-stream',
  version_id: '00000000-0000-4000-8000-000000000000',
  updated_at: '2026-11-28T00:00:00.000Z',
  updated_by: null,
};
const files = { open: () => Promise.resolve({ body: Readable.from([Buffer.alloc(2 * MiB)]), size: 2 * MiB }) } as unknown as WorkspaceFiles;

/**
 * A download's place among DOWNLOADS_PER_USER is given back when its response closes, also when
 * the client left while the request still waited (for the token check, the membership, the
 * object's row) and the response had closed before the place was taken.
 */
describe('the places of large downloads', () => {
  const app = Fastify();
  let gate!: () => void;
  let opened = new Promise<void>((r) => (gate = r));
  let base: string;
  beforeAll(async () => {
    app.addHook('onRequest', (req, _reply, done) => {
      (req as unknown as { user: { id: string } }).user = { id: 'u1' };
      done();
    });
    app.get('/held', async (req, reply) => {
      await opened; // the database, slow
      return sendObject(req, reply, files, 'ws', 'big.bin', object);
    });
    app.get('/now', async (req, reply) => sendObject(req, reply, files, 'ws', 'big.bin', object));
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app.close();
  });

  it('a client gone before its download started gives its place back', async () => {
    const u = new URL(`${base}/held`);
    const gone = Array.from(
      { length: DOWNLOADS_PER_USER + 4 },
      () =>
        new Promise<void>((resolve) => {
          const req = request({ host: u.hostname, port: u.port, path: u.pathname, agent: false });
          req.on('error', () => resolve());
          req.end();
          setTimeout(() => {
            req.destroy();
            resolve();
          }, 100);
        }),
    );
    await Promise.all(gone);
    await new Promise((r) => setTimeout(r, 100));
    // Every one of them reaches sendObject only now, its response closed already.
    gate();
    await new Promise((r) => setTimeout(r, 300));
    const res = await fetch(`${base}/now`);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(2 * MiB);
    opened = Promise.resolve();
  });
});
