import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { issueUserToken } from '@codeagent/auth';
import type { ErrorBody } from '@codeagent/service-kit';
import { ADMIN_EMAIL, ADMIN_PASSWORD, TEST_JWT_SECRET, bearer, startTestBackend, type TestBackend, type UserDto, type WorkspaceDto } from '../testing.js';

/** The answer of `POST /auth/login` (routes/auth.ts). */
type Login = { access_token: string; token_type: string; expires_in: number; is_system_admin: boolean; user: UserDto };

describe(`auth routes (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  beforeAll(async () => {
    b = await startTestBackend();
  });
  afterAll(async () => {
    await b.close();
  });

  const me = (headers: Record<string, string>) => b.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers });

  it('logs in with email and password and answers the token, user and is_system_admin', async () => {
    const res = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'ADMIN@localhost', password: ADMIN_PASSWORD } });
    expect(res.statusCode).toBe(200);
    const body = res.json<Login>();
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, is_system_admin: true });
    expect(body.user).toMatchObject({ email: ADMIN_EMAIL, platform_role_id: 'admin', is_system_admin: true });
    expect(Object.keys(body.user).sort()).toEqual(['created_at', 'disabled_at', 'email', 'id', 'is_system_admin', 'name', 'platform_role_id']);
    expect(body.user.disabled_at).toBeNull();
    expect(body.user).not.toHaveProperty('password_hash');
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^codeagent_session=/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
    expect(cookie).toMatch(/Path=\//);
    expect(cookie).not.toMatch(/Secure/);
  });

  it('marks the cookie Secure when served over https', async () => {
    const res = await b.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'x-forwarded-proto': 'https' },
      remoteAddress: '127.0.0.1',
      payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    });
    expect(String(res.headers['set-cookie'])).toMatch(/Secure/);
  });

  it('answers invalid_credentials alike for a wrong password and an unknown email', async () => {
    const wrong = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: ADMIN_EMAIL, password: 'nope-nope' } });
    const unknown = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'ghost@localhost', password: 'nope-nope' } });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.json()).toEqual(unknown.json());
    expect(wrong.json<ErrorBody>().error).toBe('invalid_credentials');
  });

  it('takes similar time for an unknown email and a wrong password', async () => {
    const time = async (email: string) => {
      const start = process.hrtime.bigint();
      await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: 'nope-nope' } });
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    await time('warm@localhost');
    const unknown = [];
    const wrong = [];
    for (let i = 0; i < 3; i++) {
      unknown.push(await time('ghost@localhost'));
      wrong.push(await time(ADMIN_EMAIL));
    }
    const med = (xs: number[]) => xs.sort((a, c) => a - c)[1]!;
    // Both paths verify one scrypt hash: neither is an order of magnitude faster.
    expect(med(unknown) / med(wrong)).toBeGreaterThan(0.3);
    expect(med(unknown) / med(wrong)).toBeLessThan(3);
  });

  it('rejects a malformed login body with 400 invalid_request and fields', async () => {
    const res = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: ADMIN_EMAIL } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { password: expect.any(String) as unknown } });
    const bad = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', headers: { 'content-type': 'application/json' }, payload: '{"email":' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<ErrorBody>().error).toBe('invalid_request');
  });

  it('answers /auth/me with the user, is_system_admin and workspaces', async () => {
    const res = await me(bearer(b.adminToken));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ email: ADMIN_EMAIL, is_system_admin: true, workspaces: [] });
    const ws = await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'Mine' } });
    const after = await me(bearer(b.adminToken));
    expect(after.json<{ workspaces: unknown[] }>().workspaces).toEqual([{ id: ws.json<WorkspaceDto>().id, name: 'Mine', role: 'admin' }]);
  });

  it('accepts the session cookie instead of the header', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/api/v1/auth/me', cookies: { codeagent_session: b.adminToken } });
    expect(res.statusCode).toBe(200);
  });

  it('refuses a cross-site write authenticated by the cookie alone, allows a same-origin one', async () => {
    const payload = { name: 'x' };
    const cross = await b.app.inject({
      method: 'POST',
      url: '/api/v1/platform/workspaces',
      cookies: { codeagent_session: b.adminToken },
      headers: { origin: 'https://evil.example', host: 'platform.local' },
      payload,
    });
    expect(cross.statusCode).toBe(403);
    const noOrigin = await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', cookies: { codeagent_session: b.adminToken }, payload });
    expect(noOrigin.statusCode).toBe(403);
    const fetchSite = await b.app.inject({
      method: 'POST',
      url: '/api/v1/platform/workspaces',
      cookies: { codeagent_session: b.adminToken },
      headers: { 'sec-fetch-site': 'cross-site' },
      payload,
    });
    expect(fetchSite.statusCode).toBe(403);
    const same = await b.app.inject({
      method: 'POST',
      url: '/api/v1/platform/workspaces',
      cookies: { codeagent_session: b.adminToken },
      headers: { origin: 'http://platform.local', host: 'platform.local' },
      payload,
    });
    expect(same.statusCode).toBe(201);
    const sameSite = await b.app.inject({
      method: 'POST',
      url: '/api/v1/platform/workspaces',
      cookies: { codeagent_session: b.adminToken },
      headers: { 'sec-fetch-site': 'same-origin' },
      payload,
    });
    expect(sameSite.statusCode).toBe(201);
  });

  it('answers 401 unauthorized for a missing, malformed, tampered, foreign-key, alg-none or expired token', async () => {
    const [header, payload, signature] = b.adminToken.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { sub: string };
    const elevated = Buffer.from(JSON.stringify({ ...claims, sub: '00000000-0000-0000-0000-000000000000' })).toString('base64url');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
    const foreign = await issueUserToken(claims.sub, 'another-secret-that-is-also-long-enough-000000', 3600);
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(claims.sub)
      .setJti('11111111-1111-1111-1111-111111111111')
      .setIssuer('codeagent')
      .setAudience('codeagent-user')
      .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const cases: Record<string, string>[] = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer    ' },
      { authorization: `bearer ${b.adminToken}` },
      { authorization: `Basic ${b.adminToken}` },
      { authorization: 'Bearer not-a-jwt' },
      { authorization: `Bearer ${header}.${elevated}.${signature}` },
      { authorization: `Bearer ${header}.${payload}.${signature.slice(0, -2)}xx` },
      { authorization: `Bearer ${none}` },
      { authorization: `Bearer ${foreign.token}` },
      { authorization: `Bearer ${expired}` },
    ];
    for (const headers of cases) {
      const res = await me(headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.json<ErrorBody>().error).toBe('unauthorized');
    }
    const badCookie = await b.app.inject({ method: 'GET', url: '/api/v1/auth/me', cookies: { codeagent_session: 'garbage' } });
    expect(badCookie.statusCode).toBe(401);
  });

  it('expires tokens after JWT_TTL_SECONDS', async () => {
    const short = await issueUserToken(b.adminId, TEST_JWT_SECRET, 1);
    expect((await me(bearer(short.token))).statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 2100));
    expect((await me(bearer(short.token))).statusCode).toBe(401);
  });

  it('logs out: 204, clears the cookie, and the token stops working', async () => {
    const login = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const token = login.json<Login>().access_token;
    const out = await b.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: bearer(token) });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/codeagent_session=;.*(Expires=Thu, 01 Jan 1970|Max-Age=0)/);
    expect((await me(bearer(token))).statusCode).toBe(401);
    expect((await b.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: bearer(token) })).statusCode).toBe(401);
    // other sessions of the same user are untouched
    expect((await me(bearer(b.adminToken))).statusCode).toBe(200);
  });

  it('reports health with database, storage and runtime checks', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', checks: { database: 'ok', storage: 'ok', runtime: 'unavailable' } });
  });

  it('serves an OpenAPI 3 document that lists the routes', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json<{ openapi: string; paths: Record<string, Record<string, { requestBody?: unknown }>> }>();
    expect(doc.openapi).toMatch(/^3\./);
    for (const path of ['/api/v1/auth/login', '/api/v1/auth/me', '/api/v1/platform/workspaces/{id}/members/{user_id}', '/api/v1/health']) {
      expect(Object.keys(doc.paths)).toContain(path);
    }
    expect(doc.paths['/api/v1/auth/login']?.post?.requestBody).toBeDefined();
  });

  it('lists only public routes in the OpenAPI document: nothing under /internal/v1 (which still answers)', async () => {
    const doc = (await b.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json<{ paths: Record<string, unknown> }>();
    const paths = Object.keys(doc.paths);
    expect(paths.length).toBeGreaterThan(20);
    expect(paths.filter((p) => !p.startsWith('/api/v1/'))).toEqual([]);
    expect(JSON.stringify(doc)).not.toContain('/internal');
    expect(JSON.stringify(doc)).not.toContain('x-internal-service-token');
    // Hidden from the document, not removed: the components' route still refuses a missing token.
    expect((await b.app.inject({ method: 'POST', url: '/internal/v1/objects?area=workspace&key=a' })).statusCode).toBe(401);
  });

  it('answers 404 not_found for unknown routes and 405 for a wrong method, with x-request-id', async () => {
    const nf = await b.app.inject({ method: 'GET', url: '/api/v1/nope' });
    expect(nf.statusCode).toBe(404);
    expect(nf.json<ErrorBody>().error).toBe('not_found');
    expect(nf.headers['x-request-id']).toBeTruthy();
    const wrong = await b.app.inject({ method: 'DELETE', url: '/api/v1/auth/login' });
    expect(wrong.statusCode).toBe(405);
    expect(wrong.headers.allow).toContain('POST');
    const wrong2 = await b.app.inject({ method: 'PUT', url: '/api/v1/platform/workspaces/abc' });
    expect(wrong2.statusCode).toBe(405);
    const kept = await b.app.inject({ method: 'GET', url: '/api/v1/health', headers: { 'x-request-id': 'abc-123' } });
    expect(kept.headers['x-request-id']).toBe('abc-123');
    const internal = await b.app.inject({ method: 'POST', url: '/internal/v1/uploads' });
    expect(internal.statusCode).toBe(404);
  });
});
