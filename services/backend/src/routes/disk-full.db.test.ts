// A full disk under the workspace storage (found by uploading to a platform whose storage
// directory sat on a 20 MiB file system): every upload route answered 500, and the form upload
// blamed the client (400 "malformed form"). Now 507 `insufficient_storage`, nothing stored,
// nothing left behind, the old content intact. A real full file system (tmpfs), so root only.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalObjectStore } from '@codeagent/storage';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from '../testing.js';

const isRoot = process.getuid?.() === 0;
const MiB = 1024 * 1024;

/** Every file below `dir` (the store's objects and any temporary file it left). */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

describe.skipIf(!isRoot)('uploads to a full disk: 507, nothing stored', () => {
  let dir: string;
  let b: TestBackend;
  let editor: { id: string; token: string };
  let ws: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'codeagent-full-disk-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir]);
    b = await startTestBackend({ store: new LocalObjectStore(dir), maxUploadBytes: 64 * MiB });
    editor = await createAndLogin(b, 'full@example.com');
    ws = await createWorkspace(b, 'w');
    await addMembers(b, ws, [[editor, 'editor']]);
  });
  afterAll(async () => {
    await b?.close();
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('PUT, the form upload and WebDAV PUT each answer 507 and keep what was there', async () => {
    const object = `/api/v1/data-resources/${ws}/objects/keep.txt`;
    expect((await b.app.inject({ method: 'PUT', url: object, headers: bearer(editor.token), payload: 'original' })).statusCode).toBe(201);
    const before = filesBelow(dir);
    const big = Buffer.alloc(8 * MiB, 7);

    const put = await b.app.inject({
      method: 'PUT',
      url: object,
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      payload: big,
    });
    const boundary = 'xXbOuNdArYXx';
    const form = Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="path"\r\n\r\nform.bin\r\n`),
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="form.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`),
      big,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const upload = await b.app.inject({
      method: 'POST',
      url: `/api/v1/data-resources/${ws}/uploads`,
      headers: { ...bearer(editor.token), 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: form,
    });
    const dav = await b.app.inject({
      method: 'PUT',
      url: `/api/v1/dav/${ws}/dav.bin`,
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      payload: big,
    });

    for (const res of [put, upload, dav]) {
      expect(res.statusCode, res.body).toBe(507);
      const body = res.json<{ error: string; message: string }>();
      expect(body.error).toBe('insufficient_storage');
      expect(body.message).toMatch(/disk is full: nothing was stored/);
    }
    const read = await b.app.inject({ method: 'GET', url: object, headers: bearer(editor.token) });
    expect(read.body).toBe('original');
    // No partial file is left to fill the disk: the store holds what it held before.
    expect(filesBelow(dir)).toEqual(before);
    const free = statfsSync(dir);
    expect(free.bavail * free.bsize).toBeGreaterThan(3 * MiB);
    const listed = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects`, headers: bearer(editor.token) });
    expect(listed.json<{ items: { path: string }[] }>().items.map((o) => o.path)).toEqual(['keep.txt']);
    // And the next write that fits is stored.
    expect((await b.app.inject({ method: 'PUT', url: object, headers: bearer(editor.token), payload: 'after' })).statusCode).toBe(200);
  });
});
