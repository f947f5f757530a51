import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { readdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalObjectStore } from '@codeagent/storage';
import type { ErrorBody } from '@codeagent/service-kit';
import {
  INTERNAL_TOKEN,
  addMembers,
  bearer,
  createAndLogin,
  createWorkspace,
  startTestBackend,
  startTestGateway,
  type TestBackend,
  type TestGateway,
} from '../testing.js';

const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');

describe(`data resources (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  let backendUrl: string;
  let gateway: TestGateway['gateway'];
  let gatewayUrl: string;
  const MAX = 1024 * 1024;

  beforeAll(async () => {
    b = await startTestBackend({ maxUploadBytes: MAX });
    editor = await createAndLogin(b, 'ed@example.com');
    viewer = await createAndLogin(b, 'vi@example.com');
    stranger = await createAndLogin(b, 'st@example.com');
    ws = await createWorkspace(b, 'data');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    ({ gateway, url: gatewayUrl, backendUrl } = await startTestGateway(b));
  });
  afterAll(async () => {
    await gateway.close();
    await b.close();
  });

  const url = (rest: string) => `${gatewayUrl}/api/v1/data-resources/${ws}/${rest}`;
  const put = (path: string, body: string | Buffer, token = editor.token, type = 'text/plain') =>
    fetch(url(`objects/${path}`), { method: 'PUT', body, headers: { ...bearer(token), 'content-type': type } });
  const get = (rest: string, token = editor.token, headers: Record<string, string> = {}) => fetch(url(rest), { headers: { ...bearer(token), ...headers } });

  it('stores a raw body (201), replaces it (200) and keeps the replaced content as a version', async () => {
    const first = await put('notes/a.txt', 'first');
    expect(first.status).toBe(201);
    const o1 = (await first.json()) as Record<string, unknown>;
    expect(Object.keys(o1).sort()).toEqual(['content_type', 'path', 'sha256', 'size', 'updated_at', 'updated_by', 'version_id']);
    expect(o1).toMatchObject({ path: 'notes/a.txt', size: 5, sha256: sha('first'), content_type: 'text/plain', updated_by: editor.id });
    const second = await put('notes/a.txt', 'second!');
    expect(second.status).toBe(200);
    const o2 = (await second.json()) as { version_id: string };
    expect(o2.version_id).not.toBe(o1.version_id);

    const versions = (await (await get('versions/notes/a.txt')).json()) as { items: { version_id: string; current: boolean; size: number }[] };
    expect(versions.items.map((v) => [v.version_id, v.current])).toEqual([
      [o2.version_id, true],
      [o1.version_id, false],
    ]);
    const old = await get(`versions/notes/a.txt?version_id=${String(o1.version_id)}`);
    expect(await old.text()).toBe('first');

    const restored = await fetch(url('versions/notes/a.txt/restore'), {
      method: 'POST',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: JSON.stringify({ version_id: o1.version_id }),
    });
    expect(restored.status).toBe(200);
    expect(((await restored.json()) as { sha256: string }).sha256).toBe(sha('first'));
    expect(await (await get('objects/notes/a.txt')).text()).toBe('first');
    const after = (await (await get('versions/notes/a.txt')).json()) as { items: unknown[] };
    expect(after.items).toHaveLength(3);
    // In pages, like every list (decision 0208): one at a time, the current content first.
    const paged: string[] = [];
    let cursor = '';
    for (let n = 0; n < 5; n++) {
      const page = (await (await get(`versions/notes/a.txt?limit=1${cursor ? `&cursor=${cursor}` : ''}`)).json()) as {
        items: { version_id: string }[];
        next_cursor: string | null;
      };
      expect(page.items).toHaveLength(1);
      paged.push(page.items[0]!.version_id);
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    expect(paged).toEqual((after.items as { version_id: string }[]).map((v) => v.version_id));
    expect((await get('versions/notes/a.txt?cursor=bm9wZQ')).status).toBe(400);
    expect((await get('versions/notes/a.txt?limit=1001')).status).toBe(400);
    const missing = await fetch(url('versions/notes/a.txt/restore'), {
      method: 'POST',
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      body: JSON.stringify({ version_id: '00000000-0000-0000-0000-000000000000' }),
    });
    expect(missing.status).toBe(404);
  });

  it('serves content with ETag, Content-Length, Content-Type, ranges (206/416) and HEAD', async () => {
    await put('r.bin', '0123456789', editor.token, 'application/octet-stream');
    const whole = await get('objects/r.bin');
    expect(whole.status).toBe(200);
    expect(whole.headers.get('etag')).toBe(`"${sha('0123456789')}"`);
    expect(whole.headers.get('content-length')).toBe('10');
    expect(whole.headers.get('content-type')).toBe('application/octet-stream');
    expect(await whole.text()).toBe('0123456789');
    const part = await get('objects/r.bin', editor.token, { range: 'bytes=2-5' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 2-5/10');
    expect(await part.text()).toBe('2345');
    expect(await (await get('objects/r.bin', editor.token, { range: 'bytes=-3' })).text()).toBe('789');
    expect(await (await get('objects/r.bin', editor.token, { range: 'bytes=7-' })).text()).toBe('789');
    const bad = await get('objects/r.bin', editor.token, { range: 'bytes=50-60' });
    expect(bad.status).toBe(416);
    expect(bad.headers.get('content-range')).toBe('bytes */10');
    const etag = `"${sha('0123456789')}"`;
    const cached = await get('objects/r.bin', editor.token, { 'if-none-match': etag });
    expect(cached.status).toBe(304);
    expect(cached.headers.get('etag')).toBe(etag);
    // RFC 9110 §13.1.2: a list, weak comparison, `*`; another tag is no match.
    for (const header of [`"other", ${etag}`, `W/${etag}`, '*'])
      expect((await get('objects/r.bin', editor.token, { 'if-none-match': header })).status).toBe(304);
    expect((await get('objects/r.bin', editor.token, { 'if-none-match': '"other"' })).status).toBe(200);
    // §13.2.2: If-None-Match before Range (a cached copy needs no range), HEAD too.
    expect((await get('objects/r.bin', editor.token, { 'if-none-match': etag, range: 'bytes=50-60' })).status).toBe(304);
    expect((await fetch(url('objects/r.bin'), { method: 'HEAD', headers: { ...bearer(viewer.token), 'if-none-match': etag } })).status).toBe(304);
    const head = await fetch(url('objects/r.bin'), { method: 'HEAD', headers: bearer(viewer.token) });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('10');
    expect(await head.text()).toBe('');
    expect((await get('objects/nope.bin')).status).toBe(404);
  });

  it('refuses object content a page asks for as code (Sec-Fetch-Dest script, worker, XSLT): 403, a version too; downloads and documents as before', async () => {
    const stored = (await (await put('app/evil.js', 'window.pwned = 1', editor.token, 'text/javascript')).json()) as { version_id: string };
    for (const dest of ['script', 'worker', 'sharedworker', 'serviceworker', 'xslt', 'Script']) {
      const res = await get('objects/app/evil.js', viewer.token, { 'sec-fetch-dest': dest });
      expect(res.status, dest).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'forbidden' });
    }
    const version = await get(`versions/app/evil.js?version_id=${stored.version_id}`, viewer.token, { 'sec-fetch-dest': 'script' });
    expect(version.status).toBe(403);
    for (const dest of ['document', 'empty', 'iframe']) {
      const res = await get('objects/app/evil.js', viewer.token, { 'sec-fetch-dest': dest });
      expect(res.status, dest).toBe(200);
      expect(await res.text()).toBe('window.pwned = 1');
    }
    expect((await get(`versions/app/evil.js?version_id=${stored.version_id}`, viewer.token)).status).toBe(200);
  });

  it('guesses the content type from the extension when none is given', async () => {
    const res = await put('nb/x.ipynb', '{"nbformat":4}', editor.token, 'application/octet-stream');
    expect(((await res.json()) as { content_type: string }).content_type).toBe('application/x-ipynb+json');
    const json = await put('data/x.json', '{"a":1}', editor.token, 'application/json');
    expect(((await json.json()) as { size: number }).size).toBe(7);
    expect(await (await get('objects/data/x.json')).text()).toBe('{"a":1}');
  });

  it('lists by prefix with cursors', async () => {
    for (const p of ['list/a', 'list/b', 'list/c/d', 'listing-not']) await put(p, p);
    const all = (await (await get('objects?prefix=list/')).json()) as { items: { path: string }[]; next_cursor: string | null };
    expect(all.items.map((i) => i.path)).toEqual(['list/a', 'list/b', 'list/c/d']);
    const page1 = (await (await get('objects?prefix=list/&limit=2')).json()) as { items: { path: string }[]; next_cursor: string };
    expect(page1.items.map((i) => i.path)).toEqual(['list/a', 'list/b']);
    const page2 = (await (await get(`objects?prefix=list/&limit=2&cursor=${page1.next_cursor}`)).json()) as { items: { path: string }[]; next_cursor: null };
    expect(page2.items.map((i) => i.path)).toEqual(['list/c/d']);
    expect(page2.next_cursor).toBeNull();
    expect((await get('objects?prefix=../')).status).toBe(400);
  });

  it('lists by folder with delimiter=/: the objects directly under the prefix, one entry per sub-folder with its count, pages of both', async () => {
    for (const p of ['tree/a.txt', 'tree/b/1', 'tree/b/2', 'tree/b/c/3', 'tree/d.txt', 'tree0']) await put(p, p);
    type Page = {
      items: { path: string; sha256: string }[];
      folders: { path: string; object_count: number; object_count_capped: boolean }[];
      next_cursor: string | null;
    };
    const whole = (await (await get('objects?prefix=tree/&delimiter=/')).json()) as Page;
    expect(whole.items.map((i) => i.path)).toEqual(['tree/a.txt', 'tree/d.txt']);
    expect(whole.items[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(whole.folders).toEqual([{ path: 'tree/b/', object_count: 3, object_count_capped: false }]);
    expect(whole.next_cursor).toBeNull();
    // `limit` counts objects and folders together; the cursor goes on after a folder's whole range.
    const seen: string[] = [];
    let cursor = '';
    for (let n = 0; n < 5; n++) {
      const page = (await (await get(`objects?prefix=tree/&delimiter=/&limit=1${cursor}`, viewer.token)).json()) as Page;
      seen.push(...page.items.map((i) => i.path), ...page.folders.map((f) => f.path));
      if (page.next_cursor === null) break;
      cursor = `&cursor=${page.next_cursor}`;
    }
    expect(seen).toEqual(['tree/a.txt', 'tree/b/', 'tree/d.txt']);
    // Without the delimiter the list is as before (no folders field).
    expect(Object.keys((await (await get('objects?prefix=tree/')).json()) as object).sort()).toEqual(['items', 'next_cursor']);
    const bad = await get('objects?prefix=tree/&delimiter=,');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('invalid_request');
    expect((await get('objects?delimiter=/&cursor=bm90IGEgY3Vyc29y')).status).toBe(400);
    expect((await get('objects?prefix=../&delimiter=/')).status).toBe(400);
    expect((await get('objects?delimiter=/', stranger.token)).status).toBe(404);
    expect((await fetch(url('objects?delimiter=/'))).status).toBe(401);
  });

  it('lists the notebooks with kind=notebook: *.ipynb anywhere under the prefix, not the executed copies in .runs/ folders', async () => {
    for (const p of ['kinds/a.ipynb', 'kinds/b.csv', 'kinds/c/d.ipynb', 'kinds/c.runs/e.ipynb']) await put(p, '{}');
    type Page = { items: { path: string }[]; next_cursor: string | null };
    const page = (await (await get('objects?prefix=kinds/&kind=notebook', viewer.token)).json()) as Page;
    expect(page.items.map((i) => i.path)).toEqual(['kinds/a.ipynb', 'kinds/c/d.ipynb']);
    const first = (await (await get('objects?prefix=kinds/&kind=notebook&limit=1')).json()) as Page;
    const second = (await (await get(`objects?prefix=kinds/&kind=notebook&limit=1&cursor=${first.next_cursor}`)).json()) as Page;
    expect([...first.items, ...second.items].map((i) => i.path)).toEqual(['kinds/a.ipynb', 'kinds/c/d.ipynb']);
    expect((await get('objects?kind=folder')).status).toBe(400);
    expect((await get('objects?kind=notebook&delimiter=/')).status).toBe(400);
    expect((await get('objects?kind=notebook', stranger.token)).status).toBe(404);
    expect((await fetch(url('objects?kind=notebook'))).status).toBe(401);
  });

  it('moves deleted objects to the trash; restores (409 when live again) and purges', async () => {
    await put('t/file.txt', 'trash me');
    expect((await fetch(url('objects/t/file.txt'), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(204);
    expect((await get('objects/t/file.txt')).status).toBe(404);
    expect((await fetch(url('objects/t/file.txt'), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(404);
    const trash = (await (await get('trash')).json()) as { items: { id: string; path: string; size: number; deleted_at: string; deleted_by: string }[] };
    const item = trash.items.find((i) => i.path === 't/file.txt')!;
    expect(Object.keys(item).sort()).toEqual(['deleted_at', 'deleted_by', 'id', 'path', 'size']);
    expect(item).toMatchObject({ size: 8, deleted_by: editor.id });

    await put('t/file.txt', 'a new one');
    const conflict = await fetch(url(`trash/${item.id}/restore`), { method: 'POST', headers: bearer(editor.token) });
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as { error: string }).error).toBe('conflict');
    await fetch(url('objects/t/file.txt'), { method: 'DELETE', headers: bearer(editor.token) });
    const restored = await fetch(url(`trash/${item.id}/restore`), { method: 'POST', headers: bearer(editor.token) });
    expect(restored.status).toBe(200);
    expect(await (await get('objects/t/file.txt')).text()).toBe('trash me');

    const again = (await (await get('trash')).json()) as { items: { id: string; path: string }[] };
    const second = again.items.find((i) => i.path === 't/file.txt')!;
    expect((await fetch(url(`trash/${second.id}`), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(204);
    expect((await fetch(url(`trash/${second.id}`), { method: 'DELETE', headers: bearer(editor.token) })).status).toBe(404);
    expect((await fetch(url(`trash/${second.id}/restore`), { method: 'POST', headers: bearer(editor.token) })).status).toBe(404);
  });

  it('accepts multipart uploads (path, then file)', async () => {
    const form = new FormData();
    form.append('path', 'up/data.csv');
    form.append('file', new Blob(['a,b\n1,2\n'], { type: 'text/csv' }), 'data.csv');
    const res = await fetch(url('uploads'), { method: 'POST', body: form, headers: bearer(editor.token) });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ path: 'up/data.csv', size: 8, content_type: 'text/csv' });
    const wrongOrder = new FormData();
    wrongOrder.append('file', new Blob(['x']), 'x');
    wrongOrder.append('path', 'up/x');
    expect((await fetch(url('uploads'), { method: 'POST', body: wrongOrder, headers: bearer(editor.token) })).status).toBe(400);
    const badPath = new FormData();
    badPath.append('path', '../escape');
    badPath.append('file', new Blob(['x']), 'x');
    expect((await fetch(url('uploads'), { method: 'POST', body: badPath, headers: bearer(editor.token) })).status).toBe(400);
  });

  it('refuses a name with a bidirectional control character (it would display as another name), by PUT and by upload', async () => {
    const spoof = 'invoice\u202efdp.exe';
    const res = await put(encodeURIComponent(spoof), 'MZ');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/bidirectional control characters \(U\+202E\)/);
    const form = new FormData();
    form.append('path', `up/${spoof}`);
    form.append('file', new Blob(['MZ']), 'x');
    expect((await fetch(url('uploads'), { method: 'POST', body: form, headers: bearer(editor.token) })).status).toBe(400);
    const listing = (await (await fetch(url('objects'), { headers: bearer(editor.token) })).json()) as { items: { path: string }[] };
    expect(listing.items.filter((o) => o.path.includes('\u202e'))).toEqual([]);
    // Right-to-left names themselves are ordinary.
    expect((await put(encodeURIComponent('تقرير.txt'), 'x')).status).toBe(201);
  });

  it('answers a broken multipart form 400 naming it (it was a 500), and keeps the old content', async () => {
    await put('up/kept.txt', 'old content');
    const send = (body: string, type = 'multipart/form-data; boundary=x') =>
      fetch(url('uploads'), { method: 'POST', body, headers: { ...bearer(editor.token), 'content-type': type } });
    const head = (name: string, file?: string) => `--x\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"` : ''}\r\n\r\n`;
    const broken = {
      'no part at all': send('garbage'),
      'no boundary': send(`${head('path')}up/kept.txt\r\n--x--\r\n`, 'multipart/form-data'),
      'a part header cut off': send('--x\r\nContent-Disposition: form-da'),
      // The file's part never ends: the parser fails the file's stream while it is being stored.
      'the file part cut off': send(`${head('path')}up/kept.txt\r\n${head('file', 'k.txt')}new content that never ends`),
    };
    for (const [what, pending] of Object.entries(broken)) {
      const res = await pending;
      expect(res.status, what).toBe(400);
      expect(await res.json(), what).toMatchObject({ error: 'invalid_request', fields: { file: expect.any(String) as unknown } });
    }
    expect(await (await get('objects/up/kept.txt')).text()).toBe('old content');
    const versions = (await (await get('versions/up/kept.txt')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(1);
    // A whole form still works after them.
    const ok = await send(`${head('path')}up/kept.txt\r\n${head('file', 'k.txt')}new content\r\n--x--\r\n`);
    expect(ok.status).toBe(201);
    expect(await (await get('objects/up/kept.txt')).text()).toBe('new content');
  });

  it('refuses an upload with a Content-Encoding (415, Accept-Encoding: identity): it would be stored still encoded', async () => {
    await put('up/coded.txt', 'plain');
    const coded = gzipSync('meant content');
    const raw = await fetch(url('objects/up/coded.txt'), { method: 'PUT', body: coded, headers: { ...bearer(editor.token), 'content-encoding': 'gzip' } });
    expect(raw.status).toBe(415);
    expect(raw.headers.get('accept-encoding')).toBe('identity');
    expect(await raw.json()).toMatchObject({ error: 'unsupported_media_type', message: expect.stringMatching(/Content-Encoding \(gzip\)/) as unknown });
    const form = new FormData();
    form.append('path', 'up/coded.txt');
    form.append('file', new Blob([coded]), 'coded.txt');
    const multipart = await fetch(url('uploads'), { method: 'POST', body: form, headers: { ...bearer(editor.token), 'content-encoding': 'br' } });
    expect(multipart.status).toBe(415);
    expect(await (await get('objects/up/coded.txt')).text()).toBe('plain');
    // identity is no coding at all
    const identity = await fetch(url('objects/up/coded.txt'), {
      method: 'PUT',
      body: 'new',
      headers: { ...bearer(editor.token), 'content-encoding': 'identity' },
    });
    expect(identity.status).toBe(200);
  });

  it('refuses a file where a folder is, or below a file (409, decision 0213), by PUT and by form', async () => {
    expect((await put('tree/jobs/nb.ipynb', '{}')).status).toBe(201);
    const onFolder = await put('tree/jobs', 'x');
    expect(onFolder.status).toBe(409);
    expect(await onFolder.json()).toMatchObject({ error: 'conflict', message: expect.stringMatching(/tree\/jobs is a folder/) as unknown });
    const form = new FormData();
    form.append('path', 'tree/jobs/nb.ipynb/inner');
    form.append('file', new Blob(['x']), 'x');
    const below = await fetch(url('uploads'), { method: 'POST', body: form, headers: bearer(editor.token) });
    expect(below.status).toBe(409);
    expect((await get('objects/tree/jobs')).status).toBe(404);
  });

  it('enforces membership: non-members 404, viewers read only', async () => {
    await put('m.txt', 'members only');
    expect((await get('objects/m.txt', stranger.token)).status).toBe(404);
    expect((await put('m.txt', 'x', stranger.token)).status).toBe(404);
    expect((await get('objects/m.txt', viewer.token)).status).toBe(200);
    const denied = await put('m.txt', 'x', viewer.token);
    expect(denied.status).toBe(403);
    expect((await fetch(url('objects/m.txt'), { method: 'DELETE', headers: bearer(viewer.token) })).status).toBe(403);
    expect((await fetch(url('objects/m.txt'))).status).toBe(401);
  });

  it('answers 400 for hostile paths in the URL, sent byte for byte (no client-side normalisation)', async () => {
    const raw = (path: string, base = backendUrl) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const u = new URL(base);
        const req = request({ host: u.hostname, port: u.port, path: `/api/v1/data-resources/${ws}/objects/${path}`, headers: bearer(editor.token) }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
    for (const p of [
      '..%2F..%2Fetc%2Fpasswd',
      '%2e%2e/x',
      '%2E%2E%2Fx',
      'a/%2e%2e/b',
      'a/../b',
      'a%5cb',
      'a%5c..%5cb',
      'a%00b',
      'a%0ab',
      'a//b',
      'a/./b',
      'a/%2e/b',
    ]) {
      const res = await raw(p);
      expect(res.status, p).toBe(400);
      expect((JSON.parse(res.body) as ErrorBody).error).toBe('invalid_request');
    }
    // The gateway refuses parent segments itself; they never reach a component.
    for (const p of ['a/../b', '%2e%2e/x', '../../../internal/v1/objects']) {
      expect((await raw(p, gatewayUrl)).status, p).toBe(400);
    }
  });

  it('refuses . segments in every encoding through the gateway too (its proxy would drop them), storing nothing', async () => {
    const rawPut = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const u = new URL(gatewayUrl);
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            method: 'PUT',
            path: `/api/v1/data-resources/${ws}/objects/${path}`,
            headers: { ...bearer(editor.token), 'content-type': 'text/plain' },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end('dot');
      });
    for (const p of ['./dot-a', 'dot/./b', '%2E/dot-c', 'dot/%2e/d', '.%2fdot-e', 'dot/.', '%2e', '.\\dot-f', 'dot\\.\\g']) {
      const res = await rawPut(p);
      expect(res.status, p).toBe(400);
      expect((JSON.parse(res.body) as ErrorBody).error, p).toBe('invalid_request');
    }
    const listed = (await (await get('objects?prefix=dot')).json()) as { items: unknown[] };
    expect(listed.items).toEqual([]);
    expect((await get('objects/dot-a')).status).toBe(404);
  });

  it('stores a normalised content type, never the declared one as sent', async () => {
    // Straight to the backend: the gateway parses some types itself (text/plain, malformed ones).
    const typeOf = async (path: string, declared: string) =>
      (
        await b.app.inject({
          method: 'PUT',
          url: `/api/v1/data-resources/${ws}/objects/${path}`,
          headers: { ...bearer(editor.token), 'content-type': declared },
          payload: 'x',
        })
      ).json<{ content_type: string }>().content_type;
    expect(await typeOf('ct/a.txt', 'TEXT/Plain; Charset="UTF-8"; boundary=x; evil="<script>"')).toBe('text/plain; charset=utf-8');
    expect(await typeOf('ct/a.txt', 'text/plain; charset="<script>"')).toBe('text/plain');
    expect(await typeOf('ct/a.csv', 'TEXT/CSV; Charset="UTF-8"; boundary=x; evil="<script>"')).toBe('text/csv; charset=utf-8');
    expect(await typeOf('ct/b.json', 'application/json; charset=utf-8')).toBe('application/json');
    expect(await typeOf('ct/c.csv', 'application/x-www-form-urlencoded')).toBe('text/csv');
    expect(await typeOf('ct/d.png', 'multipart/form-data; boundary=abc')).toBe('image/png');
    expect(await typeOf('ct/e.html', 'application/x-www-form-urlencoded; charset=utf-8')).toBe('text/html');
    expect(await typeOf('ct/f.unknown', 'Text/HTML ; foo=bar')).toBe('text/html');
    expect(await typeOf('ct/g.bin', 'application/octet-stream')).toBe('application/octet-stream');
  });

  it('serves object content so that it never runs in the platform origin: nosniff, sandbox, attachment unless safe', async () => {
    const cases: [string, string, 'inline' | 'attachment'][] = [
      ['web/report.html', 'text/html', 'attachment'],
      ['web/logo.svg', 'image/svg+xml', 'attachment'],
      ['web/feed.xml', 'application/xml', 'attachment'],
      ['web/app.js', 'text/javascript', 'attachment'],
      ['web/page.xhtml', 'application/xhtml+xml', 'attachment'],
      ['web/data.json', 'application/json', 'attachment'],
      ['web/pic.png', 'image/png', 'inline'],
      ['web/pic.jpg', 'image/jpeg', 'inline'],
      ['web/pic.gif', 'image/gif', 'inline'],
      ['web/pic.webp', 'image/webp', 'inline'],
      ['web/doc.pdf', 'application/pdf', 'inline'],
      ['web/notes.txt', 'text/plain', 'inline'],
      // A lie about the type is harmless: an "image" that is HTML is never sniffed into HTML.
      ['web/fake.png', 'image/png', 'inline'],
    ];
    for (const [path, type, kind] of cases) {
      expect((await put(path, '<script>alert(1)</script>', editor.token, type)).status, path).toBe(201);
      for (const res of [
        await get(`objects/${path}`),
        await fetch(url(`objects/${path}`), { method: 'HEAD', headers: bearer(editor.token) }),
        await get(`objects/${path}`, editor.token, { range: 'bytes=0-3' }),
      ]) {
        expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
        expect(res.headers.get('content-security-policy'), path).toBe('sandbox');
        expect(res.headers.get('content-disposition'), path).toMatch(new RegExp(`^${kind}; filename="`));
        expect(res.headers.get('content-type'), path).toBe(type);
      }
    }
    // Versions are content too.
    await put('web/report.html', '<script>alert(2)</script>', editor.token, 'text/html');
    const versions = (await (await get('versions/web/report.html')).json()) as { items: { version_id: string; current: boolean }[] };
    const old = versions.items.find((v) => !v.current)!;
    const version = await get(`versions/web/report.html?version_id=${old.version_id}`);
    expect(await version.text()).toBe('<script>alert(1)</script>');
    expect(version.headers.get('x-content-type-options')).toBe('nosniff');
    expect(version.headers.get('content-security-policy')).toBe('sandbox');
    expect(version.headers.get('content-disposition')).toMatch(/^attachment; /);
  });

  it('names the file safely in Content-Disposition (RFC 6266 filename*)', async () => {
    const name = encodeURIComponent('names/Bericht "Q1" über 100%.html').replace(/%2F/g, '/');
    expect((await put(name, 'x', editor.token, 'text/html')).status).toBe(201);
    const res = await get(`objects/${name}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="Bericht _Q1_ _ber 100_.html"; filename*=UTF-8''Bericht%20%22Q1%22%20%C3%BCber%20100%25.html`,
    );
  });

  it('refuses uploads over MAX_UPLOAD_BYTES with 413, keeping the previous content', async () => {
    await put('big.bin', 'small original');
    const declared = await put('big.bin', Buffer.alloc(MAX + 1));
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { error: string }).error).toBe('payload_too_large');
    // chunked: no Content-Length, the limit is found while streaming
    const chunked = await new Promise<number>((resolve, reject) => {
      const u = new URL(url('objects/big.bin'));
      const req = request(
        { host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', headers: { ...bearer(editor.token), 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      for (let i = 0; i < 20; i++) req.write(Buffer.alloc(128 * 1024));
      req.end();
    });
    expect(chunked).toBe(413);
    expect(await (await get('objects/big.bin')).text()).toBe('small original');
    const versions = (await (await get('versions/big.bin')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(1);
  });

  it('a workspace id in upper case names the same files (one spelling of storage keys and locks)', async () => {
    const upper = (path: string) => url(path).replace(ws, ws.toUpperCase());
    const res = await fetch(upper('objects/case/one.txt'), { method: 'PUT', body: 'written with the upper-case id', headers: bearer(editor.token) });
    expect(res.status).toBe(201);
    expect(await (await get('objects/case/one.txt')).text()).toBe('written with the upper-case id');
    expect((await fetch(upper('objects/case/one.txt'), { method: 'PUT', body: 'again', headers: bearer(editor.token) })).status).toBe(200);
    expect(await (await get('objects/case/one.txt')).text()).toBe('again');
    const versions = (await (await get('versions/case/one.txt')).json()) as { items: { version_id: string; current: boolean }[] };
    const old = versions.items.find((v) => !v.current)!;
    expect(await (await get(`versions/case/one.txt?version_id=${old.version_id}`)).text()).toBe('written with the upper-case id');
  });

  it('refuses a multipart upload over MAX_UPLOAD_BYTES with 413 before anything is stored, keeping the previous content', async () => {
    await put('up/big.bin', 'small original');
    const head = (name: string, file?: string) => `--x\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"` : ''}\r\n\r\n`;
    const form = (size: number) =>
      Buffer.concat([Buffer.from(`${head('path')}up/big.bin\r\n${head('file', 'big.bin')}`), Buffer.alloc(size, 7), Buffer.from('\r\n--x--\r\n')]);
    // One byte over, with a Content-Length inside the form's margin: the parser stops the file at
    // the limit as if it were whole; the cut-off file used to replace the old one, then 413.
    const declared = await fetch(url('uploads'), {
      method: 'POST',
      body: form(MAX + 1),
      headers: { ...bearer(editor.token), 'content-type': 'multipart/form-data; boundary=x' },
    });
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { error: string }).error).toBe('payload_too_large');
    // Chunked: no length to refuse the form by.
    const chunked = await new Promise<number>((resolve, reject) => {
      const u = new URL(url('uploads'));
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          headers: { ...bearer(editor.token), 'content-type': 'multipart/form-data; boundary=x', 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(form(2 * MAX));
    });
    expect(chunked).toBe(413);
    expect(await (await get('objects/up/big.bin')).text()).toBe('small original');
    const versions = (await (await get('versions/up/big.bin')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(1);
    // Exactly the limit is a whole file.
    const atLimit = await fetch(url('uploads'), {
      method: 'POST',
      body: form(MAX),
      headers: { ...bearer(editor.token), 'content-type': 'multipart/form-data; boundary=x' },
    });
    expect(atLimit.status).toBe(201);
    expect(await atLimit.json()).toMatchObject({ path: 'up/big.bin', size: MAX });
  });

  it('keeps the old content when an upload is cut off mid-stream, and leaves nothing partial', async () => {
    await put('cut.txt', 'the old content');
    const before = await b.t.database.db.selectFrom('objects').selectAll().where('path', '=', 'cut.txt').executeTakeFirstOrThrow();
    await new Promise<void>((resolve) => {
      const u = new URL(url('objects/cut.txt'));
      const req = request({
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'PUT',
        headers: { ...bearer(editor.token), 'content-length': '1000000' },
      });
      req.on('error', () => resolve());
      req.write(Buffer.alloc(300_000, 1));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 200);
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(await (await get('objects/cut.txt')).text()).toBe('the old content');
    const after = await b.t.database.db.selectFrom('objects').selectAll().where('path', '=', 'cut.txt').executeTakeFirstOrThrow();
    expect(after).toEqual(before);
    const staging = readdirSync(`${(b.store as LocalObjectStore).base}/.staging/workspace`);
    expect(staging).toEqual([]);
  });

  it('two concurrent PUTs of one path: one current object, the other kept as a version', async () => {
    const [r1, r2] = await Promise.all([put('race.txt', 'one'), put('race.txt', 'two')]);
    expect([r1.status, r2.status].sort()).toEqual([200, 201]);
    const current = await (await get('objects/race.txt')).text();
    const versions = (await (await get('versions/race.txt')).json()) as { items: { sha256: string; current: boolean }[] };
    expect(versions.items).toHaveLength(2);
    expect(versions.items.find((v) => v.current)!.sha256).toBe(sha(current));
    expect(versions.items.map((v) => v.sha256).sort()).toEqual([sha('one'), sha('two')].sort());
  });

  describe('POST /internal/v1/objects', () => {
    const internal = (query: string, headers: Record<string, string> = { 'x-internal-service-token': INTERNAL_TOKEN }) =>
      fetch(`${backendUrl}/internal/v1/objects${query}`, { method: 'POST', headers, body: 'log line\n' });

    it('stores the body in the area (201) with the token', async () => {
      const res = await internal(`?area=run_log&key=${ws}/run-1.log`);
      expect(res.status).toBe(201);
      expect(await res.json()).toEqual({ area: 'run_log', key: `${ws}/run-1.log`, size: 9, sha256: sha('log line\n') });
      const got = await b.store.get('run_log', `${ws}/run-1.log`);
      expect(got?.size).toBe(9);
    });

    it('answers 401 unauthorized without or with a wrong token', async () => {
      for (const headers of [{}, { 'x-internal-service-token': 'wrong' }, { 'x-internal-service-token': '' }] as Record<string, string>[]) {
        const res = await internal(`?area=run_log&key=a.log`, headers);
        expect(res.status).toBe(401);
        expect(((await res.json()) as { error: string }).error).toBe('unauthorized');
      }
    });

    it('answers 400 for a bad area or key', async () => {
      for (const q of ['?area=secrets&key=a', '?key=a', '?area=run_log&key=../a', '?area=run_log', '?area=run_log&key=/abs']) {
        expect((await internal(q)).status, q).toBe(400);
      }
    });

    it('answers 404 for the removed routes and every other path or method, with or without a token', async () => {
      const paths = [
        '/internal/v1/uploads',
        '/internal/v1/uploads/complete',
        '/internal/v1/objects/list',
        '/internal/v1/objects/get',
        '/internal/v1/objects/delete',
        '/internal/v1',
        '/internal/v1/other',
      ];
      for (const withToken of [true, false]) {
        const headers: Record<string, string> = withToken ? { 'x-internal-service-token': INTERNAL_TOKEN } : {};
        for (const p of paths) {
          for (const method of ['GET', 'POST']) {
            const res = await fetch(`${backendUrl}${p}`, { method, headers, ...(method === 'POST' ? { body: 'x' } : {}) });
            expect(res.status, `${method} ${p}`).toBe(404);
          }
        }
        for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
          const res = await fetch(`${backendUrl}/internal/v1/objects?area=run_log&key=a`, {
            method,
            headers,
            ...(method === 'PUT' || method === 'PATCH' ? { body: 'x' } : {}),
          });
          expect(res.status, method).toBe(404);
        }
      }
    });

    it('is never reachable through the gateway', async () => {
      const res = await fetch(`${gatewayUrl}/internal/v1/objects?area=run_log&key=a`, {
        method: 'POST',
        headers: { 'x-internal-service-token': INTERNAL_TOKEN },
        body: 'x',
      });
      expect(res.status).toBe(404);
    });
  });

  it('answers the versions list in the one list shape (items, next_cursor), each item exactly VersionSchema; strangers get 404', async () => {
    await put('envelope/v.txt', 'one');
    await put('envelope/v.txt', 'two');
    const res = await get('versions/envelope/v.txt', viewer.token);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: Record<string, unknown>[]; next_cursor: unknown };
    expect(Object.keys(body).sort()).toEqual(['items', 'next_cursor']);
    expect(body.next_cursor).toBeNull();
    expect(body.items.map((v) => v.current)).toEqual([true, false]);
    for (const v of body.items) expect(Object.keys(v).sort()).toEqual(['content_type', 'created_at', 'created_by', 'current', 'sha256', 'size', 'version_id']);
    expect((await get('versions/envelope/v.txt', stranger.token)).status).toBe(404);
    expect((await fetch(url('versions/envelope/v.txt'))).status).toBe(401);
  });

  it('documents the versions list in the OpenAPI document (the list shape of VersionSchema); the content of a version still streams raw', async () => {
    /** The parts of a JSON Schema (as OpenAPI shows it) this test reads. */
    type Schema = { properties: Record<string, Schema>; items: Schema };
    type Doc = { paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: Schema }> }> } }> };
    const doc = (await b.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json<Doc>();
    const list = doc.paths['/api/v1/data-resources/{ws}/versions/{*}']!.get.responses;
    const schema = list['200']!.content['application/json']!.schema;
    expect(Object.keys(schema.properties).sort()).toEqual(['items', 'next_cursor']);
    expect(Object.keys(schema.properties.items!.items.properties).sort()).toEqual([
      'content_type',
      'created_at',
      'created_by',
      'current',
      'sha256',
      'size',
      'version_id',
    ]);
    expect(list).toHaveProperty('404');
    await put('envelope/raw.txt', '{"not":"a list"}', editor.token, 'application/json');
    await put('envelope/raw.txt', 'second');
    const versions = (await (await get('versions/envelope/raw.txt')).json()) as { items: { version_id: string; current: boolean }[] };
    const old = await get(`versions/envelope/raw.txt?version_id=${versions.items.find((v) => !v.current)!.version_id}`);
    expect(old.status).toBe(200);
    expect(await old.text()).toBe('{"not":"a list"}');
  });
});
