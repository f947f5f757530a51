import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorBody, ListPage } from '@codeagent/service-kit';
import { bearer, createAndLogin, startTestBackend, type MemberDto, type TestBackend, type UserDto, type WorkspaceDto } from '../testing.js';

/** `/api/v1/platform…` of the backend `b`, as its bootstrap administrator unless another token is given. */
const platformApi =
  (b: () => TestBackend) =>
  (method: string, url: string, payload?: unknown, token = b().adminToken) =>
    b().app.inject({
      method: method as 'GET',
      url: `/api/v1/platform${url}`,
      headers: bearer(token),
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

describe(`platform administration (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let alice: { id: string; token: string };
  let bob: { id: string; token: string };
  beforeAll(async () => {
    b = await startTestBackend();
    alice = await createAndLogin(b, 'alice@example.com');
    bob = await createAndLogin(b, 'bob@example.com');
  });
  afterAll(async () => {
    await b.close();
  });

  const api = platformApi(() => b);

  const newWorkspace = async (name = 'ws') => (await api('POST', '/workspaces', { name })).json<{ id: string }>().id;

  describe('users', () => {
    it('creates a user (201) with the default role user', async () => {
      const res = await api('POST', '/users', { email: 'Carol@Example.com', name: 'Carol', password: 'password-123' });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ email: 'carol@example.com', name: 'Carol', platform_role_id: 'user', is_system_admin: false });
    });

    it('creates a system administrator with platform_role_id admin', async () => {
      const res = await api('POST', '/users', { email: 'root2@example.com', name: 'Root', password: 'password-123', platform_role_id: 'admin' });
      expect(res.statusCode).toBe(201);
      expect(res.json<UserDto>().is_system_admin).toBe(true);
    });

    it('refuses a duplicate email (case-insensitive) with 409 conflict', async () => {
      const res = await api('POST', '/users', { email: 'ALICE@example.com', name: 'A', password: 'password-123' });
      expect(res.statusCode).toBe(409);
      expect(res.json<ErrorBody>().error).toBe('conflict');
    });

    it('validates the body: 400 invalid_request naming the fields', async () => {
      const res = await api('POST', '/users', { email: 'not-an-email', name: '', password: 'short' });
      expect(res.statusCode).toBe(400);
      expect(res.json<ErrorBody>().error).toBe('invalid_request');
      expect(Object.keys(res.json<Required<ErrorBody>>().fields)).toEqual(expect.arrayContaining(['email']));
      const role = await api('POST', '/users', { email: 'dave@example.com', name: 'D', password: 'password-123', platform_role_id: 'wizard' });
      expect(role.statusCode).toBe(400);
      expect(role.json<ErrorBody>().fields).toHaveProperty('platform_role_id');
      const extra = await api('POST', '/users', { email: 'erin@example.com', name: 'E', password: 'password-123', is_system_admin: true });
      expect(extra.statusCode).toBe(400);
    });

    it('refuses names every member would see wrong: bidirectional controls, other control characters, blank (decision 0233); every script passes', async () => {
      const user = (name: string, email: string) => api('POST', '/users', { email, name, password: 'password-123' });
      const spoof = await user('Ada\u202Enimda', 'spoof@example.com');
      expect(spoof.statusCode).toBe(400);
      expect(spoof.json()).toMatchObject({ error: 'invalid_request', fields: { name: expect.stringContaining('U+202E') as unknown } });
      expect((await user('Ada\nAdmin', 'newline@example.com')).json<ErrorBody>().fields?.name).toContain('U+000A');
      // An invisible character: "Ada\u200b" shows as the "Ada" it is not (decision 0224's addendum).
      expect((await user('Ada\u200b', 'zwsp@example.com')).json<ErrorBody>().fields?.name).toContain('U+200B');
      expect((await user('   ', 'blank@example.com')).statusCode).toBe(400);
      // Nothing was created by the refusals.
      expect((await user('Spoof', 'spoof@example.com')).statusCode).toBe(201);
      for (const [name, email] of [
        ['عائشة', 'aisha@example.com'],
        ['שרה', 'sara@example.com'],
        ['Zoë 山田', 'zoe@example.com'],
      ] as const) {
        expect((await user(name, email)).statusCode, name).toBe(201);
      }
      const ws = await newWorkspace('Plain');
      expect((await api('POST', '/workspaces', { name: 'Team\u2066 evil' })).statusCode).toBe(400);
      const renamed = await api('PATCH', `/workspaces/${ws}`, { name: 'Plain\u200F' });
      expect(renamed.statusCode).toBe(400);
      expect((await api('GET', `/workspaces/${ws}`)).json<WorkspaceDto>().name).toBe('Plain');
      const id = (await api('GET', '/users?limit=1000')).json<ListPage<UserDto>>().items.find((u) => u.email === 'zoe@example.com')!.id;
      expect((await api('PATCH', `/users/${id}`, { name: 'Zoë\u202D' })).statusCode).toBe(400);
      // A change without a name is not held back by the rule.
      expect((await api('PATCH', `/users/${id}`, { disabled: false })).statusCode).toBe(200);
    });

    it('lists users with limit and cursor', async () => {
      const all = await api('GET', '/users');
      expect(all.statusCode).toBe(200);
      const total = all.json<ListPage<UserDto>>().items.length;
      expect(total).toBeGreaterThanOrEqual(4);
      expect(all.json<ListPage<UserDto>>().next_cursor).toBeNull();
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: { id: string }[]; next_cursor: string | null } = (await api('GET', `/users?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json();
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((u) => u.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual(all.json<ListPage<UserDto>>().items.map((u) => u.id));
      // Users created in the same millisecond: the id decides, each user once (one at a time).
      await sql`UPDATE users SET created_at = '2026-01-01T00:00:00Z'`.execute(b.t.database.db);
      const tied: string[] = [];
      do {
        const page: { items: { id: string }[]; next_cursor: string | null } = (await api('GET', `/users?limit=1${cursor ? `&cursor=${cursor}` : ''}`)).json();
        tied.push(...page.items.map((u) => u.id));
        cursor = page.next_cursor;
      } while (cursor && tied.length < 100);
      expect(tied).toEqual([...seen].sort());
      expect((await api('GET', '/users?limit=0')).statusCode).toBe(400);
      expect((await api('GET', '/users?limit=1001')).statusCode).toBe(400);
      expect((await api('GET', '/users?cursor=garbage')).statusCode).toBe(400);
    });

    it('forbids non-administrators (403) and anonymous callers (401)', async () => {
      const res = await api('GET', '/users', undefined, alice.token);
      expect(res.statusCode).toBe(403);
      expect(res.json<ErrorBody>().error).toBe('forbidden');
      const anon = await b.app.inject({ method: 'GET', url: '/api/v1/platform/users' });
      expect(anon.statusCode).toBe(401);
      expect(anon.json<ErrorBody>().error).toBe('unauthorized');
    });
  });

  describe('workspaces', () => {
    it('creates a workspace with the caller as its first admin', async () => {
      const res = await api('POST', '/workspaces', { name: 'Research', description: 'papers' });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ name: 'Research', description: 'papers', deleted_at: null, member_count: 1 });
      const members = (await api('GET', `/workspaces/${res.json<WorkspaceDto>().id}/members`)).json<ListPage<MemberDto>>();
      expect(members.items).toEqual([expect.objectContaining({ user_id: b.adminId, role: 'admin', email: 'admin@localhost' })]);
    });

    it('creates a workspace whose first admin is admin_user_id', async () => {
      const res = await api('POST', '/workspaces', { name: 'Alice WS', admin_user_id: alice.id });
      expect(res.statusCode).toBe(201);
      const members = (await api('GET', `/workspaces/${res.json<WorkspaceDto>().id}/members`)).json<ListPage<MemberDto>>();
      expect(members.items).toEqual([expect.objectContaining({ user_id: alice.id, role: 'admin' })]);
      const unknown = await api('POST', '/workspaces', { name: 'x', admin_user_id: '00000000-0000-0000-0000-000000000000' });
      expect(unknown.statusCode).toBe(404);
      expect((await api('POST', '/workspaces', { description: 'no name' })).statusCode).toBe(400);
    });

    it('reads, updates, lists and soft-deletes a workspace', async () => {
      const id = await newWorkspace('Before');
      const got = await api('GET', `/workspaces/${id}`);
      expect(got.statusCode).toBe(200);
      expect(Object.keys(got.json()).sort()).toEqual(['created_at', 'deleted_at', 'description', 'id', 'member_count', 'name', 'updated_at']);
      const patched = await api('PATCH', `/workspaces/${id}`, { name: 'After', description: 'changed' });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({ name: 'After', description: 'changed' });
      expect((await api('PATCH', `/workspaces/${id}`, { name: '' })).statusCode).toBe(400);
      expect((await api('GET', '/workspaces')).json<ListPage<WorkspaceDto>>().items.map((w) => w.id)).toContain(id);

      const del = await api('DELETE', `/workspaces/${id}`);
      expect(del.statusCode).toBe(204);
      expect((await api('DELETE', `/workspaces/${id}`)).statusCode).toBe(404);
      expect((await api('GET', `/workspaces/${id}`)).statusCode).toBe(404);
      expect((await api('PATCH', `/workspaces/${id}`, { name: 'x' })).statusCode).toBe(404);
      expect((await api('GET', '/workspaces')).json<ListPage<WorkspaceDto>>().items.map((w) => w.id)).not.toContain(id);
      const withDeleted = (await api('GET', '/workspaces?include_deleted=true')).json<ListPage<WorkspaceDto>>().items.find((w) => w.id === id);
      expect(withDeleted?.deleted_at).not.toBeNull();
    });

    it('soft delete cascades to the members in the same transaction', async () => {
      const id = await newWorkspace('Cascade');
      await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'editor' });
      await api('POST', `/workspaces/${id}/members`, { user_id: bob.id, role: 'viewer' });
      expect((await api('GET', `/workspaces/${id}`)).json<WorkspaceDto>().member_count).toBe(3);
      await api('DELETE', `/workspaces/${id}`);
      const rows = await b.t.database.db.selectFrom('workspace_members').select(['user_id', 'deleted_at']).where('workspace_id', '=', id).execute();
      expect(rows).toHaveLength(3);
      expect(rows.every((r) => r.deleted_at !== null)).toBe(true);
      const ws = await b.t.database.db.selectFrom('workspaces').select('deleted_at').where('id', '=', id).executeTakeFirstOrThrow();
      expect(rows[0]!.deleted_at!.getTime()).toBe(ws.deleted_at!.getTime());
      expect((await api('GET', `/workspaces/${id}/members`)).statusCode).toBe(404);
      const aliceMe = await b.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(alice.token) });
      expect(aliceMe.json<{ workspaces: { id: string }[] }>().workspaces.map((w) => w.id)).not.toContain(id);
    });

    it('answers 404 for unknown and malformed ids', async () => {
      expect((await api('GET', '/workspaces/00000000-0000-0000-0000-000000000000')).statusCode).toBe(404);
      expect((await api('GET', '/workspaces/not-a-uuid')).json<ErrorBody>().error).toBe('not_found');
    });
  });

  describe('members', () => {
    it('adds, lists, changes and removes members', async () => {
      const id = await newWorkspace('Team');
      const added = await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'editor' });
      expect(added.statusCode).toBe(201);
      expect(Object.keys(added.json()).sort()).toEqual(['created_at', 'email', 'name', 'role', 'updated_at', 'user_id', 'workspace_id']);
      expect(added.json()).toMatchObject({ workspace_id: id, user_id: alice.id, email: 'alice@example.com', role: 'editor' });
      expect((await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'viewer' })).json<ErrorBody>().error).toBe('conflict');
      expect((await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'viewer' })).statusCode).toBe(409);
      expect((await api('POST', `/workspaces/${id}/members`, { user_id: '00000000-0000-0000-0000-000000000000', role: 'viewer' })).statusCode).toBe(404);
      expect((await api('POST', `/workspaces/${id}/members`, { user_id: bob.id, role: 'owner' })).statusCode).toBe(400);

      const changed = await api('PATCH', `/workspaces/${id}/members/${alice.id}`, { role: 'admin' });
      expect(changed.statusCode).toBe(200);
      expect(changed.json<MemberDto>().role).toBe('admin');
      expect((await api('PATCH', `/workspaces/${id}/members/${bob.id}`, { role: 'admin' })).statusCode).toBe(404);

      const list = (await api('GET', `/workspaces/${id}/members`)).json<ListPage<MemberDto>>();
      expect(list.items.map((m) => m.user_id).sort()).toEqual([b.adminId, alice.id].sort());

      expect((await api('DELETE', `/workspaces/${id}/members/${alice.id}`)).statusCode).toBe(204);
      expect((await api('DELETE', `/workspaces/${id}/members/${alice.id}`)).statusCode).toBe(404);
    });

    it('refuses to remove or demote the last admin with 409 last_admin', async () => {
      const id = (await api('POST', '/workspaces', { name: 'Solo', admin_user_id: alice.id })).json<WorkspaceDto>().id;
      await api('POST', `/workspaces/${id}/members`, { user_id: bob.id, role: 'editor' });
      const demote = await api('PATCH', `/workspaces/${id}/members/${alice.id}`, { role: 'viewer' });
      expect(demote.statusCode).toBe(409);
      expect(demote.json<ErrorBody>().error).toBe('last_admin');
      const remove = await api('DELETE', `/workspaces/${id}/members/${alice.id}`);
      expect(remove.statusCode).toBe(409);
      expect(remove.json<ErrorBody>().error).toBe('last_admin');
      // an admin "changed" to admin is fine, and non-admins can go
      expect((await api('PATCH', `/workspaces/${id}/members/${alice.id}`, { role: 'admin' })).statusCode).toBe(200);
      expect((await api('DELETE', `/workspaces/${id}/members/${bob.id}`)).statusCode).toBe(204);
      // with a second admin the first may go
      await api('POST', `/workspaces/${id}/members`, { user_id: bob.id, role: 'admin' });
      expect((await api('DELETE', `/workspaces/${id}/members/${alice.id}`)).statusCode).toBe(204);
    });

    it('refuses a system administrator removing themselves with 409 self_removal', async () => {
      const id = await newWorkspace('Self');
      await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'admin' });
      const res = await api('DELETE', `/workspaces/${id}/members/${b.adminId}`);
      expect(res.statusCode).toBe(409);
      expect(res.json<ErrorBody>().error).toBe('self_removal');
      // demoting oneself is not removal
      expect((await api('PATCH', `/workspaces/${id}/members/${b.adminId}`, { role: 'editor' })).statusCode).toBe(200);
    });

    it('forbids members routes to non-administrators', async () => {
      const id = await newWorkspace('Closed');
      expect((await api('GET', `/workspaces/${id}/members`, undefined, alice.token)).statusCode).toBe(403);
      expect((await api('POST', `/workspaces/${id}/members`, { user_id: alice.id, role: 'admin' }, alice.token)).statusCode).toBe(403);
      expect((await api('DELETE', `/workspaces/${id}`, undefined, alice.token)).statusCode).toBe(403);
    });
  });
});

// A uuid is the same id in capitals (PostgreSQL reads either); the rules compared strings, so an
// id in capitals got past them (hostile review: the platform left without an administrator).
describe(`platform rules with ids in capitals (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  beforeAll(async () => {
    b = await startTestBackend();
  });
  afterAll(async () => {
    await b.close();
  });
  const api = platformApi(() => b);

  it('self_removal and last_admin hold whatever the case of the id', async () => {
    const me = b.adminId.toUpperCase();
    expect(me).not.toBe(b.adminId);
    for (const [method, url, payload, error] of [
      ['PATCH', `/users/${me}`, { disabled: true }, 'self_removal'],
      ['DELETE', `/users/${me}`, undefined, 'self_removal'],
      ['PATCH', `/users/${me}`, { platform_role_id: 'user' }, 'last_admin'],
    ] as const) {
      const res = await api(method, url, payload);
      expect(res.statusCode, `${method} ${url}`).toBe(409);
      expect(res.json<ErrorBody>().error).toBe(error);
    }
    const admins = await b.t.database.db.selectFrom('users').select('id').where('platform_role_id', '=', 'admin').where('disabled_at', 'is', null).execute();
    expect(admins.map((a) => a.id)).toEqual([b.adminId]);

    const alice = await createAndLogin(b, 'alice-caps@example.com');
    const ws = (await api('POST', '/workspaces', { name: 'Caps' })).json<{ id: string }>().id;
    expect((await api('POST', `/workspaces/${ws}/members`, { user_id: alice.id, role: 'admin' })).statusCode).toBe(201);
    const removal = await api('DELETE', `/workspaces/${ws.toUpperCase()}/members/${me}`);
    expect(removal.statusCode).toBe(409);
    expect(removal.json<ErrorBody>().error).toBe('self_removal');

    // Resetting one's own password by the id in capitals keeps one's own session, as in lower case.
    expect((await api('POST', `/users/${me}/password`, { password: 'another-password-123' })).statusCode).toBe(204);
    expect((await api('GET', '/users')).statusCode).toBe(200);
  });
});
