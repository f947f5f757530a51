import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMembers, bearer, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from '../testing.js';

/**
 * Decision 0262: writes honour `If-Match` and `If-None-Match` (RFC 9110 §13.1), through the API
 * and WebDAV. Before, a mismatch was ignored: the write went ahead (hostile review: a lost update
 * for every client that sends them, WebDAV clients and editors among them).
 */
describe(`conditional writes (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let base: string;
  let ws: string;
  let editor: { id: string; token: string };
  beforeAll(async () => {
    b = await startTestBackend();
    base = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    ws = await createWorkspace(b, 'conditional');
    editor = await createAndLogin(b, 'conditional-editor@example.com');
    await addMembers(b, ws, [[editor, 'editor']]);
  }, 60_000);
  afterAll(async () => {
    // (Connections the test's fetches keep open, answers of refusals not read to their end, are
    // cut, as `closeNow` does for the gateway's tests: the close would wait for them otherwise.)
    const closing = b.close();
    b.app.server.closeAllConnections();
    await closing;
  });

  const api = (path: string) => `${base}/api/v1/data-resources/${ws}/objects/${path}`;
  const dav = (path: string) => `${base}/api/v1/dav/${ws}/${path}`;
  const send = (url: string, method: string, headers: Record<string, string> = {}, body?: string) =>
    fetch(url, { method, headers: { ...bearer(editor.token), ...headers }, ...(body === undefined ? {} : { body }) });
  const read = async (path: string) => {
    const res = await send(api(path), 'GET');
    return res.status === 200 ? await res.text() : res.status;
  };
  // (The answers read to their end, as a client does: one left unread kept the test's server from closing.)
  const statusOf = async (answer: Promise<Response>) => {
    const res = await answer;
    await res.arrayBuffer();
    return res.status;
  };
  const etagOf = async (path: string) => (await send(api(path), 'HEAD')).headers.get('etag')!;

  for (const [name, url] of [
    ['the API', api],
    ['WebDAV', dav],
  ] as const) {
    it(`${name}: PUT and DELETE go ahead only while their conditions hold (412 otherwise, nothing changed)`, async () => {
      const path = `${name === 'WebDAV' ? 'dav' : 'api'}-doc.txt`;
      // Create only: If-None-Match: *.
      expect([200, 201, 204]).toContain((await send(url(path), 'PUT', { 'if-none-match': '*' }, 'one')).status);
      const again = await send(url(path), 'PUT', { 'if-none-match': '*' }, 'clobber');
      expect(again.status).toBe(412);
      expect(((await again.json()) as { error: string }).error).toBe('precondition_failed');
      expect(await read(path)).toBe('one');
      const first = await etagOf(path);
      expect([200, 204]).toContain((await send(url(path), 'PUT', { 'if-match': first }, 'two')).status);
      // The editor who read the first content saves over a change made meanwhile: refused.
      expect((await send(url(path), 'PUT', { 'if-match': first }, 'stale')).status).toBe(412);
      expect((await send(url(path), 'PUT', { 'if-match': `W/${await etagOf(path)}` }, 'weak')).status).toBe(412);
      expect((await send(url(path), 'PUT', { 'if-none-match': await etagOf(path) }, 'same')).status).toBe(412);
      expect(await read(path)).toBe('two');
      expect((await send(url('absent.txt'), 'PUT', { 'if-match': '*' }, 'x')).status).toBe(412);
      expect(await read('absent.txt')).toBe(404);
      expect((await send(url(path), 'DELETE', { 'if-match': first })).status).toBe(412);
      expect(await read(path)).toBe('two');
      expect((await send(url(path), 'DELETE', { 'if-match': `"nope", ${await etagOf(path)}` })).status).toBe(204);
      expect(await read(path)).toBe(404);
    });
  }

  it('two saves from the same read, at once: one is stored, the other is 412', async () => {
    expect((await send(api('race.txt'), 'PUT', {}, 'base')).status).toBe(201);
    const seen = await etagOf('race.txt');
    const answers = await Promise.all(['mine', 'theirs'].map((body) => send(api('race.txt'), 'PUT', { 'if-match': seen }, body)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 412]);
    const kept = answers[0]!.status === 200 ? 'mine' : 'theirs';
    expect(await read('race.txt')).toBe(kept);
  });

  it('a WebDAV DELETE of a folder holds with If-Match: * and not with a list of tags', async () => {
    expect((await send(api('folder/a.txt'), 'PUT', {}, 'a')).status).toBe(201);
    expect((await send(dav('folder'), 'DELETE', { 'if-match': '"some-tag"' })).status).toBe(412);
    expect(await read('folder/a.txt')).toBe('a');
    expect((await send(dav('folder'), 'DELETE', { 'if-match': '*' })).status).toBe(204);
    expect(await read('folder/a.txt')).toBe(404);
  });

  it('refuses * inside a list (400), and holds the conditions on the form upload, a version restore, and a WebDAV COPY or MOVE (about its source)', async () => {
    expect(await statusOf(send(api('star.txt'), 'PUT', {}, 'one'))).toBe(201);
    for (const header of ['*, *', '"x", *']) {
      expect(await statusOf(send(api('star.txt'), 'PUT', { 'if-none-match': header }, 'two')), header).toBe(400);
      expect(await statusOf(send(dav('star.txt'), 'PUT', { 'if-none-match': header }, 'two')), header).toBe(400);
    }
    expect(await read('star.txt')).toBe('one');
    const form = new FormData();
    form.append('path', 'star.txt');
    form.append('file', new Blob(['form']), 'star.txt');
    expect(
      (await fetch(`${base}/api/v1/data-resources/${ws}/uploads`, { method: 'POST', body: form, headers: { ...bearer(editor.token), 'if-none-match': '*' } }))
        .status,
    ).toBe(412);
    expect(await read('star.txt')).toBe('one');
    const first = await etagOf('star.txt');
    expect(await statusOf(send(api('star.txt'), 'PUT', {}, 'two'))).toBe(200);
    const versions = (await (await send(`${base}/api/v1/data-resources/${ws}/versions/star.txt`, 'GET')).json()) as { items: { version_id: string }[] };
    const old = versions.items.at(-1)!.version_id;
    const restore = (headers: Record<string, string>) =>
      send(
        `${base}/api/v1/data-resources/${ws}/versions/star.txt/restore`,
        'POST',
        { 'content-type': 'application/json', ...headers },
        JSON.stringify({ version_id: old }),
      );
    expect(await statusOf(restore({ 'if-match': first }))).toBe(412);
    expect(await read('star.txt')).toBe('two');
    expect(await statusOf(send(dav('star.txt'), 'MOVE', { destination: `/api/v1/dav/${ws}/moved.txt`, 'if-match': first }))).toBe(412);
    expect(await statusOf(send(dav('star.txt'), 'COPY', { destination: `/api/v1/dav/${ws}/copied.txt`, 'if-none-match': '*' }))).toBe(412);
    expect([await read('star.txt'), await read('moved.txt'), await read('copied.txt')]).toEqual(['two', 404, 404]);
    expect(await statusOf(restore({ 'if-match': await etagOf('star.txt') }))).toBe(200);
    expect(await read('star.txt')).toBe('one');
  });
});
