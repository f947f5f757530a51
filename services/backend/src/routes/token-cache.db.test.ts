import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import type { KyselyPlugin } from 'kysely';
import { bearer, createAndLogin, disableUser, startTestBackend, type TestBackend, type UserDto } from '../testing.js';

/**
 * Token checks are cached per token and forgotten through LISTEN/NOTIFY (decision 0082): the
 * common authenticated request costs at most one database round trip, and a logout, a
 * revocation, a disabling or a role change holds on the very next request, on every instance.
 * `/auth/me`'s workspaces are cached per user the same way (decision 0193): a membership added,
 * changed or removed, a workspace created, renamed or deleted shows on the next request.
 */
describe(`cached token checks across two backends (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  /** The second instance, whose database statements are counted. */
  let other: FastifyInstance;
  let statements = 0;
  const counting: KyselyPlugin = {
    transformQuery: (args) => {
      statements++;
      return args.node;
    },
    transformResult: (args) => Promise.resolve(args.result),
  };

  beforeAll(async () => {
    b = await startTestBackend();
    other = await b.another({ db: b.t.database.db.withPlugin(counting) });
  });
  afterAll(async () => {
    await b.close();
  });

  const me = (app: FastifyInstance, token: string) => app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(token) });
  const login = async (email: string) =>
    (await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: 'password-123' } })).json<{ access_token: string }>()
      .access_token;
  /** Statements one request costs on the counted instance. */
  const cost = async (send: () => Promise<{ statusCode: number }>) => {
    const before = statements;
    const res = await send();
    expect(res.statusCode).toBe(200);
    return statements - before;
  };
  /** Until the instance listens, every request checks the database; then the second request is cached. */
  async function warm(token: string): Promise<void> {
    for (let i = 0; i < 500; i++) {
      await me(other, token);
      if ((await cost(() => me(other, token))) === 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('the token check was never cached');
  }

  it('answers /auth/me and /auth/session without a round trip once the token and the workspaces are read', async () => {
    const u = await createAndLogin(b, 'cost@example.com');
    expect(await cost(() => me(other, u.token))).toBe(2);
    await warm(u.token);
    expect(await cost(() => me(other, u.token))).toBe(0);
    expect(await cost(() => other.inject({ method: 'GET', url: '/api/v1/auth/session', headers: bearer(u.token) }))).toBe(0);
  });

  it('refuses a logged-out token on the very next request, on the other instance too', async () => {
    const u = await createAndLogin(b, 'logout@example.com');
    const second = await login('logout@example.com');
    await warm(u.token);
    await warm(second);
    expect((await b.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: bearer(u.token) })).statusCode).toBe(204);
    expect((await me(other, u.token)).statusCode).toBe(401);
    expect((await me(b.app, u.token)).statusCode).toBe(401);
    // Only that session ended.
    expect((await me(other, second)).statusCode).toBe(200);
  });

  it('ends every session of a disabled user at once, and re-enabling does not bring them back', async () => {
    const u = await createAndLogin(b, 'disabled@example.com');
    await warm(u.token);
    const patch = (disabled: boolean) =>
      b.app.inject({ method: 'PATCH', url: `/api/v1/platform/users/${u.id}`, headers: bearer(b.adminToken), payload: { disabled } });
    expect((await patch(true)).statusCode).toBe(200);
    expect((await me(other, u.token)).statusCode).toBe(401);
    expect((await patch(false)).statusCode).toBe(200);
    expect((await me(other, u.token)).statusCode).toBe(401);
  });

  it('ends the sessions of a user the administrator named in capitals at once too (the announcement carries the stored id)', async () => {
    const u = await createAndLogin(b, 'capitals@example.com');
    await warm(u.token);
    await disableUser(b, u.id.toUpperCase());
    expect((await me(other, u.token)).statusCode).toBe(401);
  });

  it('shows a role change on the next request, and a deleted user is refused at once', async () => {
    const u = await createAndLogin(b, 'promoted@example.com');
    await warm(u.token);
    expect((await other.inject({ method: 'GET', url: '/api/v1/platform/users', headers: bearer(u.token) })).statusCode).toBe(403);
    await b.app.inject({ method: 'PATCH', url: `/api/v1/platform/users/${u.id}`, headers: bearer(b.adminToken), payload: { platform_role_id: 'admin' } });
    expect((await me(other, u.token)).json<UserDto>().platform_role_id).toBe('admin');
    expect((await other.inject({ method: 'GET', url: '/api/v1/platform/users', headers: bearer(u.token) })).statusCode).toBe(200);
    await b.app.inject({ method: 'PATCH', url: `/api/v1/platform/users/${u.id}`, headers: bearer(b.adminToken), payload: { platform_role_id: 'user' } });
    expect((await other.inject({ method: 'GET', url: '/api/v1/platform/users', headers: bearer(u.token) })).statusCode).toBe(403);
    expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/users/${u.id}`, headers: bearer(b.adminToken) })).statusCode).toBe(204);
    expect((await me(other, u.token)).statusCode).toBe(401);
  });

  it('ends the other sessions when a user changes their password (the changing one stays), and after an admin reset', async () => {
    const u = await createAndLogin(b, 'password@example.com');
    const second = await login('password@example.com');
    await warm(u.token);
    await warm(second);
    const changed = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/password',
      headers: bearer(u.token),
      payload: { current_password: 'password-123', new_password: 'password-456' },
    });
    expect(changed.statusCode).toBe(204);
    expect((await me(other, second)).statusCode).toBe(401);
    expect((await me(other, u.token)).statusCode).toBe(200);
    const reset = await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/users/${u.id}/password`,
      headers: bearer(b.adminToken),
      payload: { password: 'password-789' },
    });
    expect(reset.statusCode).toBe(204);
    expect((await me(other, u.token)).statusCode).toBe(401);
  });

  it('never caches a refusal: a forged, foreign or missing token is checked every time', async () => {
    const u = await createAndLogin(b, 'forged@example.com');
    await warm(u.token);
    const [h, p] = u.token.split('.');
    expect((await me(other, `${h}.${p}.${'A'.repeat(43)}`)).statusCode).toBe(401);
    expect((await other.inject({ method: 'GET', url: '/api/v1/auth/me' })).statusCode).toBe(401);
    // A cookie-borne cached token still may not write cross-site.
    const cross = await other.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { cookie: `codeagent_session=${u.token}`, 'sec-fetch-site': 'cross-site' },
    });
    expect(cross.statusCode).toBe(403);
    expect((await me(other, u.token)).statusCode).toBe(200);
  });

  it("shows a change of the user's workspaces on the next /auth/me, on the other instance too", async () => {
    const u = await createAndLogin(b, 'member@example.com');
    const admin = (method: string, url: string, payload?: object) =>
      b.app.inject({ method: method as 'POST', url: `/api/v1/platform${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });
    const workspaces = async () => (await me(other, u.token)).json<{ workspaces: { id: string; name: string; role: string }[] }>().workspaces;
    await warm(u.token);
    expect(await workspaces()).toEqual([]);

    const ws = (await admin('POST', '/workspaces', { name: 'cached-a' })).json<{ id: string }>();
    expect((await admin('POST', `/workspaces/${ws.id}/members`, { user_id: u.id, role: 'viewer' })).statusCode).toBe(201);
    expect(await workspaces()).toEqual([{ id: ws.id, name: 'cached-a', role: 'viewer' }]);
    // Cached again from here: the next reads cost nothing.
    await warm(u.token);
    expect((await admin('PATCH', `/workspaces/${ws.id}/members/${u.id}`, { role: 'editor' })).statusCode).toBe(200);
    expect(await workspaces()).toEqual([{ id: ws.id, name: 'cached-a', role: 'editor' }]);
    await warm(u.token);
    expect((await admin('PATCH', `/workspaces/${ws.id}`, { name: 'cached-b' })).statusCode).toBe(200);
    expect(await workspaces()).toEqual([{ id: ws.id, name: 'cached-b', role: 'editor' }]);
    await warm(u.token);
    expect((await admin('DELETE', `/workspaces/${ws.id}/members/${u.id}`)).statusCode).toBe(204);
    expect(await workspaces()).toEqual([]);

    await warm(u.token);
    const own = (await admin('POST', '/workspaces', { name: 'cached-own', admin_user_id: u.id })).json<{ id: string }>();
    expect(await workspaces()).toEqual([{ id: own.id, name: 'cached-own', role: 'admin' }]);
    await warm(u.token);
    expect((await admin('DELETE', `/workspaces/${own.id}`)).statusCode).toBe(204);
    expect(await workspaces()).toEqual([]);
  });

  it("keeps one user's cached workspaces from another's, and a failed change announces nothing that sticks", async () => {
    const u = await createAndLogin(b, 'first@example.com');
    const v = await createAndLogin(b, 'second@example.com');
    const ws = (
      await b.app.inject({
        method: 'POST',
        url: '/api/v1/platform/workspaces',
        headers: bearer(b.adminToken),
        payload: { name: 'only-first', admin_user_id: u.id },
      })
    ).json<{ id: string }>();
    await warm(u.token);
    await warm(v.token);
    expect((await me(other, u.token)).json<{ workspaces: { id: string }[] }>().workspaces.map((w) => w.id)).toEqual([ws.id]);
    expect((await me(other, v.token)).json<{ workspaces: unknown[] }>().workspaces).toEqual([]);
    // Demoting the last admin is refused (409): nothing changed, the lists stay right.
    const refused = await b.app.inject({
      method: 'PATCH',
      url: `/api/v1/platform/workspaces/${ws.id}/members/${u.id}`,
      headers: bearer(b.adminToken),
      payload: { role: 'viewer' },
    });
    expect(refused.statusCode).toBe(409);
    expect((await me(other, u.token)).json<{ workspaces: { role: string }[] }>().workspaces.map((w) => w.role)).toEqual(['admin']);
  });

  it('applies a membership change to the workspace routes on the next request, on the other instance too, with no query before it', async () => {
    const u = await createAndLogin(b, 'routes@example.com');
    const admin = (method: string, url: string, payload?: object) =>
      b.app.inject({ method: method as 'POST', url: `/api/v1/platform${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });
    const ws = (await admin('POST', '/workspaces', { name: 'routes-ws' })).json<{ id: string }>();
    expect((await admin('POST', `/workspaces/${ws.id}/members`, { user_id: u.id, role: 'editor' })).statusCode).toBe(201);
    const session = (id: string, access: 'read' | 'write') =>
      other.inject({
        method: 'GET',
        url: '/api/v1/auth/session',
        headers: { ...bearer(u.token), 'x-codeagent-workspace': id, 'x-codeagent-access': access },
      });
    const list = () => other.inject({ method: 'GET', url: `/api/v1/data-resources/${ws.id}/objects`, headers: bearer(u.token) });
    await warm(u.token);
    // The membership comes from the cached list: the gateway's check costs no query.
    expect(await cost(() => session(ws.id, 'write'))).toBe(0);
    expect((await session(ws.id.toUpperCase(), 'write')).headers['x-codeagent-workspace-role']).toBe('editor');
    expect((await list()).statusCode).toBe(200);
    // Another workspace, an unknown one and a malformed id stay 404, cached or not.
    const foreign = (await admin('POST', '/workspaces', { name: 'routes-foreign' })).json<{ id: string }>();
    for (const id of [foreign.id, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) expect((await session(id, 'read')).statusCode).toBe(404);

    expect((await admin('PATCH', `/workspaces/${ws.id}/members/${u.id}`, { role: 'viewer' })).statusCode).toBe(200);
    expect((await session(ws.id, 'write')).statusCode).toBe(403);
    expect((await session(ws.id, 'read')).statusCode).toBe(200);
    await warm(u.token);
    // The user id written in capitals is the same user: the removal holds at once all the same.
    expect((await admin('DELETE', `/workspaces/${ws.id}/members/${u.id.toUpperCase()}`)).statusCode).toBe(204);
    expect((await list()).statusCode).toBe(404);
    expect((await session(ws.id, 'read')).statusCode).toBe(404);

    // A deleted workspace is gone for its members at once.
    expect((await admin('POST', `/workspaces/${ws.id}/members`, { user_id: u.id.toUpperCase(), role: 'editor' })).statusCode).toBe(201);
    expect((await list()).statusCode).toBe(200);
    await warm(u.token);
    expect((await admin('DELETE', `/workspaces/${ws.id}`)).statusCode).toBe(204);
    expect((await list()).statusCode).toBe(404);
  });
});
