import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedBytes } from '@codeagent/files';
import { bearer, createAndLogin, startTestBackend, type TestBackend, type WorkspaceDto } from '../testing.js';

/** WORKSPACE_QUOTA_BYTES (docs/contract/spec.md §4.5): current objects + versions + trash, 507 beyond, nothing written. */
describe(`workspace storage quota (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  const QUOTA = 1000;
  let b: TestBackend;
  let editor: { id: string; token: string };
  let base: string;
  beforeAll(async () => {
    b = await startTestBackend({ workspaceQuotaBytes: QUOTA });
    editor = await createAndLogin(b, 'quota-editor@example.com');
    base = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  });
  afterAll(async () => {
    await b.close();
  });

  async function workspace(): Promise<string> {
    const ws = (
      await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'quota' } })
    ).json<WorkspaceDto>().id;
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: editor.id, role: 'editor' },
    });
    return ws;
  }
  const bytes = (n: number, fill = 'x') => fill.repeat(n);
  const put = (ws: string, path: string, body: string) =>
    fetch(`${base}/api/v1/data-resources/${ws}/objects/${path}`, { method: 'PUT', body, headers: { ...bearer(editor.token), 'content-type': 'text/plain' } });
  const get = async (ws: string, path: string) => {
    const res = await fetch(`${base}/api/v1/data-resources/${ws}/objects/${path}`, { headers: bearer(editor.token) });
    return { status: res.status, body: await res.text() };
  };
  const json = (ws: string, method: string, path: string, payload?: object) =>
    fetch(`${base}/api/v1/data-resources/${ws}/${path}`, {
      method,
      headers: { ...bearer(editor.token), ...(payload ? { 'content-type': 'application/json' } : {}) },
      ...(payload ? { body: JSON.stringify(payload) } : {}),
    });
  const expect507 = async (res: Response) => {
    expect(res.status).toBe(507);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe('quota_exceeded');
    expect(body.message).toMatch(/WORKSPACE_QUOTA_BYTES/);
  };

  it('refuses a PUT beyond the quota with 507; nothing written, the old content intact', async () => {
    const ws = await workspace();
    expect((await put(ws, 'a.txt', bytes(600, 'a'))).status).toBe(201);
    await expect507(await put(ws, 'big.txt', bytes(500)));
    expect((await get(ws, 'big.txt')).status).toBe(404);
    // Replacing keeps the old content as a version: 600 + 600 > 1000.
    await expect507(await put(ws, 'a.txt', bytes(600, 'b')));
    expect(await get(ws, 'a.txt')).toEqual({ status: 200, body: bytes(600, 'a') });
    const versions = (await (await json(ws, 'GET', 'versions/a.txt')).json()) as { items: unknown[] };
    expect(versions.items).toHaveLength(1);
    // Exactly up to the quota is fine.
    expect((await put(ws, 'fill.txt', bytes(400))).status).toBe(201);
    expect(await storedBytes(b.t.database.db, ws)).toBe(QUOTA);
    await expect507(await put(ws, 'one-more.txt', 'x'));
    // An empty file adds nothing.
    expect((await put(ws, 'empty.txt', '')).status).toBe(201);
  });

  it('counts versions and the trash; purging the trash makes room; a trash restore adds nothing', async () => {
    const ws = await workspace();
    expect((await put(ws, 'v.txt', bytes(300, '1'))).status).toBe(201);
    expect((await put(ws, 'v.txt', bytes(300, '2'))).status).toBe(200);
    expect(await storedBytes(b.t.database.db, ws)).toBe(600);
    expect((await json(ws, 'DELETE', 'objects/v.txt')).status).toBe(204);
    expect(await storedBytes(b.t.database.db, ws)).toBe(600);
    await expect507(await put(ws, 'w.txt', bytes(500)));
    const trash = (await (await json(ws, 'GET', 'trash')).json()) as { items: { id: string }[] };
    // Restoring from the trash moves bytes without adding any: allowed even when full.
    expect((await put(ws, 'filler.txt', bytes(400))).status).toBe(201);
    expect((await json(ws, 'POST', `trash/${trash.items[0]!.id}/restore`)).status).toBe(200);
    expect(await get(ws, 'v.txt')).toEqual({ status: 200, body: bytes(300, '2') });
    expect((await json(ws, 'DELETE', 'objects/filler.txt')).status).toBe(204);
    const again = (await (await json(ws, 'GET', 'trash')).json()) as { items: { id: string }[] };
    expect((await json(ws, 'DELETE', `trash/${again.items[0]!.id}`)).status).toBe(204);
    expect(await storedBytes(b.t.database.db, ws)).toBe(600);
    expect((await put(ws, 'w.txt', bytes(400))).status).toBe(201);
  });

  it('refuses a version restore beyond the quota, and a multipart upload', async () => {
    const ws = await workspace();
    expect((await put(ws, 'r.txt', bytes(400, 'o'))).status).toBe(201);
    expect((await put(ws, 'r.txt', bytes(10, 'n'))).status).toBe(200);
    const versions = (await (await json(ws, 'GET', 'versions/r.txt')).json()) as { items: { version_id: string; current: boolean }[] };
    const old = versions.items.find((v) => !v.current)!.version_id;
    expect((await put(ws, 'pad.txt', bytes(300))).status).toBe(201); // 410 + 300 = 710; restoring 400 more is too much
    await expect507(await json(ws, 'POST', 'versions/r.txt/restore', { version_id: old }));
    expect(await get(ws, 'r.txt')).toEqual({ status: 200, body: bytes(10, 'n') });
    expect((await json(ws, 'DELETE', 'objects/pad.txt')).status).toBe(204);
    const trash = (await (await json(ws, 'GET', 'trash')).json()) as { items: { id: string }[] };
    expect((await json(ws, 'DELETE', `trash/${trash.items[0]!.id}`)).status).toBe(204);
    expect((await json(ws, 'POST', 'versions/r.txt/restore', { version_id: old })).status).toBe(200);
    expect(await get(ws, 'r.txt')).toEqual({ status: 200, body: bytes(400, 'o') });

    const form = new FormData();
    form.append('path', 'up/big.bin');
    form.append('file', new Blob([bytes(600)]), 'big.bin');
    await expect507(await fetch(`${base}/api/v1/data-resources/${ws}/uploads`, { method: 'POST', body: form, headers: bearer(editor.token) }));
    expect((await get(ws, 'up/big.bin')).status).toBe(404);
    // A file that arrives in many chunks: the quota's refusal fails the form's stream while it
    // is read, and is still the answer (it was a 400 "not a whole form").
    const large = new FormData();
    large.append('path', 'up/big.bin');
    large.append('file', new Blob([bytes(256 * 1024)]), 'big.bin');
    await expect507(await fetch(`${base}/api/v1/data-resources/${ws}/uploads`, { method: 'POST', body: large, headers: bearer(editor.token) }));
    expect((await get(ws, 'up/big.bin')).status).toBe(404);
  });

  it('refuses a WebDAV COPY that cannot fit before emptying its Destination (507, what was there still there)', async () => {
    const ws = await workspace();
    expect((await put(ws, 'src.bin', bytes(QUOTA / 2 + 1))).status).toBe(201);
    expect((await put(ws, 'dst/keep.txt', 'important')).status).toBe(201);
    const copy = await fetch(`${base}/api/v1/dav/${ws}/src.bin`, {
      method: 'COPY',
      headers: { ...bearer(editor.token), destination: `/api/v1/dav/${ws}/dst`, overwrite: 'T' },
    });
    await expect507(copy);
    // Before: 507 "Nothing was written", and dst/keep.txt was in the trash.
    expect(await get(ws, 'dst/keep.txt')).toEqual({ status: 200, body: 'important' });
  });

  it('admits parallel uploads one by one: they cannot squeeze past the quota together', async () => {
    const ws = await workspace();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => put(ws, `p/${i}.txt`, bytes(300))));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 507)).toHaveLength(5);
    await Promise.all(results.map((r) => r.body?.cancel() ?? Promise.resolve()));
    expect(await storedBytes(b.t.database.db, ws)).toBe(900);
    const list = (await (await json(ws, 'GET', 'objects?prefix=p/')).json()) as { items: unknown[] };
    expect(list.items).toHaveLength(3);
  });

  it('keeps each workspace to its own quota', async () => {
    const [one, two] = [await workspace(), await workspace()];
    expect((await put(one, 'x.txt', bytes(900))).status).toBe(201);
    expect((await put(two, 'x.txt', bytes(900))).status).toBe(201);
    await expect507(await put(one, 'y.txt', bytes(200)));
  });
});
