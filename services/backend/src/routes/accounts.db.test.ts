import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { notifyUserChanged, type DB } from '@codeagent/db';
import type { ObjectDto } from '@codeagent/files';
import type { ErrorBody, ListPage } from '@codeagent/service-kit';
import { buildBackendApp } from '../app.js';
import {
  ADMIN_EMAIL,
  ADMIN_PASSWORD,
  INTERNAL_TOKEN,
  TEST_JWT_SECRET,
  bearer,
  createAndLogin,
  startTestBackend,
  type MemberDto,
  type TestBackend,
  type UserDto,
  type WorkspaceDto,
} from '../testing.js';
import { hashPassword } from '@codeagent/auth';
import { throttleKeys } from '../domain/login-throttle.js';

/** Waits until a statement that starts with `statement` waits for a lock in the test's database. */
async function waitForLock(db: Kysely<DB>, statement: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE ${`${statement}%`}`.execute(db);
    if (rows[0]!.n > 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no statement ${statement} waited for a lock`);
}

/** docs/contract/spec.md §4.5: user administration, immediate revocation of sessions, login throttling. */
describe(`accounts (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  beforeAll(async () => {
    // Locks of 30 s and more (not the default 1 s): a slow login on a loaded machine must not see
    // a lock end before the next attempt; the tests lift locks by hand where they need it.
    b = await startTestBackend({ loginThrottle: { accountFreeFailures: 3, addressFreeFailures: 1000, pruneIntervalSeconds: 0, baseDelaySeconds: 30 } });
  });
  afterAll(async () => {
    await b.close();
  });

  const inject = (method: string, url: string, token?: string, payload?: object, headers: Record<string, string> = {}) =>
    b.app.inject({
      method: method as 'GET',
      url: `/api/v1${url}`,
      headers: { ...(token ? bearer(token) : {}), ...headers },
      ...(payload === undefined ? {} : { payload }),
    });
  const admin = (method: string, url: string, payload?: object) => inject(method, `/platform${url}`, b.adminToken, payload);
  const me = (token: string) => inject('GET', '/auth/me', token);
  const login = (email: string, password: string, address = '127.0.0.1') =>
    b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'x-forwarded-for': address },
      remoteAddress: '127.0.0.1',
      payload: { email, password },
    });
  const tokenOf = async (email: string, password = 'password-123') => {
    const res = await login(email, password);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ access_token: string }>().access_token;
  };
  const db = () => b.t.database.db;

  describe('POST /auth/password (own password)', () => {
    it('changes the password: the other sessions end at once, the caller’s stays', async () => {
      const u = await createAndLogin(b, 'pw-own@example.com');
      const other = await tokenOf('pw-own@example.com');
      const res = await inject('POST', '/auth/password', u.token, { current_password: 'password-123', new_password: 'a-new-password-1' });
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect((await me(other)).statusCode).toBe(401);
      expect((await inject('GET', '/auth/me', undefined, undefined, { cookie: `codeagent_session=${other}` })).statusCode).toBe(401);
      expect((await me(u.token)).statusCode).toBe(200);
      expect((await login('pw-own@example.com', 'password-123')).statusCode).toBe(401);
      const fresh = await tokenOf('pw-own@example.com', 'a-new-password-1');
      expect((await me(fresh)).statusCode).toBe(200);
      // A second change from the fresh session ends the first caller's session too.
      expect((await inject('POST', '/auth/password', fresh, { current_password: 'a-new-password-1', new_password: 'a-third-password' })).statusCode).toBe(204);
      expect((await me(u.token)).statusCode).toBe(401);
      expect((await me(fresh)).statusCode).toBe(200);
    });

    it('answers 401 invalid_credentials for a wrong current password and changes nothing', async () => {
      const u = await createAndLogin(b, 'pw-wrong@example.com');
      const other = await tokenOf('pw-wrong@example.com');
      const res = await inject('POST', '/auth/password', u.token, { current_password: 'not-the-password', new_password: 'a-new-password-1' });
      expect(res.statusCode).toBe(401);
      expect(res.json<ErrorBody>().error).toBe('invalid_credentials');
      expect((await me(other)).statusCode).toBe(200);
      expect((await login('pw-wrong@example.com', 'password-123')).statusCode).toBe(200);
    });

    it('validates the body and needs a session', async () => {
      const u = await createAndLogin(b, 'pw-bad@example.com');
      const short = await inject('POST', '/auth/password', u.token, { current_password: 'password-123', new_password: 'short' });
      expect(short.statusCode).toBe(400);
      expect(short.json()).toMatchObject({ error: 'invalid_request', fields: { new_password: expect.any(String) as unknown } });
      expect((await inject('POST', '/auth/password', u.token, { new_password: 'a-new-password-1' })).statusCode).toBe(400);
      const anonymous = await inject('POST', '/auth/password', undefined, { current_password: 'password-123', new_password: 'a-new-password-1' });
      expect(anonymous.statusCode).toBe(401);
      expect(anonymous.json<ErrorBody>().error).toBe('unauthorized');
    });

    it('loses to a reset or a disabling that committed while it waited for the user: 401, the administrator’s change stays', async () => {
      // (Hostile review: a thief changing the password as an administrator reset it, or disabled
      // the account, kept the password and the session in 8 of 8 races; re-enabling revived it.)
      for (const change of ['reset', 'disable'] as const) {
        const email = `pw-race-${change}@example.com`;
        const u = await createAndLogin(b, email);
        let pending: ReturnType<typeof inject> | undefined;
        await db()
          .transaction()
          .execute(async (trx) => {
            await trx.selectFrom('users').select('id').where('id', '=', u.id).forUpdate().execute();
            pending = inject('POST', '/auth/password', u.token, { current_password: 'password-123', new_password: 'thief-password-1' });
            // The change checked the current password and waits for the user's row.
            await waitForLock(db(), 'select * from "users"');
            // What the administrator's reset or disabling commits meanwhile (updateUser, resetPassword).
            const now = new Date();
            await trx
              .updateTable('users')
              .set(
                change === 'reset'
                  ? { password_hash: await hashPassword('admin-chosen-1'), tokens_valid_after: now, kept_token_jti: null }
                  : { disabled_at: now, tokens_valid_after: now, kept_token_jti: null },
              )
              .where('id', '=', u.id)
              .execute();
            await notifyUserChanged(trx, u.id);
          });
        const res = await pending!;
        expect(res.statusCode, change).toBe(401);
        await expect.poll(async () => (await me(u.token)).statusCode).toBe(401);
        if (change === 'reset') {
          expect((await login(email, 'thief-password-1')).statusCode).toBe(401);
          expect((await login(email, 'admin-chosen-1')).statusCode).toBe(200);
        } else {
          expect((await admin('PATCH', `/users/${u.id}`, { disabled: false })).statusCode).toBe(200);
          expect((await me(u.token)).statusCode).toBe(401);
          expect((await login(email, 'thief-password-1')).statusCode).toBe(401);
        }
      }
    });

    it('throttles wrong current passwords like failed logins: a stolen session is no password oracle', async () => {
      const u = await createAndLogin(b, 'pw-oracle@example.com');
      for (let i = 0; i < 4; i++) {
        expect((await inject('POST', '/auth/password', u.token, { current_password: `guess-${i}`, new_password: 'a-new-password-1' })).statusCode).toBe(401);
      }
      const locked = await inject('POST', '/auth/password', u.token, { current_password: 'password-123', new_password: 'a-new-password-1' });
      expect(locked.statusCode).toBe(429);
      expect(locked.json<ErrorBody>().error).toBe('too_many_requests');
    });
  });

  describe('PATCH /platform/users/{id}', () => {
    it('renames and changes the role; the user answers with disabled_at', async () => {
      const u = await createAndLogin(b, 'patch-1@example.com');
      const res = await admin('PATCH', `/users/${u.id}`, { name: 'Renamed', platform_role_id: 'admin' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ id: u.id, name: 'Renamed', platform_role_id: 'admin', is_system_admin: true, disabled_at: null });
      // The role takes effect on the user's existing token at once.
      expect((await inject('GET', '/platform/users', u.token)).statusCode).toBe(200);
      expect((await admin('PATCH', `/users/${u.id}`, { platform_role_id: 'user' })).statusCode).toBe(200);
      expect((await inject('GET', '/platform/users', u.token)).statusCode).toBe(403);
    });

    it('disables a user: their tokens answer 401 at once, their login answers like bad credentials; enabling does not revive old tokens', async () => {
      const u = await createAndLogin(b, 'patch-dis@example.com');
      const cookieSession = await tokenOf('patch-dis@example.com');
      const res = await admin('PATCH', `/users/${u.id}`, { disabled: true });
      expect(res.statusCode).toBe(200);
      expect(Date.parse(res.json<UserDto>().disabled_at ?? '')).not.toBeNaN();
      expect((await me(u.token)).statusCode).toBe(401);
      expect((await inject('GET', '/auth/me', undefined, undefined, { cookie: `codeagent_session=${cookieSession}` })).statusCode).toBe(401);
      const right = await login('patch-dis@example.com', 'password-123');
      const wrong = await login('patch-dis@example.com', 'not-the-password');
      const unknown = await login('nobody-at-all@example.com', 'password-123');
      expect([right.statusCode, wrong.statusCode, unknown.statusCode]).toEqual([401, 401, 401]);
      expect(right.json()).toEqual(wrong.json());
      expect(right.json()).toEqual(unknown.json());
      expect(right.headers['set-cookie']).toBeUndefined();
      // Listed as disabled.
      const listed = (await admin('GET', '/users?limit=1000')).json<ListPage<UserDto>>().items.find((x) => x.id === u.id);
      expect(listed?.disabled_at).toBe(res.json<UserDto>().disabled_at);

      const enabled = await admin('PATCH', `/users/${u.id}`, { disabled: false });
      expect(enabled.statusCode).toBe(200);
      expect(enabled.json<UserDto>().disabled_at).toBeNull();
      expect((await me(u.token)).statusCode).toBe(401);
      expect((await me(await tokenOf('patch-dis@example.com'))).statusCode).toBe(200);
    });

    it('refuses bad input: unknown role 400, unknown field 400, unknown or malformed id 404', async () => {
      const u = await createAndLogin(b, 'patch-bad@example.com');
      const role = await admin('PATCH', `/users/${u.id}`, { platform_role_id: 'wizard' });
      expect(role.statusCode).toBe(400);
      expect(role.json<ErrorBody>().fields).toHaveProperty('platform_role_id');
      expect((await admin('PATCH', `/users/${u.id}`, { is_system_admin: true })).statusCode).toBe(400);
      expect((await admin('PATCH', `/users/${u.id}`, { disabled: 'yes' })).statusCode).toBe(400);
      expect((await admin('PATCH', `/users/${u.id}`, { name: '' })).statusCode).toBe(400);
      expect((await admin('PATCH', '/users/00000000-0000-4000-8000-000000000000', { name: 'x' })).statusCode).toBe(404);
      expect((await admin('PATCH', '/users/not-a-uuid', { name: 'x' })).statusCode).toBe(404);
    });

    it('is for system administrators only', async () => {
      const u = await createAndLogin(b, 'patch-hostile@example.com');
      const res = await inject('PATCH', `/platform/users/${u.id}`, u.token, { platform_role_id: 'admin' });
      expect(res.statusCode).toBe(403);
      expect(res.json<ErrorBody>().error).toBe('forbidden');
      expect((await inject('PATCH', `/platform/users/${b.adminId}`, u.token, { disabled: true })).statusCode).toBe(403);
      expect((await inject('PATCH', `/platform/users/${u.id}`, undefined, { name: 'x' })).statusCode).toBe(401);
      expect((await me(b.adminToken)).json<UserDto>().disabled_at).toBeNull();
    });

    it('refuses to disable oneself (409 self_removal) and to demote or disable the last active system administrator (409 last_admin)', async () => {
      const self = await admin('PATCH', `/users/${b.adminId}`, { disabled: true });
      expect(self.statusCode).toBe(409);
      expect(self.json<ErrorBody>().error).toBe('self_removal');
      // Every other administrator of this file is demoted first: the bootstrap admin is the last one.
      const others = (await admin('GET', '/users?limit=1000')).json<ListPage<UserDto>>().items.filter((x) => x.is_system_admin && x.id !== b.adminId);
      for (const o of others) expect((await admin('PATCH', `/users/${o.id}`, { platform_role_id: 'user' })).statusCode).toBe(200);
      const demote = await admin('PATCH', `/users/${b.adminId}`, { platform_role_id: 'user' });
      expect(demote.statusCode).toBe(409);
      expect(demote.json<ErrorBody>().error).toBe('last_admin');
      expect((await me(b.adminToken)).json<UserDto>().is_system_admin).toBe(true);
      // A disabled administrator does not count as one.
      const second = await createAndLogin(b, 'patch-admin2@example.com', 'admin');
      expect((await admin('PATCH', `/users/${second.id}`, { disabled: true })).statusCode).toBe(200);
      expect((await admin('PATCH', `/users/${b.adminId}`, { platform_role_id: 'user' })).statusCode).toBe(409);
      // With another active administrator the demotion is allowed (and then undone by them).
      expect((await admin('PATCH', `/users/${second.id}`, { disabled: false })).statusCode).toBe(200);
      const secondToken = await tokenOf('patch-admin2@example.com');
      expect((await admin('PATCH', `/users/${b.adminId}`, { platform_role_id: 'user' })).statusCode).toBe(200);
      expect((await inject('PATCH', `/platform/users/${b.adminId}`, secondToken, { platform_role_id: 'admin' })).statusCode).toBe(200);
      expect((await admin('PATCH', `/users/${second.id}`, { platform_role_id: 'user' })).statusCode).toBe(200);
    });
  });

  describe('POST /platform/users/{id}/password', () => {
    it('sets the password and ends every session of the user at once', async () => {
      const u = await createAndLogin(b, 'reset-1@example.com');
      const res = await admin('POST', `/users/${u.id}/password`, { password: 'set-by-admin-1' });
      expect(res.statusCode).toBe(204);
      expect((await me(u.token)).statusCode).toBe(401);
      expect((await login('reset-1@example.com', 'password-123')).statusCode).toBe(401);
      expect((await me(await tokenOf('reset-1@example.com', 'set-by-admin-1'))).statusCode).toBe(200);
    });

    it('ends the session of a login that checked the old password while the reset committed (decision 0248)', async () => {
      const u = await createAndLogin(b, 'reset-race@example.com');
      const { password_hash: before } = await db().selectFrom('users').select('password_hash').where('id', '=', u.id).executeTakeFirstOrThrow();
      // The login records its success (deletes its account's throttle row) after the password
      // check and before the token is signed: a row lock held here stops it exactly there.
      const key = throttleKeys('reset-race@example.com', '').account;
      await db().insertInto('login_throttle').values({ key, failures: 1, last_failure_at: new Date(), locked_until: null }).execute();
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = db()
        .transaction()
        .execute(async (trx) => {
          await trx.selectFrom('login_throttle').select('key').where('key', '=', key).forUpdate().execute();
          locked();
          await held;
        });
      await isLocked;
      const loggingIn = login('reset-race@example.com', 'password-123');
      let resetting: ReturnType<typeof admin> | undefined;
      try {
        // Its password checked, the login waits; the reset commits (it then waits at the same row).
        await waitForLock(db(), 'delete from "login_throttle"');
        resetting = admin('POST', `/users/${u.id}/password`, { password: 'set-by-admin-r' });
        for (let i = 0; i < 500; i++) {
          const { password_hash } = await db().selectFrom('users').select('password_hash').where('id', '=', u.id).executeTakeFirstOrThrow();
          if (password_hash !== before) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        await new Promise((r) => setTimeout(r, 20));
      } finally {
        release();
        await holder;
      }
      const res = await loggingIn;
      expect((await resetting)?.statusCode).toBe(204);
      // The login checked the right password of its moment, so it answers 200; its token is
      // issued after the reset, yet it does not outlive it.
      expect(res.statusCode, res.body).toBe(200);
      expect((await me(res.json<{ access_token: string }>().access_token)).statusCode).toBe(401);
      expect((await me(await tokenOf('reset-race@example.com', 'set-by-admin-r'))).statusCode).toBe(200);
    });

    it('lets a locked-out user log in again with the new password', async () => {
      const u = await createAndLogin(b, 'reset-locked@example.com');
      for (let i = 0; i < 4; i++) await login('reset-locked@example.com', `guess-${i}`);
      expect((await login('reset-locked@example.com', 'password-123')).statusCode).toBe(429);
      expect((await admin('POST', `/users/${u.id}/password`, { password: 'set-by-admin-2' })).statusCode).toBe(204);
      expect((await login('reset-locked@example.com', 'set-by-admin-2')).statusCode).toBe(200);
    });

    it('validates the body and the id, and is for system administrators only', async () => {
      const u = await createAndLogin(b, 'reset-bad@example.com');
      expect((await admin('POST', `/users/${u.id}/password`, { password: 'short' })).statusCode).toBe(400);
      expect((await admin('POST', `/users/${u.id}/password`, {})).statusCode).toBe(400);
      expect((await admin('POST', '/users/00000000-0000-4000-8000-000000000000/password', { password: 'long-enough-1' })).statusCode).toBe(404);
      expect((await admin('POST', '/users/nope/password', { password: 'long-enough-1' })).statusCode).toBe(404);
      const hostile = await inject('POST', `/platform/users/${b.adminId}/password`, u.token, { password: 'hijacked-password' });
      expect(hostile.statusCode).toBe(403);
      expect((await login(ADMIN_EMAIL, ADMIN_PASSWORD)).statusCode).toBe(200);
    });
  });

  describe('DELETE /platform/users/{id}', () => {
    it('deletes the user and their memberships; their tokens end, what they wrote stays', async () => {
      const u = await createAndLogin(b, 'del-1@example.com');
      const ws = (await admin('POST', '/workspaces', { name: 'del-ws' })).json<WorkspaceDto>().id;
      expect((await admin('POST', `/workspaces/${ws}/members`, { user_id: u.id, role: 'editor' })).statusCode).toBe(201);
      const put = await b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${ws}/objects/by-deleted.txt`,
        headers: { ...bearer(u.token), 'content-type': 'text/plain' },
        payload: 'kept',
      });
      expect(put.statusCode).toBe(201);

      const res = await admin('DELETE', `/users/${u.id}`);
      expect(res.statusCode).toBe(204);
      expect((await me(u.token)).statusCode).toBe(401);
      expect((await login('del-1@example.com', 'password-123')).statusCode).toBe(401);
      const members = (await admin('GET', `/workspaces/${ws}/members`)).json<ListPage<MemberDto>>().items.map((m) => m.user_id);
      expect(members).not.toContain(u.id);
      expect((await admin('GET', `/workspaces/${ws}`)).json<WorkspaceDto>().member_count).toBe(1);
      const rows = await db().selectFrom('workspace_members').select('user_id').where('user_id', '=', u.id).execute();
      expect(rows).toEqual([]);
      const object = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects?prefix=by-deleted`, headers: bearer(b.adminToken) });
      expect(object.json<ListPage<ObjectDto>>().items).toEqual([expect.objectContaining({ path: 'by-deleted.txt', updated_by: null })]);
      expect((await admin('DELETE', `/users/${u.id}`)).statusCode).toBe(404);
      // The email is free again.
      expect((await admin('POST', '/users', { email: 'del-1@example.com', name: 'again', password: 'password-123' })).statusCode).toBe(201);
    });

    it('refuses oneself (409 self_removal) and the last admin of a workspace (409 last_admin), changing nothing', async () => {
      const self = await admin('DELETE', `/users/${b.adminId}`);
      expect(self.statusCode).toBe(409);
      expect(self.json<ErrorBody>().error).toBe('self_removal');

      const u = await createAndLogin(b, 'del-last@example.com');
      const ws = (await admin('POST', '/workspaces', { name: 'only-admin', admin_user_id: u.id })).json<WorkspaceDto>().id;
      const res = await admin('DELETE', `/users/${u.id}`);
      expect(res.statusCode).toBe(409);
      expect(res.json<ErrorBody>().error).toBe('last_admin');
      expect((await me(u.token)).statusCode).toBe(200);
      expect((await admin('GET', `/workspaces/${ws}/members`)).json<ListPage<MemberDto>>().items.map((m) => m.user_id)).toEqual([u.id]);
      // A soft-deleted workspace does not hold its admins back.
      expect((await admin('DELETE', `/workspaces/${ws}`)).statusCode).toBe(204);
      expect((await admin('DELETE', `/users/${u.id}`)).statusCode).toBe(204);
    });

    it('is for system administrators only, and 404 for unknown ids', async () => {
      const u = await createAndLogin(b, 'del-hostile@example.com');
      expect((await inject('DELETE', `/platform/users/${b.adminId}`, u.token)).statusCode).toBe(403);
      expect((await admin('DELETE', '/users/00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
      expect((await admin('DELETE', '/users/not-a-uuid')).statusCode).toBe(404);
    });

    it('under concurrency: deleting the last two admins of a workspace in parallel leaves one', async () => {
      for (let round = 0; round < 3; round++) {
        const x = await createAndLogin(b, `race-x${round}@example.com`);
        const y = await createAndLogin(b, `race-y${round}@example.com`);
        const ws = (await admin('POST', '/workspaces', { name: `race ${round}`, admin_user_id: x.id })).json<WorkspaceDto>().id;
        expect((await admin('POST', `/workspaces/${ws}/members`, { user_id: y.id, role: 'admin' })).statusCode).toBe(201);
        const results = await Promise.all([
          admin('DELETE', `/users/${x.id}`),
          admin('DELETE', `/users/${y.id}`),
          admin('DELETE', `/workspaces/${ws}/members/${x.id}`),
          admin('PATCH', `/workspaces/${ws}/members/${y.id}`, { role: 'viewer' }),
        ]);
        for (const r of results) expect([200, 204, 404, 409]).toContain(r.statusCode);
        const refused = results.filter((r) => r.statusCode === 409).map((r) => r.json<ErrorBody>().error);
        expect(new Set(refused)).toEqual(new Set(['last_admin']));
        const admins = (await admin('GET', `/workspaces/${ws}/members`)).json<ListPage<MemberDto>>().items.filter((m) => m.role === 'admin');
        expect(admins).toHaveLength(1);
      }
    });

    it('under concurrency: two system administrators deleting or demoting each other leave one', async () => {
      // Only the bootstrap admin and one other are active administrators in this round.
      const other = await createAndLogin(b, 'race-admin@example.com', 'admin');
      const activeAdmins = async () =>
        (await db().selectFrom('users').select('id').where('platform_role_id', '=', 'admin').where('disabled_at', 'is', null).execute()).length;
      expect(await activeAdmins()).toBe(2);
      const results = await Promise.all([
        admin('PATCH', `/users/${other.id}`, { platform_role_id: 'user' }),
        inject('PATCH', `/platform/users/${b.adminId}`, other.token, { platform_role_id: 'user' }),
      ]);
      const statuses = results.map((r) => r.statusCode).sort();
      // One succeeds; the other is refused as the last admin (or, having just lost the role, forbidden).
      expect(statuses[0]).toBe(200);
      expect([403, 409]).toContain(statuses[1]);
      expect(await activeAdmins()).toBe(1);
      // Restore: whoever is left promotes nobody; the bootstrap admin must still be it or be restorable.
      const left = await db().selectFrom('users').select('id').where('platform_role_id', '=', 'admin').executeTakeFirstOrThrow();
      if (left.id !== b.adminId) {
        expect((await inject('PATCH', `/platform/users/${b.adminId}`, other.token, { platform_role_id: 'admin' })).statusCode).toBe(200);
      }
    });
  });

  describe('login throttling (docs/contract/spec.md §4.5)', () => {
    /** Ends the locks of every account (and of every account from an address), or of every address. */
    const lift = (key: 'account' | 'address') =>
      sql`UPDATE login_throttle SET locked_until = now() - interval '1 second' WHERE key LIKE ${`${key}:%`} OR (${key} = 'account' AND key LIKE 'pair:%')`.execute(
        db(),
      );

    it('answers 429 too_many_requests with Retry-After after repeated failures, even for the right password', async () => {
      await createAndLogin(b, 'thr-1@example.com');
      for (let i = 0; i < 4; i++) {
        const res = await login('thr-1@example.com', `guess-${i}`, '198.51.100.1');
        expect(res.statusCode, `failure ${i + 1}`).toBe(401);
      }
      const locked = await login('thr-1@example.com', 'password-123', '198.51.100.2');
      expect(locked.statusCode).toBe(429);
      expect(locked.json()).toMatchObject({ error: 'too_many_requests' });
      expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(locked.headers['set-cookie']).toBeUndefined();
      const wrongDuringLock = await login('thr-1@example.com', 'still-wrong', '198.51.100.3');
      expect(wrongDuringLock.statusCode).toBe(429);
      expect(wrongDuringLock.json()).toEqual(locked.json());
      // Once the lock has passed, the right password logs in and the count starts again.
      await lift('account');
      expect((await login('thr-1@example.com', 'password-123')).statusCode).toBe(200);
      expect((await login('thr-1@example.com', 'wrong-once')).statusCode).toBe(401);
    });

    it('throttles unknown emails exactly like known ones', async () => {
      const known: number[] = [];
      const unknown: number[] = [];
      await createAndLogin(b, 'thr-known@example.com');
      for (let i = 0; i < 5; i++) {
        known.push((await login('thr-known@example.com', `guess-${i}`, '203.0.113.7')).statusCode);
        unknown.push((await login('thr-ghost@example.com', `guess-${i}`, '203.0.113.8')).statusCode);
      }
      expect(known).toEqual([401, 401, 401, 401, 429]);
      expect(unknown).toEqual(known);
    });

    it('throttles a client address across accounts, and only that address', async () => {
      const t = await startTestBackend({ loginThrottle: { accountFreeFailures: 1000, addressFreeFailures: 3, baseDelaySeconds: 30 } });
      try {
        const attempt = (email: string, address: string) =>
          t.app.inject({
            method: 'POST',
            url: '/api/v1/auth/login',
            headers: { 'x-forwarded-for': address },
            remoteAddress: '127.0.0.1',
            payload: { email, password: 'wrong-password' },
          });
        const statuses = [];
        for (let i = 0; i < 5; i++) statuses.push((await attempt(`spray-${i}@example.com`, '192.0.2.10')).statusCode);
        expect(statuses).toEqual([401, 401, 401, 401, 429]);
        // Another address, the same accounts: not throttled. An IPv6 client is throttled by its /64.
        expect((await attempt('spray-0@example.com', '192.0.2.11')).statusCode).toBe(401);
        for (let i = 0; i < 4; i++) await attempt(`v6-${i}@example.com`, `2001:db8:1:2::${i + 1}`);
        expect((await attempt('v6-x@example.com', '2001:db8:1:2:ffff::9')).statusCode).toBe(429);
        expect((await attempt('v6-x@example.com', '2001:db8:1:3::1')).statusCode).toBe(401);
        // The admin still logs in from elsewhere.
        const ok = await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          headers: { 'x-forwarded-for': '192.0.2.99' },
          remoteAddress: '127.0.0.1',
          payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
        });
        expect(ok.statusCode).toBe(200);
      } finally {
        await t.close();
      }
    });

    it('holds across several backends sharing the database', async () => {
      const second = await buildBackendApp({
        db: db(),
        jwtSecret: TEST_JWT_SECRET,
        jwtTtlSeconds: 3600,
        storageProbe: () => Promise.resolve(true),
        runtimeProbe: () => Promise.resolve(false),
        store: b.store,
        internalServiceToken: INTERNAL_TOKEN,
        maxUploadBytes: 1024,
        loginThrottle: { accountFreeFailures: 3, addressFreeFailures: 1000 },
      });
      try {
        await createAndLogin(b, 'thr-multi@example.com');
        for (let i = 0; i < 4; i++) expect((await login('thr-multi@example.com', `guess-${i}`)).statusCode).toBe(401);
        const elsewhere = await second.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          payload: { email: 'thr-multi@example.com', password: 'password-123' },
        });
        expect(elsewhere.statusCode).toBe(429);
      } finally {
        await second.close();
      }
    });

    it('backs off exponentially and keeps the table bounded', async () => {
      await createAndLogin(b, 'thr-exp@example.com');
      const waits: number[] = [];
      for (let i = 0; i < 4; i++) await login('thr-exp@example.com', `guess-${i}`);
      for (let i = 0; i < 3; i++) {
        const res = await login('thr-exp@example.com', 'guess-x');
        waits.push(Number(res.headers['retry-after']));
        await lift('account');
        await login('thr-exp@example.com', `again-${i}`);
      }
      // 4th failure locks 30 s (this backend's base), 5th 60 s, 6th 120 s …: each wait beyond what the lower power gives.
      expect(waits[0]).toBeGreaterThan(20);
      expect(waits[1]).toBeGreaterThan(50);
      expect(waits[2]).toBeGreaterThan(110);
      const row = await db().selectFrom('login_throttle').selectAll().where('key', 'like', 'account:%').orderBy('failures', 'desc').executeTakeFirstOrThrow();
      expect(row.key).toMatch(/^account:[0-9a-f]{64}$/);
      // Quiet keys are pruned on a later failure (here: every failure, pruneIntervalSeconds 0).
      await sql`UPDATE login_throttle SET last_failure_at = now() - interval '2 hours', locked_until = NULL`.execute(db());
      await login('thr-exp-other@example.com', 'guess');
      const left = await db().selectFrom('login_throttle').select('key').execute();
      expect(left.length).toBeLessThanOrEqual(3);
    });

    it('behind a gateway on another machine (GATEWAY_ADDRESSES), each client keeps its own address; without it, all share the gateway’s (decision 0257)', async () => {
      for (const trusted of [true, false]) {
        const t = await startTestBackend({
          loginThrottle: { accountFreeFailures: 3, addressFreeFailures: 1000, baseDelaySeconds: 30 },
          ...(trusted ? { gatewayAddresses: ['10.0.0.0/8'] } : {}),
        });
        try {
          const viaGateway = (password: string, client: string) =>
            t.app.inject({
              method: 'POST',
              url: '/api/v1/auth/login',
              headers: { 'x-forwarded-for': client },
              remoteAddress: '10.1.2.3',
              payload: { email: ADMIN_EMAIL, password },
            });
          expect((await viaGateway(ADMIN_PASSWORD, '198.51.100.50')).statusCode).toBe(200);
          for (let i = 0; i < 4; i++) await viaGateway(`guess-${i}`, '203.0.113.66');
          // The administrator's known address: in with a trusted gateway, locked out without.
          expect((await viaGateway(ADMIN_PASSWORD, '198.51.100.50')).statusCode, `trusted: ${trusted}`).toBe(trusted ? 200 : 429);
          // A peer that is not the gateway names any address it likes: not believed.
          const spoofed = await t.app.inject({
            method: 'POST',
            url: '/api/v1/auth/login',
            headers: { 'x-forwarded-for': '198.51.100.50' },
            remoteAddress: '192.0.2.200',
            payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
          });
          expect(spoofed.statusCode).toBe(429);
        } finally {
          await t.close();
        }
      }
    });

    it('a stranger’s failures do not lock an account out of an address it logged in from; guesses from anywhere else stay locked (decision 0255)', async () => {
      await createAndLogin(b, 'thr-owner@example.com');
      // The owner logs in from their office.
      expect((await login('thr-owner@example.com', 'password-123', '198.51.100.50')).statusCode).toBe(200);
      // A stranger hammers the account from elsewhere: it is locked for every address it does not know…
      for (let i = 0; i < 4; i++) await login('thr-owner@example.com', `guess-${i}`, '203.0.113.66');
      expect((await login('thr-owner@example.com', 'password-123', '203.0.113.66')).statusCode).toBe(429);
      expect((await login('thr-owner@example.com', 'password-123', '192.0.2.77')).statusCode).toBe(429);
      // …but the owner still logs in from the office (it answered 429 while the stranger kept on).
      expect((await login('thr-owner@example.com', 'password-123', '198.51.100.50')).statusCode).toBe(200);
      // The stranger, from the same address as before, stays locked after the owner's login.
      expect((await login('thr-owner@example.com', 'password-123', '203.0.113.66')).statusCode).toBe(429);
      // Wrong passwords from the known address are counted there and lock it too.
      for (let i = 0; i < 4; i++) await login('thr-owner@example.com', `typo-${i}`, '198.51.100.50');
      expect((await login('thr-owner@example.com', 'password-123', '198.51.100.50')).statusCode).toBe(429);
      // A known address is forgotten after KNOWN days without a login.
      await sql`UPDATE login_known_addresses SET last_login_at = now() - interval '31 days'`.execute(db());
      await sql`UPDATE login_throttle SET locked_until = now() - interval '1 second' WHERE key LIKE 'pair:%'`.execute(db());
      for (let i = 0; i < 4; i++) await login('thr-owner@example.com', `guess-again-${i}`, '203.0.113.67');
      expect((await login('thr-owner@example.com', 'password-123', '198.51.100.50')).statusCode).toBe(429);
    });
  });
});
