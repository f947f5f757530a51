import { gzipSync } from 'node:zlib';
import { request } from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, startTestGateway, type TestBackend, type TestGateway } from '../testing.js';

/** The WebDAV tree, through the gateway as clients reach it, on the test database. */
describe(`WebDAV tree (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  let other: string;
  let gateway: TestGateway['gateway'];
  let gatewayUrl: string;
  let backendUrl: string;
  const MAX = 64 * 1024;

  beforeAll(async () => {
    b = await startTestBackend({ maxUploadBytes: MAX });
    editor = await createAndLogin(b, 'dav-ed@example.com');
    viewer = await createAndLogin(b, 'dav-vi@example.com');
    stranger = await createAndLogin(b, 'dav-st@example.com');
    ws = await createWorkspace(b, 'dav');
    other = await createWorkspace(b, 'dav-other');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    await addMembers(b, other, [[editor, 'editor']]);
    ({ gateway, url: gatewayUrl, backendUrl } = await startTestGateway(b));
  });
  afterAll(async () => {
    await gateway.close();
    await b.close();
  });

  const basic = (token: string) => ({ authorization: `Basic ${Buffer.from(`anyone:${token}`).toString('base64')}` });
  const dav = (path: string, init: { method: string; body?: string; headers?: Record<string, string>; token?: string; workspace?: string }) =>
    fetch(`${gatewayUrl}/api/v1/dav/${init.workspace ?? ws}/${path}`, {
      method: init.method,
      ...(init.body !== undefined ? { body: init.body } : {}),
      headers: { ...basic(init.token ?? editor.token), ...init.headers },
    });
  const propfind = async (path: string, depth = '1', token = editor.token) => {
    const res = await dav(path, {
      method: 'PROPFIND',
      headers: { depth, 'content-type': 'application/xml' },
      token,
      body: '<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>',
    });
    const text = await res.text();
    const hrefs = [...text.matchAll(/<D:href>([^<]*)<\/D:href>/g)].map((m) => m[1]!.replace(`/api/v1/dav/${ws}/`, ''));
    return { status: res.status, text, hrefs };
  };
  const api = (rest: string, token = editor.token) => fetch(`${gatewayUrl}/api/v1/data-resources/${ws}/${rest}`, { headers: bearer(token) });
  const put = (path: string, body: string, type = 'text/plain') => dav(path, { method: 'PUT', body, headers: { 'content-type': type } });
  /** A request whose path reaches the server as written (fetch would resolve dot segments first). */
  const raw = (base: string, method: string, path: string, body = 'x') =>
    new Promise<number>((resolve, reject) => {
      const u = new URL(base);
      const req = request({ host: u.hostname, port: u.port, method, path: `/api/v1/dav/${ws}/${path}`, headers: basic(editor.token) }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });

  it('answers OPTIONS as a class 1 WebDAV server', async () => {
    const res = await dav('', { method: 'OPTIONS' });
    expect(res.status).toBe(200);
    expect(res.headers.get('dav')).toBe('1');
    expect(res.headers.get('allow')).toContain('PROPFIND');
  });

  it('refuses locks and dead properties with 405 naming the methods it offers', async () => {
    for (const method of ['LOCK', 'UNLOCK', 'PROPPATCH']) {
      const res = await dav('a.txt', { method, body: '<?xml version="1.0"?><x/>', headers: { 'content-type': 'application/xml' } });
      expect([method, res.status]).toEqual([method, 405]);
      expect(res.headers.get('allow')).toContain('MOVE');
    }
  });

  it('asks for credentials with a Basic challenge: no credentials, a wrong token, a logged-out token', async () => {
    const none = await fetch(`${gatewayUrl}/api/v1/dav/${ws}/`, { method: 'PROPFIND', headers: { depth: '0' } });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Basic realm="codeagent", charset="UTF-8"');
    expect((await dav('', { method: 'PROPFIND', headers: { depth: '0' }, token: 'not-a-token' })).status).toBe(401);
    const gone = await createAndLogin(b, 'dav-gone@example.com');
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: gone.id, role: 'editor' },
    });
    expect((await propfind('', '0', gone.token)).status).toBe(207);
    await b.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: bearer(gone.token) });
    const after = await propfind('', '0', gone.token);
    expect(after.status).toBe(401);
  });

  it('takes the token as a bearer too', async () => {
    const res = await fetch(`${gatewayUrl}/api/v1/dav/${ws}/`, { method: 'PROPFIND', headers: { ...bearer(editor.token), depth: '0' } });
    expect(res.status).toBe(207);
  });

  it('saves with PUT (201), saves again (204) and the first content is a version in the API', async () => {
    const first = await put('notes/a.txt', 'first');
    expect(first.status).toBe(201);
    const second = await put('notes/a.txt', 'second!');
    expect(second.status).toBe(204);
    expect(second.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
    const versions = (await (await api('versions/notes/a.txt')).json()) as { items: { current: boolean; size: number; created_by: string }[] };
    expect(versions.items.map((v) => [v.current, v.size])).toEqual([
      [true, 7],
      [false, 5],
    ]);
    expect(versions.items[0]!.created_by).toBe(editor.id);
    expect(await (await api('objects/notes/a.txt')).text()).toBe('second!');
  });

  it('a workspace id in upper case names the same files as through the API', async () => {
    const res = await dav('case/upper.txt', { method: 'PUT', body: 'through an upper-case id', workspace: ws.toUpperCase() });
    expect(res.status).toBe(201);
    expect(await (await api('objects/case/upper.txt')).text()).toBe('through an upper-case id');
    expect(await (await dav('case/upper.txt', { method: 'GET', workspace: ws.toUpperCase() })).text()).toBe('through an upper-case id');
    expect((await dav('case', { method: 'DELETE', workspace: ws.toUpperCase() })).status).toBe(204);
    expect((await api('objects/case/upper.txt')).status).toBe(404);
  });

  // Decision 0220: a mount client's own time of a file is what the tree reports for it, so the
  // time a mount shows does not jump when the upload ends; the API's times stay the platform's.
  it('keeps the time a client gives with X-OC-Mtime and reports it; a future time is now; none or garbage is the upload time', async () => {
    const lastModified = async (path: string) => {
      const { text } = await propfind(path, '0');
      return Date.parse(/<D:getlastmodified>([^<]*)</.exec(text)![1]!);
    };
    const given = await dav('times/given.txt', { method: 'PUT', body: 'x', headers: { 'x-oc-mtime': '1700000000' } });
    expect(given.status).toBe(201);
    expect(given.headers.get('x-oc-mtime')).toBe('accepted');
    expect(await lastModified('times/given.txt')).toBe(1_700_000_000_000);
    // In a listing too; the API's object keeps the platform's time and shows no other field.
    expect((await propfind('times/')).text).toContain(`<D:getlastmodified>${new Date(1_700_000_000_000).toUTCString()}</D:getlastmodified>`);
    const object = (await (await api('objects?prefix=times/')).json()) as { items: Record<string, unknown>[] };
    expect(Object.keys(object.items[0]!).sort()).toEqual(['content_type', 'path', 'sha256', 'size', 'updated_at', 'updated_by', 'version_id']);
    expect(Date.now() - Date.parse(object.items[0]!.updated_at as string)).toBeLessThan(60_000);

    const before = Date.now();
    expect((await dav('times/future.txt', { method: 'PUT', body: 'x', headers: { 'x-oc-mtime': '99999999999' } })).status).toBe(201);
    expect(await lastModified('times/future.txt')).toBeLessThanOrEqual(Date.now());
    expect(await lastModified('times/future.txt')).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    for (const bad of ['-5', 'soon', '1e12', '']) {
      const res = await dav('times/bad.txt', { method: 'PUT', body: 'x', headers: { 'x-oc-mtime': bad } });
      expect(res.status).toBeLessThan(300);
      expect(res.headers.get('x-oc-mtime')).toBeNull();
      expect(Date.now() - (await lastModified('times/bad.txt'))).toBeLessThan(60_000);
    }
    // A save that gives no time is the platform's time again.
    expect((await put('times/given.txt', 'y')).status).toBe(204);
    expect(Date.now() - (await lastModified('times/given.txt'))).toBeLessThan(60_000);
    expect((await dav('times/', { method: 'DELETE' })).status).toBe(204);
  });

  it('refuses a PUT with a Content-Encoding (415, Accept-Encoding: identity) and keeps the previous content', async () => {
    const res = await fetch(`${gatewayUrl}/api/v1/dav/${ws}/notes/a.txt`, {
      method: 'PUT',
      headers: { ...bearer(editor.token), 'content-encoding': 'gzip' },
      body: gzipSync('encoded'),
    });
    expect(res.status).toBe(415);
    expect(res.headers.get('accept-encoding')).toBe('identity');
    expect(await (await api('objects/notes/a.txt')).text()).toBe('second!');
  });

  it('refuses a PUT over MAX_UPLOAD_BYTES (413) and keeps the previous content', async () => {
    const res = await put('notes/a.txt', 'x'.repeat(MAX + 1));
    expect(res.status).toBe(413);
    expect(await (await api('objects/notes/a.txt')).text()).toBe('second!');
  });

  it('lists a folder with PROPFIND Depth 1 (folders are prefixes) and one resource with Depth 0', async () => {
    await put('top.csv', 'a,b\n1,2\n', 'text/csv');
    await put('notes/deep/b.txt', 'b');
    const root = await propfind('');
    expect(root.status).toBe(207);
    expect(root.hrefs).toEqual(['', 'notes/', 'top.csv']);
    expect(root.text).toContain('<D:getcontentlength>8</D:getcontentlength>');
    expect(root.text).toContain('<D:collection/>');
    const notes = await propfind('notes/');
    expect(notes.hrefs).toEqual(['notes/', 'notes/deep/', 'notes/a.txt']);
    const one = await propfind('top.csv', '0');
    expect(one.hrefs).toEqual(['top.csv']);
    expect(one.text).toContain('<D:getcontenttype>text/csv</D:getcontenttype>');
    expect((await propfind('missing.txt', '0')).status).toBe(404);
    expect((await propfind('', 'infinity')).status).toBe(403);
  });

  it('round-trips names with XML and URL specials and non-ASCII letters', async () => {
    const names = ['a & b <c>.txt', 'été 100%.csv', "it's#1?.md"];
    for (const n of names) expect((await put(`odd/${encodeURIComponent(n)}`, n)).status).toBe(201);
    const listing = await propfind('odd/');
    expect(listing.status).toBe(207);
    const unescape = (h: string) =>
      h
        .replace(/&apos;/g, "'")
        .replace(/&quot;/g, '"')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&amp;/g, '&');
    expect(
      listing.hrefs
        .slice(1)
        .map((h) => decodeURIComponent(unescape(h)))
        .sort(),
    ).toEqual(names.map((n) => `odd/${n}`).sort());
    expect(listing.text).toContain('<D:displayname>a &amp; b &lt;c&gt;.txt</D:displayname>');
    expect(await (await api(`objects/odd/${encodeURIComponent('été 100%.csv')}`)).text()).toBe('été 100%.csv');
    expect((await dav('odd/', { method: 'DELETE' })).status).toBe(204);
  });

  it('reads with GET and Range (206), If-None-Match (304), and HEAD: the rules of the API (one implementation)', async () => {
    const whole = await dav('top.csv', { method: 'GET' });
    expect(whole.status).toBe(200);
    expect(whole.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await whole.text()).toBe('a,b\n1,2\n');
    const part = await dav('top.csv', { method: 'GET', headers: { range: 'bytes=4-6' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 4-6/8');
    expect(await part.text()).toBe('1,2');
    const head = await dav('top.csv', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('8');
    const etag = whole.headers.get('etag')!;
    expect((await dav('top.csv', { method: 'GET', headers: { 'if-none-match': etag } })).status).toBe(304);
    expect((await dav('top.csv', { method: 'GET', headers: { 'if-none-match': etag, range: 'bytes=40-' } })).status).toBe(304);
    expect((await dav('top.csv', { method: 'GET', headers: { range: 'bytes=40-' } })).status).toBe(416);
  });

  it('makes folders with MKCOL that PROPFIND shows while empty; refuses an existing one and one below a file', async () => {
    expect((await dav('empty', { method: 'MKCOL' })).status).toBe(201);
    expect((await propfind('')).hrefs).toContain('empty/');
    expect((await propfind('empty/')).hrefs).toEqual(['empty/']);
    expect((await dav('empty', { method: 'MKCOL' })).status).toBe(405);
    expect((await dav('top.csv', { method: 'MKCOL' })).status).toBe(405);
    expect((await dav('top.csv/sub', { method: 'MKCOL' })).status).toBe(409);
    expect((await put('top.csv/sub.txt', 'x')).status).toBe(409);
    expect((await put('empty', 'x')).status).toBe(405);
  });

  it('moves a file with its versions; Overwrite F refuses an existing Destination (412); T replaces it as a save', async () => {
    const move = (from: string, to: string, overwrite?: 'T' | 'F') =>
      dav(from, { method: 'MOVE', headers: { destination: `${gatewayUrl}/api/v1/dav/${ws}/${to}`, ...(overwrite ? { overwrite } : {}) } });
    expect((await move('notes/a.txt', 'notes/renamed.txt')).status).toBe(201);
    expect((await api('objects/notes/a.txt')).status).toBe(404);
    const versions = (await (await api('versions/notes/renamed.txt')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(2);
    await put('notes/c.txt', 'c');
    expect((await move('notes/c.txt', 'notes/renamed.txt', 'F')).status).toBe(412);
    expect((await move('notes/c.txt', 'notes/renamed.txt', 'T')).status).toBe(204);
    expect(await (await api('objects/notes/renamed.txt')).text()).toBe('c');
    const after = (await (await api('versions/notes/renamed.txt')).json()) as { items: { size: number }[] };
    expect(after.items.map((v) => v.size)).toEqual([1, 7, 5]);
    expect((await move('missing.txt', 'x.txt')).status).toBe(404);
  });

  it('copies a folder (each file a new object) and moves a folder', async () => {
    const res = await dav('notes', { method: 'COPY', headers: { destination: `/api/v1/dav/${ws}/copied` } });
    expect(res.status).toBe(201);
    expect((await propfind('copied/')).hrefs).toEqual(['copied/', 'copied/deep/', 'copied/renamed.txt']);
    expect(await (await api('objects/copied/deep/b.txt')).text()).toBe('b');
    expect(await (await api('objects/notes/deep/b.txt')).text()).toBe('b');
    const moved = await dav('copied/', { method: 'MOVE', headers: { destination: `/api/v1/dav/${ws}/moved/` } });
    expect(moved.status).toBe(201);
    expect((await propfind('copied/', '0')).status).toBe(404);
    expect((await propfind('moved/')).hrefs).toEqual(['moved/', 'moved/deep/', 'moved/renamed.txt']);
    expect((await dav('moved', { method: 'MOVE', headers: { destination: `/api/v1/dav/${ws}/moved/inside` } })).status).toBe(403);
  });

  it('deletes to the trash: a file, and a folder with everything under it', async () => {
    expect((await dav('top.csv', { method: 'DELETE' })).status).toBe(204);
    expect((await dav('moved/', { method: 'DELETE' })).status).toBe(204);
    expect((await propfind('moved/', '0')).status).toBe(404);
    const trash = (await (await api('trash')).json()) as { items: { path: string }[] };
    expect(trash.items.map((t) => t.path).sort()).toEqual(expect.arrayContaining(['moved/deep/b.txt', 'moved/renamed.txt', 'top.csv']));
    expect((await dav('top.csv', { method: 'DELETE' })).status).toBe(404);
    expect((await dav('', { method: 'DELETE' })).status).toBe(403);
  });

  it('lets a user have two folder operations under way at once: a third is 429, as is any COPY; deleting a file and another user pass (decision 0227)', async () => {
    const second = await createAndLogin(b, 'dav-ed2@example.com');
    await addMembers(b, ws, [[second, 'editor']]);
    for (const f of ['a', 'b', 'c', 'd', 'e']) for (const n of [1, 2]) expect((await put(`burst/${f}/${n}.txt`, `${f}${n}`)).status).toBe(201);
    expect((await put('burst/single.txt', 's')).status).toBe(201);
    // Rows of folders a and b locked in another transaction: their DELETEs wait on their first
    // file while holding the editor's two places, however fast this machine is.
    let unlock!: () => void;
    const held = new Promise<void>((resolve) => (unlock = resolve));
    let locked!: () => void;
    const lockedNow = new Promise<void>((resolve) => (locked = resolve));
    const holder = b.t.database.db.transaction().execute(async (trx) => {
      await trx
        .selectFrom('objects')
        .select('path')
        .where('workspace_id', '=', ws)
        .where('path', 'in', ['burst/a/1.txt', 'burst/b/1.txt'])
        .forUpdate()
        .execute();
      locked();
      await held;
    });
    await lockedNow;
    try {
      const first = dav('burst/a/', { method: 'DELETE' });
      const moving = dav('burst/b/', { method: 'MOVE', headers: { destination: `/api/v1/dav/${ws}/burst/moved-b/` } });
      // Both hold their place once the database shows both waiting on the rows held above.
      for (let waiting = 0, i = 0; waiting < 2; i++) {
        if (i === 500) throw new Error(`${waiting} of the two folder operations wait on the held rows after 10 s`);
        await new Promise((r) => setTimeout(r, 20));
        const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(b.t.database.db);
        waiting = rows[0]!.n;
      }
      const third = await dav('burst/c/', { method: 'DELETE' });
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toBe('1');
      const refusal = (await third.json()) as { error: string; message: string };
      expect(refusal.error).toBe('too_many_requests');
      expect(refusal.message).toContain('folder operations under way');
      // A COPY of a folder counts as well; nothing of it was written.
      expect((await dav('burst/d/', { method: 'COPY', headers: { destination: `/api/v1/dav/${ws}/burst/copied-d/` } })).status).toBe(429);
      expect((await propfind('burst/copied-d/', '0')).status).toBe(404);
      // A COPY of one file counts too (it reads and writes every byte of it).
      expect((await dav('burst/single.txt', { method: 'COPY', headers: { destination: `/api/v1/dav/${ws}/burst/single-copy.txt` } })).status).toBe(429);
      // Deleting one file is not a folder operation; another user has places of their own.
      expect((await dav('burst/single.txt', { method: 'DELETE' })).status).toBe(204);
      expect((await dav('burst/d/', { method: 'DELETE', token: second.token })).status).toBe(204);
      unlock();
      await holder;
      expect((await first).status).toBe(204);
      expect((await moving).status).toBe(201);
    } finally {
      unlock();
      await holder;
    }
    // The places are given back: the refused DELETE now passes, and folder c was untouched until then.
    expect((await propfind('burst/c/')).hrefs).toEqual(['burst/c/', 'burst/c/1.txt', 'burst/c/2.txt']);
    expect((await dav('burst/c/', { method: 'DELETE' })).status).toBe(204);
    expect((await propfind('burst/')).hrefs).toEqual(['burst/', 'burst/e/', 'burst/moved-b/']);
  });

  it('lets viewers read only (403 on every write)', async () => {
    expect((await propfind('', '1', viewer.token)).status).toBe(207);
    expect((await dav('notes/renamed.txt', { method: 'GET', token: viewer.token })).status).toBe(200);
    for (const [method, headers] of [
      ['PUT', {}],
      ['DELETE', {}],
      ['MKCOL', {}],
      ['MOVE', { destination: `/api/v1/dav/${ws}/v.txt` }],
      ['COPY', { destination: `/api/v1/dav/${ws}/v.txt` }],
    ] as const) {
      const res = await dav('notes/renamed.txt', { method, headers, token: viewer.token, ...(method === 'PUT' ? { body: 'x' } : {}) });
      expect([method, res.status]).toEqual([method, 403]);
    }
    expect(await (await api('objects/notes/renamed.txt')).text()).toBe('c');
  });

  it('answers 404 to non-members and for unknown workspaces, for reads and writes alike', async () => {
    expect((await propfind('', '1', stranger.token)).status).toBe(404);
    expect((await dav('x.txt', { method: 'PUT', body: 'x', token: stranger.token })).status).toBe(404);
    expect((await dav('', { method: 'PROPFIND', headers: { depth: '0' }, workspace: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);
    expect((await dav('', { method: 'PROPFIND', headers: { depth: '0' }, workspace: 'not-a-uuid' })).status).toBe(404);
  });

  it('refuses hostile paths: dot segments in any encoding, encoded slashes, backslashes, malformed escapes', async () => {
    for (const base of [backendUrl, gatewayUrl]) {
      for (const path of ['a/%2e%2e/b.txt', '%2E%2E/x', 'a/../b.txt', 'a/./b.txt', 'a%2Fb.txt', 'a%2fb/c', 'a%5Cb', 'a\\b', 'bad%zz', 'a%00b', 'a//b']) {
        for (const method of ['PUT', 'MKCOL'])
          expect([base, method, path, await raw(base, method, path, method === 'PUT' ? 'x' : '')]).toEqual([base, method, path, 400]);
      }
    }
    const listing = (await (await api('objects')).json()) as { items: { path: string }[] };
    expect(listing.items.map((o) => o.path).some((p) => p.includes('b.txt') && !p.startsWith('notes/'))).toBe(false);
  });

  it('refuses a name with a bidirectional control character, as a PUT, a folder, or the Destination of a MOVE or COPY', async () => {
    const spoof = encodeURIComponent('invoice\u202efdp.exe');
    expect((await dav(spoof, { method: 'PUT', body: 'MZ' })).status).toBe(400);
    expect((await dav(encodeURIComponent('folder\u2067'), { method: 'MKCOL' })).status).toBe(400);
    for (const method of ['MOVE', 'COPY']) {
      const res = await dav('notes/renamed.txt', { method, headers: { destination: `/api/v1/dav/${ws}/${spoof}` } });
      expect([method, res.status]).toEqual([method, 400]);
    }
    expect((await dav('notes/renamed.txt', { method: 'HEAD' })).status).toBe(200);
    const listing = (await (await api('objects')).json()) as { items: { path: string }[] };
    expect(listing.items.filter((o) => /[\u202e\u2067]/.test(o.path))).toEqual([]);
  });

  it('refuses uploads to the folder marker’s name (only MKCOL stores it, empty), by WebDAV, the API and the form', async () => {
    expect((await dav('parked/.codeagent-folder', { method: 'PUT', body: 'hidden data' })).status).toBe(400);
    const rest = (path: string, init: RequestInit) => fetch(`${gatewayUrl}/api/v1/data-resources/${ws}/${path}`, { ...init, headers: bearer(editor.token) });
    const refused = await rest('objects/parked/.codeagent-folder', { method: 'PUT', body: 'hidden data' });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { message: string }).message).toMatch(/MKCOL/);
    const form = new FormData();
    form.append('path', 'parked/.codeagent-folder');
    form.append('file', new Blob(['hidden data']), 'x');
    expect((await rest('uploads', { method: 'POST', body: form })).status).toBe(400);
    // Nor a MOVE or COPY onto it (the re-check moved a file there).
    expect((await put('parked-source.bin', 'hidden data')).status).toBe(201);
    for (const method of ['MOVE', 'COPY']) {
      const res = await dav('parked-source.bin', { method, headers: { destination: `/api/v1/dav/${ws}/other/.codeagent-folder` } });
      expect([method, res.status]).toEqual([method, 400]);
    }
    expect((await dav('parked', { method: 'MKCOL' })).status).toBe(201);
    const listing = (await (await api('objects?prefix=parked/')).json()) as { items: { path: string; size: number }[] };
    expect(listing.items).toMatchObject([{ path: 'parked/.codeagent-folder', size: 0 }]);
  });

  it('refuses a Destination in another workspace (403), on another server (502), or with dot segments (400)', async () => {
    const copy = (destination: string) => dav('notes/renamed.txt', { method: 'COPY', headers: { destination } });
    expect((await copy(`/api/v1/dav/${other}/stolen.txt`)).status).toBe(403);
    expect((await copy(`${gatewayUrl}/api/v1/dav/${other}/stolen.txt`)).status).toBe(403);
    expect((await copy(`/api/v1/dav/${ws}/../${other}/stolen.txt`)).status).toBe(400);
    expect((await copy(`/api/v1/dav/${ws}/%2e%2e/${other}/stolen.txt`)).status).toBe(400);
    expect((await copy(`/api/v1/dav/${ws}/a%2F..%2F..%2F${other}%2Fstolen.txt`)).status).toBe(400);
    expect((await copy(`http://elsewhere.example/api/v1/dav/${ws}/x.txt`)).status).toBe(502);
    expect((await copy('/api/v1/data-resources/x')).status).toBe(400);
    expect(
      (await fetch(`${gatewayUrl}/api/v1/data-resources/${other}/objects`, { headers: bearer(editor.token) }).then((r) => r.json())) as { items: unknown[] },
    ).toEqual(expect.objectContaining({ items: [] }));
  });

  it('refuses Basic credentials that a browser sends for another site (a write, or a read by <script src>)', async () => {
    const res = await dav('csrf.txt', { method: 'PUT', body: 'x', headers: { 'sec-fetch-site': 'cross-site' } });
    expect(res.status).toBe(403);
    expect((await api('objects/csrf.txt')).status).toBe(404);
    expect((await dav('notes/renamed.txt', { method: 'GET', headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await dav('notes/renamed.txt', { method: 'GET', headers: { origin: 'https://evil.example' } })).status).toBe(403);
    expect((await dav('notes/renamed.txt', { method: 'GET', headers: { 'sec-fetch-site': 'same-origin' } })).status).toBe(200);
  });
});

describe(`WebDAV tree under a workspace quota (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let ws: string;
  const QUOTA = 100;

  beforeAll(async () => {
    b = await startTestBackend({ workspaceQuotaBytes: QUOTA });
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'full' } })).json<{
      id: string;
    }>().id;
  });
  afterAll(async () => {
    await b.close();
  });

  const dav = (method: string, path: string, headers: Record<string, string> = {}, payload?: string) =>
    b.app.inject({
      method: method as 'GET',
      url: `/api/v1/dav/${ws}/${path}`,
      headers: { ...bearer(b.adminToken), ...headers },
      ...(payload !== undefined ? { payload } : {}),
    });

  it('refuses a PUT and a COPY beyond WORKSPACE_QUOTA_BYTES (507, nothing written); a MOVE adds no bytes and passes', async () => {
    expect((await dav('PUT', 'a.bin', { 'content-type': 'application/octet-stream' }, 'a'.repeat(60))).statusCode).toBe(201);
    const over = await dav('PUT', 'b.bin', { 'content-type': 'application/octet-stream' }, 'b'.repeat(60));
    expect(over.statusCode).toBe(507);
    expect(over.json()).toMatchObject({ error: 'quota_exceeded' });
    const copy = await dav('COPY', 'a.bin', { destination: `/api/v1/dav/${ws}/copy.bin` });
    expect(copy.statusCode).toBe(507);
    expect((await dav('MOVE', 'a.bin', { destination: `/api/v1/dav/${ws}/moved/a.bin` })).statusCode).toBe(201);
    const listing = await dav('PROPFIND', '', { depth: '1' });
    expect(listing.statusCode).toBe(207);
    expect(listing.body).toContain('moved/');
    expect(listing.body).not.toContain('b.bin');
    expect(listing.body).not.toContain('copy.bin');
  });
});
