import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { tokenFingerprint } from '@codeagent/auth';
import { createOutboundClient } from '@codeagent/safe-fetch';
import { buildGatewayApp } from '@codeagent/gateway';
import { buildClusterAdminApp } from './app.js';

const TOKENS = ['first-admin-token', 'second-admin-token'];
const AGENT = 'agent-token-for-tests';
const KEY = Buffer.alloc(32, 7);

describe(`cluster administration (${process.env.CODEAGENT_TEST_DB ?? 'pglite'})`, () => {
  let t: TestDatabase;
  let app: FastifyInstance;
  let failNextAudit = false;
  let serviceUrl: string;
  let gateway: FastifyInstance;
  let gatewayUrl: string;
  let cluster: Server;
  let clusterUrl: string;
  const clusterRequests: IncomingMessage[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
    app = await buildClusterAdminApp({
      db: t.database.db,
      adminTokens: TOKENS,
      agentToken: AGENT,
      secretsKey: KEY,
      outbound: createOutboundClient({ allowLoopback: true, timeoutMs: 3000 }),
      betweenChangeAndAudit: async () => {
        if (failNextAudit) {
          failNextAudit = false;
          throw new Error('injected database failure');
        }
      },
    });
    serviceUrl = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    gateway = await buildGatewayApp({ upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: serviceUrl, bridge: 'http://127.0.0.1:9' } });
    gatewayUrl = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    cluster = createServer((req, res) => {
      clusterRequests.push(req);
      res.setHeader('set-cookie', 'session=secret-cookie');
      res.end(JSON.stringify({ path: req.url, auth: req.headers.authorization ?? null }));
    });
    await new Promise<void>((r) => cluster.listen(0, '127.0.0.1', r));
    clusterUrl = `http://127.0.0.1:${(cluster.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await gateway.close();
    await app.close();
    cluster.closeAllConnections();
    cluster.close();
    await t.drop();
  });

  const admin = (method: string, url: string, payload?: unknown, token = TOKENS[0]!) =>
    app.inject({ method: method as 'GET', url: `/admin${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const valid = (name: string, extra: Record<string, unknown> = {}) => ({ name, base_url: clusterUrl, auth_type: 'none', rate_limit: 0, ...extra });
  const auditCount = async () => Number((await t.database.db.selectFrom('audit_entries').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

  describe('bearer parsing (SPEC §8.1)', () => {
    const cases: [Record<string, string>, number, string | null][] = [
      [{}, 401, 'missing bearer token'],
      [{ authorization: '' }, 401, 'missing bearer token'],
      [{ authorization: 'Bearer' }, 401, 'missing bearer token'],
      [{ authorization: 'Bearer    ' }, 401, 'missing bearer token'],
      [{ authorization: `bearer ${TOKENS[0]}` }, 401, 'missing bearer token'],
      [{ authorization: `Basic ${TOKENS[0]}` }, 401, 'missing bearer token'],
      [{ authorization: `Token ${TOKENS[0]}` }, 401, 'missing bearer token'],
      [{ authorization: 'Bearer not-a-token' }, 401, 'invalid bearer token'],
      [{ authorization: `Bearer ${TOKENS[0]}x` }, 401, 'invalid bearer token'],
      [{ authorization: `Bearer   ${TOKENS[0]}   ` }, 200, null],
      [{ authorization: `Bearer ${TOKENS[1]}` }, 200, null],
    ];
    it.each(cases)('%j → %i %s', async (headers, status, error) => {
      const res = await app.inject({ method: 'GET', url: '/admin/clusters', headers });
      expect(res.statusCode).toBe(status);
      if (error) expect(res.json()).toEqual(expect.objectContaining({ error }));
    });
  });

  describe('cluster records and audit', () => {
    it('creates (201) with has_password and never returns the password', async () => {
      const before = await auditCount();
      const res = await admin('POST', '/clusters', valid('yarn-prod', { auth_type: 'basic', username: 'ops', AuthPassword: 'hunter2', description: 'YARN RM' }));
      expect(res.statusCode).toBe(201);
      const c = res.json();
      expect(c).toMatchObject({ name: 'yarn-prod', auth_type: 'basic', username: 'ops', has_password: true, rate_limit: 0, description: 'YARN RM' });
      expect(res.body).not.toContain('hunter2');
      expect(c).not.toHaveProperty('AuthPassword');
      expect(await auditCount()).toBe(before + 1);
      const stored = await t.database.db.selectFrom('clusters').select('password_enc').where('id', '=', c.id).executeTakeFirstOrThrow();
      expect(stored.password_enc).not.toContain('hunter2');
      const entry = (await admin('GET', `/audit?target_id=${c.id}`)).json().entries[0];
      expect(entry).toMatchObject({ action: 'cluster.create', target_type: 'cluster', target_id: c.id, actor: tokenFingerprint(TOKENS[0]!) });
      expect(entry.details.before).toBeNull();
      expect(entry.details.after.AuthPassword).toBe('***');
      expect(entry.details.changed).toContain('AuthPassword');
      expect(JSON.stringify(entry)).not.toContain('hunter2');
      expect(Object.keys(entry).sort()).toEqual(['action', 'actor', 'details', 'id', 'occurred_at', 'target_id', 'target_type']);
    });

    it('refuses invalid records with 400 validation failed naming the fields, and writes no audit entry', async () => {
      const before = await auditCount();
      const bad: [Record<string, unknown>, string[]][] = [
        [{}, ['name', 'base_url', 'auth_type', 'rate_limit']],
        [valid('x', { base_url: 'ftp://host' }), ['base_url']],
        [valid('x', { base_url: 'not a url' }), ['base_url']],
        [valid('x', { auth_type: 'kerberos' }), ['auth_type']],
        [valid('x', { auth_type: 'basic' }), ['username']],
        [valid('x', { auth_type: 'simple', username: '' }), ['username']],
        [valid('x', { rate_limit: -1 }), ['rate_limit']],
        [valid('x', { rate_limit: 1.5 }), ['rate_limit']],
        [valid('x', { rate_limit: '5' }), ['rate_limit']],
        [valid('x'.repeat(101)), ['name']],
      ];
      for (const [body, fields] of bad) {
        const res = await admin('POST', '/clusters', body);
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json().error).toBe('validation failed');
        expect(Object.keys(res.json().fields).sort()).toEqual([...fields].sort());
      }
      expect((await admin('POST', '/clusters', valid('yarn-prod'))).json()).toEqual(expect.objectContaining({ error: 'conflict' }));
      expect(await auditCount()).toBe(before);
    });

    it('reads, updates (full record), keeps the password when AuthPassword is empty, and deletes', async () => {
      const c = (await admin('POST', '/clusters', valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: 'p1' }))).json();
      expect((await admin('GET', `/clusters/${c.id}`)).json().name).toBe('hdfs');
      expect((await admin('GET', '/clusters')).json().clusters.map((x: { name: string }) => x.name)).toContain('hdfs');
      expect((await admin('GET', '/clusters/00000000-0000-0000-0000-000000000000')).json()).toEqual(expect.objectContaining({ error: 'not found' }));
      expect((await admin('GET', '/clusters/nope')).statusCode).toBe(404);

      const kept = await admin('PUT', `/clusters/${c.id}`, valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: '', rate_limit: 10 }));
      expect(kept.statusCode).toBe(200);
      expect(kept.json()).toMatchObject({ has_password: true, rate_limit: 10 });
      let entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update`)).json().entries[0];
      expect(entry.details.changed).toEqual(['rate_limit']);
      expect(entry.details.before.rate_limit).toBe(0);
      expect(entry.details.after.rate_limit).toBe(10);

      await admin('PUT', `/clusters/${c.id}`, valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: 'p2', rate_limit: 10 }));
      entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update`)).json().entries[0];
      expect(entry.details.changed).toEqual(['AuthPassword']);
      expect(entry.details.before.AuthPassword).toBe('***');
      expect(JSON.stringify(entry)).not.toMatch(/p1|p2/);

      const missing = await admin('PUT', `/clusters/${c.id}`, { name: 'hdfs' });
      expect(missing.statusCode).toBe(400);
      expect((await admin('PUT', '/clusters/00000000-0000-0000-0000-000000000000', valid('zz'))).statusCode).toBe(404);

      expect((await admin('DELETE', `/clusters/${c.id}`)).statusCode).toBe(204);
      expect((await admin('DELETE', `/clusters/${c.id}`)).statusCode).toBe(404);
      entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.delete`)).json().entries[0];
      expect(entry.details).toMatchObject({ after: null, before: { name: 'hdfs' } });
    });

    it('lists audit entries newest first, filtered, with cursors', async () => {
      const all = (await admin('GET', '/audit?limit=1000')).json().entries as { occurred_at: string; id: string }[];
      for (let i = 1; i < all.length; i++) expect(Date.parse(all[i - 1]!.occurred_at)).toBeGreaterThanOrEqual(Date.parse(all[i]!.occurred_at));
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { entries: { id: string }[]; next_cursor: string | null } = (await admin('GET', `/audit?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json();
        seen.push(...page.entries.map((e) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual(all.map((e) => e.id));
      expect((await admin('GET', '/audit?action=cluster.delete')).json().entries.every((e: { action: string }) => e.action === 'cluster.delete')).toBe(true);
      expect((await admin('GET', '/audit?limit=0')).statusCode).toBe(400);
      expect((await admin('GET', '/audit?cursor=garbage')).statusCode).toBe(400);
    });

    it('100 concurrent updates of one cluster: 100 audit entries forming one before/after chain', async () => {
      const c = (await admin('POST', '/clusters', valid('race'))).json();
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) => admin('PUT', `/clusters/${c.id}`, valid('race', { rate_limit: i + 1, description: `update ${i}` }), TOKENS[i % 2])),
      );
      expect(results.every((r) => r.statusCode === 200)).toBe(true);
      const entries = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update&limit=1000`)).json().entries as {
        details: { before: { description: string | null }; after: { description: string | null } };
      }[];
      expect(entries).toHaveLength(100);
      // Follow the chain from the created record: every entry starts where another ended.
      const byBefore = new Map(entries.map((e) => [e.details.before.description, e]));
      expect(byBefore.size).toBe(100);
      let current: string | null = null;
      for (let i = 0; i < 100; i++) {
        const next = byBefore.get(current);
        expect(next, `chain broken after ${String(current)}`).toBeDefined();
        current = next!.details.after.description;
      }
      expect((await admin('GET', `/clusters/${c.id}`)).json().description).toBe(current);
    });

    it('a database failure between change and audit: neither lands', async () => {
      const c = (await admin('POST', '/clusters', valid('atomic', { rate_limit: 1 }))).json();
      const before = await auditCount();
      failNextAudit = true;
      const res = await admin('PUT', `/clusters/${c.id}`, valid('atomic', { rate_limit: 99 }));
      expect(res.statusCode).toBe(500);
      expect((await admin('GET', `/clusters/${c.id}`)).json().rate_limit).toBe(1);
      expect(await auditCount()).toBe(before);
      failNextAudit = true;
      expect((await admin('POST', '/clusters', valid('never-created'))).statusCode).toBe(500);
      expect((await admin('GET', '/clusters')).json().clusters.map((x: { name: string }) => x.name)).not.toContain('never-created');
      expect(await auditCount()).toBe(before);
    });
  });

  describe('/mcp through the gateway with the SDK client', () => {
    async function connect(token = AGENT) {
      const client = new Client({ name: 'test-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    }
    const textOf = (r: unknown) => ((r as { content: { text: string }[] }).content[0]!.text);

    it('refuses a missing or wrong agent token with 401 unauthorized', async () => {
      for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: `Bearer ${TOKENS[0]}` }] as Record<string, string>[]) {
        const res = await fetch(`${gatewayUrl}/mcp`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{}' });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ error: 'unauthorized' });
      }
      await expect(connect('wrong')).rejects.toThrow();
    });

    it('refuses browser requests from foreign origins (DNS-rebinding guard), allows loopback pages', async () => {
      const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
      const headers = { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const evil = await fetch(`${serviceUrl}/mcp`, { method: 'POST', headers: { ...headers, origin: 'http://evil.example' }, body: init });
      expect(evil.status).toBe(403);
      const local = await fetch(`${serviceUrl}/mcp`, { method: 'POST', headers: { ...headers, origin: 'http://localhost:8080' }, body: init });
      expect(local.status).toBe(200);
    });

    it('lists and calls the tools; no secret in any result', async () => {
      await admin('POST', '/clusters', { name: 'livy', base_url: `${clusterUrl}/base`, auth_type: 'basic', username: 'agent-user', AuthPassword: 'top-secret-pw', rate_limit: 2 });
      await admin('POST', '/clusters', { name: 'simple-rm', base_url: clusterUrl, auth_type: 'simple', username: 'yarn', rate_limit: 0 });
      const client = await connect();
      const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
      expect(tools).toEqual(['cluster_request', 'get_cluster', 'list_clusters']);

      const list = textOf(await client.callTool({ name: 'list_clusters', arguments: {} }));
      expect(JSON.parse(list).clusters.map((c: { name: string }) => c.name)).toContain('livy');
      const one = textOf(await client.callTool({ name: 'get_cluster', arguments: { cluster: 'livy' } }));
      expect(JSON.parse(one)).toMatchObject({ name: 'livy', has_password: true });
      expect(`${list}${one}`).not.toContain('top-secret-pw');

      const before = clusterRequests.length;
      const first = await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'GET', path: '/sessions', query: { from: '0' } } });
      const body = JSON.parse(textOf(first));
      expect(body.status).toBe(200);
      expect(JSON.parse(body.body)).toEqual({ path: '/base/sessions?from=0', auth: `Basic ${Buffer.from('agent-user:top-secret-pw').toString('base64')}` });
      expect(body.headers).not.toHaveProperty('set-cookie');
      const simple = JSON.parse(textOf(await client.callTool({ name: 'cluster_request', arguments: { cluster: 'simple-rm', method: 'GET', path: 'ws/v1/cluster' } })));
      expect(JSON.parse(simple.body).path).toBe('/ws/v1/cluster?user.name=yarn');
      expect(simple.final_url).not.toContain('user.name');

      // rate_limit 2 per minute: the second call passes, the third is refused without a request
      expect((await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'HEAD', path: '/' } })).isError).toBeFalsy();
      const limited = await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'GET', path: '/' } });
      expect(limited.isError).toBe(true);
      expect(textOf(limited)).toMatch(/rate limit of cluster livy reached: 2 requests per minute/);
      expect(clusterRequests.length - before).toBe(3);

      const missing = await client.callTool({ name: 'get_cluster', arguments: { cluster: 'nope' } });
      expect(missing.isError).toBe(true);
      await client.close();
    });

    it('refuses a cluster whose base URL points at a blocked address', async () => {
      await admin('POST', '/clusters', { name: 'metadata', base_url: 'http://169.254.169.254/latest', auth_type: 'none', rate_limit: 0 });
      const client = await connect();
      const res = await client.callTool({ name: 'cluster_request', arguments: { cluster: 'metadata', method: 'GET', path: '/meta-data' } });
      expect(res.isError).toBe(true);
      expect(textOf(res)).toMatch(/address_blocked/);
      await client.close();
    });
  });
});
