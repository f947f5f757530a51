import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ListPage } from '@codeagent/service-kit';
import { bearer, createAndLogin, startTestBackend, type RunDto, type TestBackend, type WorkspaceDto } from '../testing.js';

const b64 = (value: string) => Buffer.from(value).toString('base64url');
const ID = '3f2c7a4e-9b1d-4c8e-a6f0-1d2e3f405162';

/** docs/contract/spec.md §4.5: a malformed or foreign cursor, or a body nested deeper than 64 levels: 400, never 500. */
describe(`malformed input (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let ws: string;
  beforeAll(async () => {
    b = await startTestBackend();
    editor = await createAndLogin(b, 'ed@example.com');
    ws = (
      await b.app.inject({
        method: 'POST',
        url: '/api/v1/platform/workspaces',
        headers: bearer(b.adminToken),
        payload: { name: 'w', admin_user_id: editor.id },
      })
    ).json<WorkspaceDto>().id;
  });
  afterAll(async () => {
    await b.close();
  });

  // Each is foreign to every list: wrong arity, or wrong kinds for both shapes ([time, uuid] and [path]).
  const CURSORS: [string, string][] = [
    [b64('["zzz","x"]'), 'the issue’s example'],
    [b64(`["2024-05-06T07:08:09.123Z","x"]`), 'a non-UUID id'],
    [b64(`["zzz","${ID}"]`), 'a bad date'],
    [b64(`[1,"${ID}"]`), 'a number for the date'],
    [b64('[]'), 'no field'],
    [b64(`[null]`), 'null'],
    [b64(`["2024-05-06T07:08:09.123Z","${ID}",3]`), 'too many fields'],
    [b64('{"a":1}'), 'an object'],
    [b64('["a\\u0000b"]'), 'a NUL byte (PostgreSQL text refuses it)'],
    [b64('[42]'), 'a number for a path'],
    ['%%%', 'not base64url'],
  ];

  const LISTS = () =>
    [
      ['/api/v1/platform/users', b.adminToken],
      ['/api/v1/platform/workspaces', b.adminToken],
      ['/api/v1/platform/workspaces?include_deleted=true', b.adminToken],
      [`/api/v1/platform/workspaces/${ws}/members`, b.adminToken],
      [`/api/v1/workspaces/${ws}/runs`, editor.token],
      [`/api/v1/workspaces/${ws}/runs?status=queued`, editor.token],
      [`/api/v1/workspaces/${ws}/schedules`, editor.token],
      [`/api/v1/data-resources/${ws}/objects`, editor.token],
      [`/api/v1/data-resources/${ws}/objects?prefix=a/`, editor.token],
      [`/api/v1/data-resources/${ws}/trash`, editor.token],
    ] as const;

  it('answers 400 invalid_request for every foreign cursor on every list', async () => {
    for (const [url, token] of LISTS()) {
      // The list works without a cursor…
      expect((await b.app.inject({ method: 'GET', url, headers: bearer(token) })).statusCode, url).toBe(200);
      for (const [cursor, why] of CURSORS) {
        const sep = url.includes('?') ? '&' : '?';
        const res = await b.app.inject({ method: 'GET', url: `${url}${sep}cursor=${encodeURIComponent(cursor)}`, headers: bearer(token) });
        expect(res.statusCode, `${url} ${why}`).toBe(400);
        expect(res.json(), `${url} ${why}`).toMatchObject({ error: 'invalid_request', fields: { cursor: expect.any(String) as unknown } });
      }
    }
  });

  it('answers 400 invalid_request for 5,000 nested arrays in a run’s parameters, and queues nothing', async () => {
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    const res = await b.app.inject({
      method: 'POST',
      url: `/api/v1/workspaces/${ws}/runs`,
      headers: { ...bearer(editor.token), 'content-type': 'application/json' },
      payload: `{"notebook_path":"a.ipynb","parameters":{"x":${deep}}}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { body: expect.stringMatching(/64/) as unknown } });
    const runs = await b.app.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/runs`, headers: bearer(editor.token) });
    expect(runs.json<ListPage<RunDto>>().items).toEqual([]);
    // The same depth limit on every JSON route, before authentication matters.
    const login = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: `{"email":${deep}}`,
    });
    expect(login.statusCode).toBe(400);
  });

  it('a wrong member role names the allowed roles; the list filter names the run statuses', async () => {
    const user = await createAndLogin(b, 'member@example.com');
    const res = await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: user.id, role: 'owner' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { role: 'must be one of admin, editor, viewer' } });
    expect(res.json<{ message: string }>().message).toContain('role must be one of admin, editor, viewer');
    const runs = await b.app.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/runs?status=lost`, headers: bearer(editor.token) });
    expect(runs.statusCode).toBe(400);
    expect(runs.json<{ fields: Record<string, string> }>().fields.status).toMatch(/^must be one of queued, running, /);
  });

  it('logged out, the same wrong role is 401 and adds no member', async () => {
    const user = await createAndLogin(b, 'outsider@example.com');
    const res = await b.app.inject({ method: 'POST', url: `/api/v1/platform/workspaces/${ws}/members`, payload: { user_id: user.id, role: 'owner' } });
    expect(res.statusCode).toBe(401);
    const members = await b.app.inject({ method: 'GET', url: `/api/v1/platform/workspaces/${ws}/members`, headers: bearer(b.adminToken) });
    expect(JSON.stringify(members.json())).not.toContain(user.id);
  });

  it('answers 400 for a U+0000 in any text PostgreSQL would store or match (it was a 500), and stores nothing', async () => {
    const nul = 'a\u0000b';
    const sends: [string, string, string, object | undefined, string | undefined][] = [
      ['logged out: a login', 'POST', '/api/v1/auth/login', { email: nul, password: nul }, undefined],
      ['a workspace', 'POST', '/api/v1/platform/workspaces', { name: nul, description: nul }, b.adminToken],
      ['a description', 'PATCH', `/api/v1/platform/workspaces/${ws}`, { description: nul }, b.adminToken],
      ['a user', 'POST', '/api/v1/platform/users', { email: 'nul@example.com', name: nul, password: 'a long enough password' }, b.adminToken],
    ];
    for (const [what, method, url, payload, token] of sends) {
      const res = await b.app.inject({ method: method as 'POST', url, ...(token ? { headers: bearer(token) } : {}), payload });
      expect(res.statusCode, what).toBe(400);
      expect(res.json(), what).toMatchObject({ error: 'invalid_request', message: expect.stringMatching(/U\+0000/) as unknown });
    }
    const users = await b.app.inject({ method: 'GET', url: '/api/v1/platform/users', headers: bearer(b.adminToken) });
    expect(JSON.stringify(users.json())).not.toContain('nul@example.com');
    const workspace = await b.app.inject({ method: 'GET', url: `/api/v1/platform/workspaces/${ws}`, headers: bearer(b.adminToken) });
    expect(workspace.json<WorkspaceDto>().description).toBe('');
  });

  it('logged out, a login of more than 16 KiB is 413 and a deep one 400, before any parsing or throttling', async () => {
    const big = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ email: 'admin@example.com', password: 'x'.repeat(20 * 1024) }),
    });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toMatchObject({ error: 'payload_too_large' });
    const deep = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '['.repeat(16 * 1024),
    });
    expect(deep.statusCode).toBe(400);
    expect(deep.json()).toMatchObject({ error: 'invalid_request', fields: { body: expect.stringMatching(/64/) as unknown } });
    // A change of one's own password too.
    const password = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/password',
      headers: bearer(editor.token),
      payload: { current_password: 'x'.repeat(20 * 1024), new_password: 'a-new-password-1' },
    });
    expect(password.statusCode).toBe(413);
  });
});
