import Fastify, { type InjectOptions } from 'fastify';
import fp from 'fastify-plugin';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createAndLogin, startTestBackend, type TestBackend } from '../testing.js';
import { ROUTE_ACCESS, declaredRoutes, routeAccess, type DeclaredRoute } from './access.js';

/** Who may call what: changing a route's access rule must change this table too (decision 0122). */
const EXPECTED: Record<string, string> = {
  // HEAD routes are checked against their GET (below).
  'POST /api/v1/auth/login': 'public',
  'POST /api/v1/auth/logout': 'user',
  'GET /api/v1/auth/session': 'lab',
  'POST /api/v1/auth/password': 'user',
  'GET /api/v1/auth/me': 'user',
  'GET /api/v1/health': 'public',
  'GET /api/v1/openapi.json': 'public',
  'POST /api/v1/platform/users': 'system-admin',
  'GET /api/v1/platform/users': 'system-admin',
  'PATCH /api/v1/platform/users/:id': 'system-admin',
  'POST /api/v1/platform/users/:id/password': 'system-admin',
  'DELETE /api/v1/platform/users/:id': 'system-admin',
  'POST /api/v1/platform/workspaces': 'system-admin',
  'GET /api/v1/platform/workspaces': 'system-admin',
  'GET /api/v1/platform/workspaces/:id': 'system-admin',
  'PATCH /api/v1/platform/workspaces/:id': 'system-admin',
  'DELETE /api/v1/platform/workspaces/:id': 'system-admin',
  'POST /api/v1/platform/workspaces/:id/members': 'system-admin',
  'GET /api/v1/platform/workspaces/:id/members': 'system-admin',
  'PATCH /api/v1/platform/workspaces/:id/members/:user_id': 'system-admin',
  'DELETE /api/v1/platform/workspaces/:id/members/:user_id': 'system-admin',
  'GET /api/v1/workspaces/:ws/members': 'workspace-viewer',
  'POST /api/v1/workspaces/:ws/runs': 'workspace-editor',
  'POST /api/v1/workspaces/:ws/runs/:id/cancel': 'workspace-editor',
  'POST /api/v1/workspaces/:ws/runs/warm-up': 'workspace-editor',
  'GET /api/v1/workspaces/:ws/runs': 'workspace-viewer',
  'GET /api/v1/workspaces/:ws/runs/:id': 'workspace-viewer',
  'GET /api/v1/workspaces/:ws/runs/:id/log': 'workspace-viewer',
  'POST /api/v1/workspaces/:ws/schedules': 'workspace-editor',
  'GET /api/v1/workspaces/:ws/schedules': 'workspace-viewer',
  'GET /api/v1/workspaces/:ws/schedules/:id': 'workspace-viewer',
  'PATCH /api/v1/workspaces/:ws/schedules/:id': 'workspace-editor',
  'DELETE /api/v1/workspaces/:ws/schedules/:id': 'workspace-editor',
  'PUT /api/v1/data-resources/:ws/objects/*': 'workspace-editor',
  'POST /api/v1/data-resources/:ws/uploads': 'workspace-editor',
  'GET /api/v1/data-resources/:ws/objects/*': 'workspace-viewer',
  'GET /api/v1/data-resources/:ws/objects': 'workspace-viewer',
  'GET /api/v1/data-resources/:ws/archive': 'workspace-viewer',
  'DELETE /api/v1/data-resources/:ws/objects/*': 'workspace-editor',
  'GET /api/v1/data-resources/:ws/versions/*': 'workspace-viewer',
  'POST /api/v1/data-resources/:ws/versions/*': 'workspace-editor',
  'GET /api/v1/data-resources/:ws/trash': 'workspace-viewer',
  'POST /api/v1/data-resources/:ws/trash/:id/restore': 'workspace-editor',
  'DELETE /api/v1/data-resources/:ws/trash/:id': 'workspace-editor',
};

const SOME_ID = '00000000-0000-4000-8000-000000000001';

/** A request to the route with its parameters filled in and a body its schema accepts. */
function requestTo(route: DeclaredRoute, ws: string, headers: Record<string, string>): InjectOptions {
  const url = route.url
    .replace(':ws', ws)
    .replace(':user_id', SOME_ID)
    .replace(':id', SOME_ID)
    .replace(/\*$/, route.url.includes('/versions/') && route.method === 'POST' ? 'nb.ipynb/restore' : 'nb.ipynb');
  const bodies: Record<string, object> = {
    'POST /api/v1/workspaces/:ws/runs': { notebook_path: 'nb.ipynb' },
    'POST /api/v1/workspaces/:ws/schedules': { notebook_path: 'nb.ipynb', cron: '0 * * * *' },
    'PATCH /api/v1/workspaces/:ws/schedules/:id': { enabled: false },
    'POST /api/v1/data-resources/:ws/versions/*': { version_id: SOME_ID },
  };
  const payload = bodies[`${route.method} ${route.url}`];
  return { method: route.method, url, headers, ...(payload ? { payload } : {}) };
}

describe(`every /api/v1 route declares who may call it (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let routes: readonly DeclaredRoute[];
  let ws: string;
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  beforeAll(async () => {
    b = await startTestBackend();
    routes = declaredRoutes(b.app).filter((r) => r.url.startsWith('/api/v1/') || r.url.startsWith('/internal/v1'));
    viewer = await createAndLogin(b, 'viewer@example.com');
    stranger = await createAndLogin(b, 'stranger@example.com');
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'access' } })).json<{
      id: string;
    }>().id;
    await b.app.inject({
      method: 'POST',
      url: `/api/v1/platform/workspaces/${ws}/members`,
      headers: bearer(b.adminToken),
      payload: { user_id: viewer.id, role: 'viewer' },
    });
  });
  afterAll(async () => b?.close());

  it('lists every registered /api/v1 route with a declared access rule, and the rules are the reviewed ones', () => {
    // The hook sees every route Fastify registers (onRoute on the root): nothing escapes it.
    expect(routes.some((r) => r.url.startsWith('/internal/v1'))).toBe(true);
    const api = routes.filter((r) => r.url.startsWith('/api/v1/'));
    expect(api.length).toBeGreaterThan(40);
    for (const r of api) {
      expect(ROUTE_ACCESS, `${r.method} ${r.url}`).toContain(r.access);
      expect(b.app.hasRoute({ method: r.method, url: r.url })).toBe(true);
    }
    // A HEAD route (Fastify's twin of a GET, or written out) has its GET's rule.
    const getRule = new Map(api.filter((r) => r.method === 'GET').map((r) => [r.url, r.access]));
    for (const r of api.filter((x) => x.method === 'HEAD')) expect(r.access, `HEAD ${r.url}`).toBe(getRule.get(r.url));
    const table = Object.fromEntries(
      api.filter((r) => !r.url.startsWith('/api/v1/dav/') && r.method !== 'HEAD').map((r) => [`${r.method} ${r.url}`, r.access]),
    );
    expect(table).toEqual(EXPECTED);
    expect(new Set(api.filter((r) => r.url.startsWith('/api/v1/dav/')).map((r) => r.access))).toEqual(new Set(['dav']));
  });

  it('refuses to start when a route below /api/v1 declares no access', async () => {
    const app = Fastify();
    // (userAuth's decorators that routeAccess uses while it registers; a cache that keeps nothing.)
    await app.register(
      fp(
        (stub) => {
          stub.decorate('userScopedCache', () => ({ get: () => undefined, stamp: () => 0, set: () => undefined }));
          return Promise.resolve();
        },
        { name: 'user-auth' },
      ),
    );
    await app.register(routeAccess, { db: b.t.database.db, prefix: '/api/v1/' });
    await expect(
      app.register(
        // eslint-disable-next-line @typescript-eslint/require-await -- async on purpose: avvio turns the throw while it registers into the rejection checked here
        async (api) => {
          api.get('/forgotten', () => 'open');
        },
        { prefix: '/api/v1' },
      ),
    ).rejects.toThrow(/GET \/api\/v1\/forgotten declares no access rule: add config: \{ access: 'public'/);
    await app.close();
  });

  it('answers 401 to a caller without a token on every route that is not public', async () => {
    const closed = routes.filter((r) => r.url.startsWith('/api/v1/') && r.access !== 'public');
    expect(closed.length).toBeGreaterThan(35);
    for (const r of closed) {
      const res = await b.app.inject(requestTo(r, ws, {}));
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(401);
    }
  });

  it('answers 403 to a signed-in user who is not a system administrator on every platform route', async () => {
    for (const r of routes.filter((x) => x.access === 'system-admin')) {
      const res = await b.app.inject(requestTo(r, ws, bearer(viewer.token)));
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
    }
  });

  it('answers 404 to a non-member on every workspace route (no existence leak), and 403 to a viewer on every editor route', async () => {
    const workspaceRoutes = routes.filter((r) => r.access === 'workspace-viewer' || r.access === 'workspace-editor');
    expect(workspaceRoutes.length).toBeGreaterThan(20);
    for (const r of workspaceRoutes) {
      const res = await b.app.inject(requestTo(r, ws, bearer(stranger.token)));
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(404);
      if (r.method !== 'HEAD') expect(res.body, `${r.method} ${r.url}`).not.toContain('nb.ipynb');
    }
    for (const r of workspaceRoutes.filter((x) => x.access === 'workspace-editor')) {
      const res = await b.app.inject(requestTo(r, ws, bearer(viewer.token)));
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
    }
  });
});
