import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { Agent, fetch } from 'undici';
import type { ErrorBody } from '@codeagent/service-kit';
import { addMembers, bearer, createAndLogin, createWorkspace, disableUser, startTestBackend, type TestBackend } from '../testing.js';
import { ARCHIVE_MAX_FILES, ARCHIVES_PER_USER, entryName } from './archive.js';

/** The entries of a zip (Python's zipfile, an implementation other than the one that wrote it): name → content (base64) and how it was stored. */
function unzip(zip: Buffer): Record<string, { data: string; deflated: boolean; dir: boolean }> {
  const script = `
import base64, io, json, sys, zipfile
z = zipfile.ZipFile(io.BytesIO(sys.stdin.buffer.read()))
assert z.testzip() is None
print(json.dumps({i.filename: {"data": base64.b64encode(z.read(i)).decode(), "deflated": i.compress_type == zipfile.ZIP_DEFLATED, "dir": i.is_dir()} for i in z.infolist()}))`;
  return JSON.parse(execFileSync('python3', ['-c', script], { input: zip }).toString()) as Record<string, { data: string; deflated: boolean; dir: boolean }>;
}

const text = (entry: { data: string } | undefined) => Buffer.from(entry?.data ?? '', 'base64').toString();

describe(`a folder downloaded as a zip (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  const binary = randomBytes(100_000);
  beforeAll(async () => {
    // (Room for a file large enough to keep a download under way while the client reads nothing.)
    b = await startTestBackend({ maxUploadBytes: 64 * 1024 * 1024 });
    editor = await createAndLogin(b, 'zip-editor@example.com');
    viewer = await createAndLogin(b, 'zip-viewer@example.com');
    stranger = await createAndLogin(b, 'zip-stranger@example.com');
    ws = await createWorkspace(b, 'Quarterly numbers');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    const put = async (path: string, payload: string | Buffer, type = 'application/octet-stream') => {
      const res = await b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${ws}/objects/${encodeURI(path)}`,
        headers: { ...bearer(editor.token), 'content-type': type },
        payload,
      });
      expect(res.statusCode, res.body).toBe(201);
    };
    await put('reports/q1.csv', 'region,total\n'.repeat(2000), 'text/csv');
    await put('reports/deep/data.bin', binary);
    // A first segment an unzip on Windows would take for a drive.
    await put('reports/C:/notes.txt', 'not a drive', 'text/plain');
    await put('private/elsewhere.txt', 'not in the reports');
    const mkcol = await b.app.inject({ method: 'MKCOL', url: `/api/v1/dav/${ws}/reports/empty`, headers: bearer(editor.token) });
    expect(mkcol.statusCode).toBe(201);
  });
  afterAll(async () => {
    await b.close();
  });

  const archive = (token: string | undefined, query: string, method: 'GET' | 'HEAD' = 'GET') =>
    b.app.inject({ method, url: `/api/v1/data-resources/${ws}/archive${query}`, headers: token === undefined ? {} : bearer(token) });

  it('a viewer downloads a folder: its files below it, text deflated, the rest stored, empty folders kept, nothing from outside it', async () => {
    const res = await archive(viewer.token, '?prefix=reports');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/zip');
    expect(res.headers['content-disposition']).toBe(`attachment; filename="reports.zip"; filename*=UTF-8''reports.zip`);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    const entries = unzip(res.rawPayload);
    expect(Object.keys(entries).sort()).toEqual(['C_/notes.txt', 'deep/data.bin', 'empty/', 'q1.csv']);
    expect(text(entries['q1.csv'])).toBe('region,total\n'.repeat(2000));
    expect(entries['q1.csv']!.deflated).toBe(true);
    expect(Buffer.from(entries['deep/data.bin']!.data, 'base64').equals(binary)).toBe(true);
    expect(entries['deep/data.bin']!.deflated).toBe(false);
    expect(entries['empty/']!.dir).toBe(true);
    expect(text(entries['C_/notes.txt'])).toBe('not a drive');
    // The text compressed: the archive is smaller than what it holds.
    expect(res.rawPayload.length).toBeLessThan(binary.length + 2000 * 13);
  });

  it('HEAD says what the GET would answer, without an archive: the headers, or the status of its refusal', async () => {
    const ok = await archive(viewer.token, '?prefix=reports', 'HEAD');
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toBe('application/zip');
    expect(ok.headers['content-disposition']).toContain('filename="reports.zip"');
    expect(ok.rawPayload.length).toBe(0);
    expect((await archive(viewer.token, '?prefix=nothing/', 'HEAD')).statusCode).toBe(404);
    expect((await archive(viewer.token, '?prefix=../etc/', 'HEAD')).statusCode).toBe(400);
    expect((await archive(stranger.token, '?prefix=reports/', 'HEAD')).statusCode).toBe(404);
    expect((await archive(undefined, '?prefix=reports/', 'HEAD')).statusCode).toBe(401);
  });

  it('the whole workspace is named after it and holds every folder', async () => {
    const res = await archive(editor.token, '');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-disposition']).toContain('filename="Quarterly numbers.zip"');
    expect(Object.keys(unzip(res.rawPayload)).sort()).toEqual([
      'private/elsewhere.txt',
      // (Only a first segment reads as a drive.)
      'reports/C:/notes.txt',
      'reports/deep/data.bin',
      'reports/empty/',
      'reports/q1.csv',
    ]);
  });

  it('refuses what it cannot give in words: nothing there 404, a bad prefix 400, more than the limit 400 naming the way out', async () => {
    const none = await archive(viewer.token, '?prefix=nothing/');
    expect(none.statusCode).toBe(404);
    expect(none.json<ErrorBody>().message).toContain('no files under nothing/');
    const bad = await archive(viewer.token, '?prefix=../etc/');
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().fields?.prefix).toContain('..');
    // One file past the limit (rows only: the archive is refused before any content is read).
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type, updated_at)
      SELECT ${ws}, 'huge/f' || i, gen_random_uuid(), 1, repeat('0', 64), 'text/plain', now() FROM generate_series(1, ${ARCHIVE_MAX_FILES + 1}) i`.execute(
      b.t.database.db,
    );
    const huge = await archive(viewer.token, '?prefix=huge/');
    expect(huge.statusCode).toBe(400);
    expect((await archive(viewer.token, '?prefix=huge/', 'HEAD')).statusCode).toBe(400);
    expect(huge.json<ErrorBody>().message).toContain(`holds more than ${ARCHIVE_MAX_FILES} files: download its sub-folders one by one, or copy it over WebDAV`);
    await sql`DELETE FROM objects WHERE workspace_id = ${ws} AND path LIKE 'huge/%'`.execute(b.t.database.db);
  });

  it('a non-member gets 404 and no content, a logged-out caller 401', async () => {
    const res = await archive(stranger.token, '?prefix=reports/');
    expect(res.statusCode).toBe(404);
    expect(res.rawPayload.includes('region,total')).toBe(false);
    expect((await archive(undefined, '?prefix=reports/')).statusCode).toBe(401);
  });

  it('a member whose account is disabled downloads nothing more (401)', async () => {
    const leaving = await createAndLogin(b, 'zip-leaving@example.com');
    await addMembers(b, ws, [[leaving, 'viewer']]);
    expect((await archive(leaving.token, '?prefix=reports/')).statusCode).toBe(200);
    await disableUser(b, leaving.id);
    const res = await archive(leaving.token, '?prefix=reports/');
    expect(res.statusCode).toBe(401);
    expect(res.rawPayload.includes('region,total')).toBe(false);
  });

  it(`a user downloads at most ${ARCHIVES_PER_USER} archives at once (429 beyond); one that ends, or is cut off, frees its place`, async () => {
    const big = await b.app.inject({
      method: 'PUT',
      url: `/api/v1/data-resources/${ws}/objects/big/blob.bin`,
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      payload: randomBytes(48 * 1024 * 1024),
    });
    expect(big.statusCode).toBe(201);
    const url = `${await b.app.listen({ host: '127.0.0.1', port: 0 })}/api/v1/data-resources/${ws}/archive?prefix=big/`;
    // The test's own connections, all closed at its end (the backend's close waits for its clients).
    const dispatcher = new Agent();
    const open = async (token = viewer.token) => {
      const controller = new AbortController();
      const res = await fetch(url, { headers: bearer(token), signal: controller.signal, dispatcher });
      return { res, abort: () => controller.abort() };
    };
    // Two downloads under way, their bodies not read: the server waits on each client.
    const held = [await open(), await open()];
    for (const h of held) expect(h.res.status).toBe(200);
    const third = await open();
    expect(third.res.status).toBe(429);
    expect(((await third.res.json()) as ErrorBody).message).toContain('wait until one has finished');
    // HEAD says so too, and takes no place: asked while one is free, the GET still gets it.
    const head = (token: string) => fetch(url, { method: 'HEAD', headers: bearer(token), dispatcher }).then((r) => r.status);
    expect(await head(viewer.token)).toBe(429);
    // Another user is not held back by this one.
    const editors = await fetch(url, { headers: bearer(editor.token), dispatcher });
    expect(editors.status).toBe(200);
    expect((await editors.arrayBuffer()).byteLength).toBeGreaterThan(48 * 1024 * 1024);
    // Requests sent together cannot all pass the check before any of them takes its place.
    const burst = await Promise.all(Array.from({ length: 6 }, () => open(editor.token)));
    expect(burst.map((o) => o.res.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
    for (const o of burst) o.abort();
    // One read to the end and one cut off: both places free again.
    expect((await held[0]!.res.arrayBuffer()).byteLength).toBeGreaterThan(48 * 1024 * 1024);
    expect(await Promise.all([head(viewer.token), head(viewer.token), head(viewer.token)])).toEqual([200, 200, 200]);
    const afterHeads = await open();
    expect(afterHeads.res.status).toBe(200);
    afterHeads.abort();
    held[1]!.abort();
    await expect
      .poll(async () => {
        const again = await open();
        again.abort();
        return again.res.status;
      })
      .toBe(200);
    await dispatcher.destroy();
  }, 60_000);

  it('names inside the archive never read as a drive', () => {
    expect(entryName('C:/x')).toBe('C_/x');
    expect(entryName('d:')).toBe('d_');
    expect(entryName('a/C:/x')).toBe('a/C:/x');
    expect(entryName('plain.txt')).toBe('plain.txt');
  });
});
