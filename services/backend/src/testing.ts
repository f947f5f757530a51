import type { FastifyInstance } from 'fastify';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type MemberRole, type TestDatabase } from '@codeagent/db';
import { buildGatewayApp } from '@codeagent/gateway';
import { LocalObjectStore, type ObjectStore } from '@codeagent/storage';
import { buildBackendApp, type BackendAppOptions } from './app.js';
import { DEFAULT_RUN_LIMITS, type RunLimits } from './domain/runs.js';
import { ensureBootstrapAdmin } from './domain/users.js';

// The answers' types, for tests that read them.
export type { MemberDto, RunDto, ScheduleDto, UserDto, WorkspaceDto } from './domain/schemas.js';

export const TEST_JWT_SECRET = 'test-secret-that-is-long-enough-for-hs256-0123456789';
export const ADMIN_EMAIL = 'admin@localhost';
export const ADMIN_PASSWORD = 'admin-password-1';
export const INTERNAL_TOKEN = 'internal-token-for-tests';

export interface TestBackend {
  app: FastifyInstance;
  t: TestDatabase;
  store: ObjectStore;
  adminToken: string;
  adminId: string;
  /** Another backend instance on the same database (as a second process would be), with the same settings; `db` replaces its Kysely handle. */
  another(over?: { db?: BackendAppOptions['db'] }): Promise<FastifyInstance>;
  close(): Promise<void>;
}

/** A backend on a fresh database of this run's target, with the bootstrap admin logged in. */
export async function startTestBackend(
  overrides: {
    jwtTtlSeconds?: number;
    maxUploadBytes?: number;
    store?: ObjectStore;
    runLimits?: Partial<RunLimits>;
    workspaceQuotaBytes?: number;
    loginThrottle?: BackendAppOptions['loginThrottle'];
    /** The runtime's warm-up (decision 0209); none by default. */
    runtimeWarmUp?: BackendAppOptions['runtimeWarmUp'];
    /** Cache token checks, invalidated by LISTEN/NOTIFY, as the backend does (default true). */
    tokenCache?: boolean;
    gatewayAddresses?: string[];
  } = {},
): Promise<TestBackend> {
  const t = await createTestDatabase();
  const store = overrides.store ?? new LocalObjectStore(mkdtempSync(join(tmpdir(), 'codeagent-backend-store-')));
  await store.init();
  await ensureBootstrapAdmin(t.database.db, ADMIN_EMAIL, ADMIN_PASSWORD);
  const options: BackendAppOptions = {
    db: t.database.db,
    jwtSecret: TEST_JWT_SECRET,
    jwtTtlSeconds: overrides.jwtTtlSeconds ?? 3600,
    storageProbe: () => Promise.resolve(true),
    runtimeProbe: () => Promise.resolve(false),
    store,
    internalServiceToken: INTERNAL_TOKEN,
    maxUploadBytes: overrides.maxUploadBytes ?? 10 * 1024 * 1024,
    runLimits: { ...DEFAULT_RUN_LIMITS, ...overrides.runLimits },
    workspaceQuotaBytes: overrides.workspaceQuotaBytes,
    ...(overrides.loginThrottle ? { loginThrottle: overrides.loginThrottle } : {}),
    ...(overrides.runtimeWarmUp ? { runtimeWarmUp: overrides.runtimeWarmUp } : {}),
    ...(overrides.gatewayAddresses ? { gatewayAddresses: overrides.gatewayAddresses } : {}),
    ...(overrides.tokenCache === false ? {} : { listen: t.database.listen.bind(t.database) }),
  };
  const app = await buildBackendApp(options);
  await app.ready();
  const others: FastifyInstance[] = [];
  const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  const body = login.json<{ access_token: string; user: { id: string } }>();
  return {
    app,
    t,
    store,
    adminToken: body.access_token,
    adminId: body.user.id,
    async another(over = {}) {
      const other = await buildBackendApp({ ...options, ...over });
      await other.ready();
      others.push(other);
      return other;
    },
    async close() {
      for (const o of others) await o.close();
      await app.close();
      await t.drop();
    },
  };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** Creates a user through the API and logs them in. */
export async function createAndLogin(b: TestBackend, email: string, role: 'admin' | 'user' = 'user'): Promise<{ id: string; token: string }> {
  const res = await b.app.inject({
    method: 'POST',
    url: '/api/v1/platform/users',
    headers: bearer(b.adminToken),
    payload: { email, name: email.split('@')[0], password: 'password-123', platform_role_id: role },
  });
  if (res.statusCode !== 201) throw new Error(`create user failed: ${res.statusCode} ${res.body}`);
  const login = await b.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: 'password-123' } });
  return { id: res.json<{ id: string }>().id, token: login.json<{ access_token: string }>().access_token };
}

/** Creates a workspace as the bootstrap admin; returns its id. */
export async function createWorkspace(b: TestBackend, name: string): Promise<string> {
  const res = await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name } });
  if (res.statusCode !== 201) throw new Error(`create workspace failed: ${res.statusCode} ${res.body}`);
  return res.json<{ id: string }>().id;
}

/** Makes each user a member of the workspace with the role, as the bootstrap admin. */
export async function addMembers(b: TestBackend, ws: string, members: readonly (readonly [{ id: string }, MemberRole])[]): Promise<void> {
  for (const [user, role] of members) {
    const res = await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: user.id, role },
    });
    if (res.statusCode >= 300) throw new Error(`add member failed: ${res.statusCode} ${res.body}`);
  }
}

/** Disables a user's account as the bootstrap admin (`PATCH /platform/users/{id}`, `disabled: true`); `id` as given (any case). */
export async function disableUser(b: TestBackend, id: string): Promise<void> {
  const res = await b.app.inject({ method: 'PATCH', url: `/api/v1/platform/users/${id}`, headers: bearer(b.adminToken), payload: { disabled: true } });
  if (res.statusCode !== 200) throw new Error(`disable user failed: ${res.statusCode} ${res.body}`);
}

export interface TestGateway {
  gateway: FastifyInstance;
  /** The gateway's base URL (loopback, its own port), as clients reach the platform. */
  url: string;
  /** The backend's own base URL, behind the gateway. */
  backendUrl: string;
}

/** The backend listening on a loopback port and the gateway in front of it (no cluster admin, no bridge behind it). */
export async function startTestGateway(b: TestBackend): Promise<TestGateway> {
  const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
  const gateway = await buildGatewayApp({ upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' } });
  return { gateway, url: await gateway.listen({ host: '127.0.0.1', port: 0 }), backendUrl };
}
