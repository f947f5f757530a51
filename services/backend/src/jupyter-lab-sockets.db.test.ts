// Decision 0259: a user's open lab websockets end when their sessions or memberships change,
// whichever ingress let them in. nginx asks the backend only at the upgrade; the gateway asks
// again every few seconds (set to ten minutes here, so that only the runtime's own ending shows).
// Real backend (sessions and memberships on real PostgreSQL), real runtime (a sandboxed Jupyter
// server), real nginx with the rendered configuration.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { INGRESSES, startIngress, type Ingress } from '@codeagent/gateway/ingress-testing';
import { openSocket, upgrade } from '@codeagent/gateway/upstream-testing';
import { CLOSE_AGAIN_MS, buildRuntimeApp, defaultLabHost, labProxy, usersFollower, type Kernels, type UsersFollower } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { addMembers, bearer, createAndLogin, startTestBackend, type TestBackend } from './testing.js';

const LAB_TOKEN = 'the-token-only-the-ingress-and-the-runtime-know';

/** Past the second ending after the members' own changes (being added), which would end websockets opened right after them. */
const settled = () => new Promise((r) => setTimeout(r, CLOSE_AGAIN_MS + 300));

const within = <T>(ms: number, what: string, p: Promise<T>) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);

describe.each(INGRESSES)(`open lab websockets behind %s end when their user changes (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, (kind) => {
  let b: TestBackend;
  let kernels: Kernels;
  let follower: UsersFollower;
  let runtime: FastifyInstance;
  let ingress: Ingress;
  let ws: string;

  beforeAll(async () => {
    b = await startTestBackend();
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    kernels = await startTestKernels({ lab: defaultLabHost() });
    follower = usersFollower(() => Promise.resolve(b.t.database), b.app.log);
    runtime = await buildRuntimeApp({
      kernels: kernels.kernels,
      internalServiceToken: 'runtime-internal-token',
      lab: labProxy({ pool: kernels.pool, token: LAB_TOKEN, log: b.app.log, followUsers: (s) => follower.follow(s) }),
    });
    const runtimeUrl = await runtime.listen({ host: '127.0.0.1', port: 0 });
    ingress = await startIngress(kind, {
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' },
      jupyter: { url: runtimeUrl, token: LAB_TOKEN, perWorkspace: true, recheckMs: 600_000 },
    });
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'lab' } })).json<{
      id: string;
    }>().id;
  }, 120_000);

  afterAll(async () => {
    await ingress?.close();
    await follower?.close();
    await runtime?.close();
    await kernels?.stop();
    await b?.close();
  });

  async function member(email: string): Promise<{ id: string; token: string }> {
    const user = await createAndLogin(b, email);
    await addMembers(b, ws, [[user, 'editor']]);
    return user;
  }
  /** A kernel `user` starts in `workspace` through the ingress: the path of its websocket. */
  async function kernelChannels(user: { token: string }, workspace = ws): Promise<string> {
    const res = await fetch(`${ingress.base}/jupyter/${workspace}/api/kernels`, {
      method: 'POST',
      headers: { ...bearer(user.token), 'content-type': 'application/json' },
      body: '{"name":"python3"}',
      signal: AbortSignal.timeout(90_000),
    });
    expect(res.status).toBe(201);
    return `/jupyter/${workspace}/api/kernels/${((await res.json()) as { id: string }).id}/channels`;
  }
  /** Shuts the kernel of a websocket path down. */
  const shutDown = (channels: string, user: { token: string }) =>
    fetch(`${ingress.base}${channels.replace(/\/channels$/, '')}`, { method: 'DELETE', headers: bearer(user.token) });

  it("a removed member's, a demoted member's and a logged-out session's websockets end; another member's stays open", async () => {
    const keeper = await member(`keeper-${kind}@example.com`);
    const removed = await member(`removed-${kind}@example.com`);
    const demoted = await member(`demoted-${kind}@example.com`);
    const leaver = await member(`leaver-${kind}@example.com`);
    const channels = await kernelChannels(keeper);
    await settled();
    const open = (u: { token: string }) => openSocket(ingress.base, channels, bearer(u.token));
    const [kept, ofRemoved, ofDemoted, ofLeaver] = await Promise.all([open(keeper), open(removed), open(demoted), open(leaver)]);
    try {
      const admin = bearer(b.adminToken);
      expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${ws}/members/${removed.id}`, headers: admin })).statusCode).toBe(204);
      await within(5_000, "the removed member's websocket ends", ofRemoved.closed);
      const demote = await b.app.inject({
        method: 'PATCH',
        url: `/api/v1/platform/workspaces/${ws}/members/${demoted.id}`,
        headers: admin,
        payload: { role: 'viewer' },
      });
      expect(demote.statusCode).toBe(200);
      await within(5_000, "the demoted member's websocket ends", ofDemoted.closed);
      expect((await fetch(`${ingress.base}/api/v1/auth/logout`, { method: 'POST', headers: bearer(leaver.token) })).status).toBe(204);
      await within(5_000, "the logged-out session's websocket ends", ofLeaver.closed);
      // Their reconnections are the ingress's to check: refused.
      for (const [who, expected] of [
        [removed, 404],
        [demoted, 403],
        [leaver, 401],
      ] as const) {
        const status = await upgrade(ingress.base, channels, bearer(who.token), 30_000);
        expect(status, who.id).toBe(expected);
      }
      // The member whose access is unchanged kept hers through all of it (and past the second ending).
      await new Promise((r) => setTimeout(r, 1500));
      expect(kept.isOpen()).toBe(true);
    } finally {
      for (const s of [kept, ofRemoved, ofDemoted, ofLeaver]) s.end();
      await shutDown(channels, keeper);
    }
  }, 150_000);

  it("every user's websockets end when the runtime's listening connection was lost (what changed meanwhile is unknown)", async () => {
    const user = await member(`listener-${kind}@example.com`);
    const channels = await kernelChannels(user);
    await settled();
    const socket = await openSocket(ingress.base, channels, bearer(user.token));
    try {
      const { rows } = await b.t.database.pool.query<{ ended: boolean }>(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%codeagent_users%'",
      );
      expect(rows.length).toBeGreaterThan(0);
      await within(15_000, 'the websocket ends once the listening connection is back', socket.closed);
      // The session is as valid as before: the reconnection is let in.
      expect(await upgrade(ingress.base, channels, bearer(user.token), 30_000)).toBe(101);
    } finally {
      socket.end();
      await shutDown(channels, user);
    }
  }, 150_000);

  it("a workspace renamed keeps its websockets; one deleted ends them, not another workspace's", async () => {
    const admin = bearer(b.adminToken);
    const other = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: admin, payload: { name: `doomed-${kind}` } })).json<{
      id: string;
    }>().id;
    const user = await member(`renamer-${kind}@example.com`);
    await addMembers(b, other, [[user, 'editor']]);
    const [here, there] = await Promise.all([kernelChannels(user), kernelChannels(user, other)]);
    await settled();
    const [kept, doomed] = await Promise.all([openSocket(ingress.base, here, bearer(user.token)), openSocket(ingress.base, there, bearer(user.token))]);
    try {
      expect(
        (await b.app.inject({ method: 'PATCH', url: `/api/v1/platform/workspaces/${ws}`, headers: admin, payload: { name: `renamed-${kind}` } })).statusCode,
      ).toBe(200);
      await new Promise((r) => setTimeout(r, 1500));
      expect(kept.isOpen()).toBe(true);
      expect(doomed.isOpen()).toBe(true);
      expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${other}`, headers: admin })).statusCode).toBe(204);
      await within(5_000, "the deleted workspace's websocket ends", doomed.closed);
      await new Promise((r) => setTimeout(r, 1500));
      expect(kept.isOpen()).toBe(true);
    } finally {
      kept.end();
      doomed.end();
    }
  }, 150_000);

  it("a member removed while a large lab save arrives has nothing written (the ingress's check, or the runtime's)", async () => {
    const saver = await member(`saver-${kind}@example.com`);
    const keeper = await member(`reader-${kind}@example.com`);
    const name = `removed-save-${kind}.txt`;
    const body = Buffer.from(JSON.stringify({ type: 'file', format: 'text', content: 'x'.repeat(200_000) }));
    // The lab is started by a first request, so that the save reaches a running server.
    expect((await fetch(`${ingress.base}/jupyter/${ws}/api/contents`, { headers: bearer(keeper.token), signal: AbortSignal.timeout(90_000) })).status).toBe(
      200,
    );
    await settled();
    const url = new URL(`${ingress.base}/jupyter/${ws}/api/contents/${name}`);
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'PUT',
      headers: { ...bearer(saver.token), 'content-type': 'application/json', 'content-length': body.length },
    });
    const answer = new Promise<number>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', () => resolve(0));
    });
    req.write(body.subarray(0, body.length - 40));
    await new Promise((r) => setTimeout(r, 500));
    expect(
      (await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${ws}/members/${saver.id}`, headers: bearer(b.adminToken) })).statusCode,
    ).toBe(204);
    await new Promise((r) => setTimeout(r, 500));
    req.end(body.subarray(body.length - 40));
    // The gateway asks the backend again (404); behind nginx the runtime heard of the change (409).
    expect(await answer).toBe(kind === 'gateway' ? 404 : 409);
    const read = await fetch(`${ingress.base}/jupyter/${ws}/api/contents/${name}?content=0`, { headers: bearer(keeper.token) });
    expect(read.status).toBe(404);
  }, 150_000);
});
