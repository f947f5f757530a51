import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import cookie from '@fastify/cookie';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { issueUserToken } from '@codeagent/auth';
import { serviceKit } from './plugin.js';
import { userAuth } from './user-auth.js';

const SECRET = 'user-auth-test-secret-long-enough-for-hs256-000';

/**
 * The one token check of every service users call (backend and bridge register this plugin):
 * every kind of revocation of docs/contract/spec.md §4.5 holds here, in the one query that loads the user.
 */
describe(`userAuth revocation (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let app: FastifyInstance;
  let userId: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    userId = (
      await t.database.db
        .insertInto('users')
        .values({ email: 'u@example.com', name: 'U', password_hash: 'x', platform_role_id: 'user' })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    app = Fastify();
    await app.register(serviceKit);
    await app.register(cookie);
    await app.register(userAuth, { db: t.database.db, jwtSecret: SECRET });
    app.get('/who', { onRequest: app.requireUser }, (req) => ({ id: req.user.id }));
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await t.drop();
  });

  const status = async (token: string) => (await app.inject({ method: 'GET', url: '/who', headers: { authorization: `Bearer ${token}` } })).statusCode;
  const viaCookie = async (token: string) => (await app.inject({ method: 'GET', url: '/who', cookies: { codeagent_session: token } })).statusCode;
  const setUser = (values: { tokens_valid_after?: Date | null; kept_token_jti?: string | null; disabled_at?: Date | null }) =>
    t.database.db.updateTable('users').set(values).where('id', '=', userId).execute();

  it('refuses tokens issued before tokens_valid_after, accepts later ones and the kept one', async () => {
    const old = await issueUserToken(userId, SECRET, 600);
    const kept = await issueUserToken(userId, SECRET, 600);
    expect(await status(old.token)).toBe(200);
    await new Promise((r) => setTimeout(r, 5));
    await setUser({ tokens_valid_after: new Date(), kept_token_jti: kept.jti });
    expect(await status(old.token)).toBe(401);
    expect(await viaCookie(old.token)).toBe(401);
    expect(await status(kept.token)).toBe(200);
    const fresh = await issueUserToken(userId, SECRET, 600);
    expect(await status(fresh.token)).toBe(200);
    // The revocation instant is exact to the millisecond: a token issued in the same second but earlier is refused.
    await setUser({ tokens_valid_after: new Date(fresh.issuedAt.getTime() + 1), kept_token_jti: null });
    expect(await status(fresh.token)).toBe(401);
    expect(await status(kept.token)).toBe(401);
    await setUser({ tokens_valid_after: fresh.issuedAt });
    expect(await status(fresh.token)).toBe(200);
  });

  it('refuses a token whose login read the sessions before they were revoked, whatever its issue time (decision 0248)', async () => {
    await setUser({ tokens_valid_after: null, kept_token_jti: null });
    // The login checked the old password (and read no revocation); a reset committed, with a
    // clock a little behind; then the token was signed.
    await setUser({ tokens_valid_after: new Date(Date.now() - 1000) });
    const raced = await issueUserToken(userId, SECRET, 600, null);
    expect(await status(raced.token)).toBe(401);
    // Judged by its issue time alone, as tokens issued before this rule are, it would pass.
    expect(await status((await issueUserToken(userId, SECRET, 600)).token)).toBe(200);
    // A login after the reset reads it, and its token is valid until the next one.
    const { tokens_valid_after: current } = await t.database.db
      .selectFrom('users')
      .select('tokens_valid_after')
      .where('id', '=', userId)
      .executeTakeFirstOrThrow();
    const fresh = await issueUserToken(userId, SECRET, 600, current);
    expect(await status(fresh.token)).toBe(200);
    await setUser({ tokens_valid_after: new Date(current!.getTime() - 5000) });
    expect(await status(fresh.token)).toBe(401);
    // The kept session (a user's own password change) stays whatever it read.
    await setUser({ kept_token_jti: raced.jti });
    expect(await status(raced.token)).toBe(200);
    await setUser({ tokens_valid_after: null, kept_token_jti: null });
  });

  it('refuses every token of a disabled user, and of a deleted one', async () => {
    await setUser({ tokens_valid_after: null, kept_token_jti: null });
    const token = await issueUserToken(userId, SECRET, 600);
    expect(await status(token.token)).toBe(200);
    await setUser({ disabled_at: new Date() });
    expect(await status(token.token)).toBe(401);
    await setUser({ disabled_at: null });
    expect(await status(token.token)).toBe(200);
    await t.database.db.deleteFrom('users').where('id', '=', userId).execute();
    expect(await status(token.token)).toBe(401);
  });
});
