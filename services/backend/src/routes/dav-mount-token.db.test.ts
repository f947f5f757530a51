import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueMountToken, mountTokenKey } from '@codeagent/auth';
import { INTERNAL_TOKEN, bearer, startTestBackend, type TestBackend } from '../testing.js';

/**
 * Workspace mount tokens (decision 0140): minted by the runtime with a key derived from
 * INTERNAL_SERVICE_TOKEN, accepted by the WebDAV tree of their own workspace only, never by the
 * REST API; expired, tampered or foreign-key tokens are refused.
 */
describe(`workspace mount tokens (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let ws: string;
  let other: string;
  const key = mountTokenKey(INTERNAL_TOKEN);

  beforeAll(async () => {
    b = await startTestBackend();
    const create = async (name: string) =>
      (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name } })).json<{ id: string }>().id;
    ws = await create('mnt');
    other = await create('mnt-other');
    // Both workspaces hold a file: a refusal is about the token, not an empty tree.
    for (const w of [ws, other]) {
      const res = await b.app.inject({
        method: 'PUT',
        url: `/api/v1/dav/${w}/a.txt`,
        headers: { ...bearer(b.adminToken), 'content-type': 'text/plain' },
        payload: 'hello',
      });
      expect(res.statusCode).toBe(201);
    }
  });
  afterAll(async () => {
    await b?.close();
  });

  const basic = (token: string) => ({ authorization: `Basic ${Buffer.from(`mount:${token}`).toString('base64')}` });

  it('opens its own workspace through WebDAV (Bearer or Basic), reading and writing as the platform', async () => {
    const { token } = issueMountToken(key, ws);
    const read = await b.app.inject({ method: 'GET', url: `/api/v1/dav/${ws}/a.txt`, headers: bearer(token) });
    expect(read.statusCode).toBe(200);
    expect(read.body).toBe('hello');
    const listed = await b.app.inject({ method: 'PROPFIND', url: `/api/v1/dav/${ws}/`, headers: { ...basic(token), depth: '1' } });
    expect(listed.statusCode).toBe(207);
    const put = await b.app.inject({ method: 'PUT', url: `/api/v1/dav/${ws}/b.txt`, headers: { ...basic(token), 'content-type': 'text/plain' }, payload: 'x' });
    expect(put.statusCode).toBe(201);
    const stat = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects`, headers: bearer(b.adminToken) });
    const b2 = stat.json<{ items: { path: string; updated_by: string | null }[] }>().items.find((o) => o.path === 'b.txt');
    expect(b2).toMatchObject({ path: 'b.txt', updated_by: null });
  });

  it('is 404 for another workspace, as for a non-member', async () => {
    const { token } = issueMountToken(key, ws);
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const res = await b.app.inject({ method, url: `/api/v1/dav/${other}/a.txt`, headers: bearer(token), ...(method === 'PUT' ? { payload: 'y' } : {}) });
      expect(res.statusCode, method).toBe(404);
    }
  });

  it('is refused by the REST API', async () => {
    const { token } = issueMountToken(key, ws);
    for (const url of [`/api/v1/data-resources/${ws}/objects`, `/api/v1/auth/session`, `/api/v1/workspaces/${ws}/runs`, '/api/v1/platform/workspaces']) {
      const res = await b.app.inject({ method: 'GET', url, headers: bearer(token) });
      expect(res.statusCode, url).toBe(401);
    }
    // Nor as a cookie on the tree itself: only the platform's mount sends it, in the header.
    const cookie = await b.app.inject({ method: 'GET', url: `/api/v1/dav/${ws}/a.txt`, headers: { cookie: `codeagent_session=${token}` } });
    expect(cookie.statusCode).toBe(401);
  });

  it('refuses an expired, tampered, over-long or foreign-key token', async () => {
    const expired = issueMountToken(key, ws, 60, Date.now() - 120_000).token;
    const tampered = (() => {
      const { token } = issueMountToken(key, ws);
      const [, payload, sig] = token.split('.');
      const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as { ws: string };
      claims.ws = other;
      return `mnt.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${sig}`;
    })();
    const foreign = issueMountToken(mountTokenKey('another-platform'), ws).token;
    const flipped = (() => {
      const { token } = issueMountToken(key, ws);
      return token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    })();
    for (const [name, token] of Object.entries({ expired, tampered, foreign, flipped, bare: 'mnt.', junk: 'mnt.x.y.z' })) {
      const res = await b.app.inject({ method: 'GET', url: `/api/v1/dav/${ws}/a.txt`, headers: bearer(token) });
      expect(res.statusCode, name).toBe(401);
      expect(res.body).not.toContain(token);
    }
    const res = await b.app.inject({ method: 'GET', url: `/api/v1/dav/${ws}/a.txt`, headers: bearer(expired) });
    expect(res.json<{ message: string }>().message).toMatch(/expired/);
  });

  it('stops working when its workspace is deleted', async () => {
    const gone = (
      await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'mnt-gone' } })
    ).json<{
      id: string;
    }>().id;
    const { token } = issueMountToken(key, gone);
    expect((await b.app.inject({ method: 'PROPFIND', url: `/api/v1/dav/${gone}/`, headers: { ...bearer(token), depth: '0' } })).statusCode).toBe(207);
    expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${gone}`, headers: bearer(b.adminToken) })).statusCode).toBeLessThan(300);
    expect((await b.app.inject({ method: 'PROPFIND', url: `/api/v1/dav/${gone}/`, headers: { ...bearer(token), depth: '0' } })).statusCode).toBe(404);
  });
});
