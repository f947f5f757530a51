import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { tokenFingerprint } from '@codeagent/auth';
import { createOutboundClient } from '@codeagent/safe-fetch';
import { buildGatewayApp } from '@codeagent/gateway';
import type { ErrorBody } from '@codeagent/service-kit';
import { buildClusterAdminApp } from './app.js';
import type { AuditEntryDto, ClusterDto } from './domain/schemas.js';

const TOKENS = ['first-admin-token', 'second-admin-token'];
const AGENT = 'agent-token-for-tests';
const KEY = Buffer.alloc(32, 7);

/** `GET /admin/clusters` (`ClusterList`). */
type ClusterList = { clusters: ClusterDto[] };
/** An audit entry with the `details` a cluster change writes (domain/clusters.ts); `GET /admin/audit` answers a page of them. */
type Audit = Omit<AuditEntryDto, 'details'> & {
  details: { before: Record<string, unknown> | null; after: Record<string, unknown> | null; changed: string[] };
};
type Audits = { entries: Audit[]; next_cursor: string | null };
/** The text of the MCP tool `cluster_request` (mcp.ts). */
type ClusterResponse = { status: number; headers: Record<string, string>; body: string; truncated: boolean; final_url: string; redirects: number };
/** What the stand-in cluster answers: the path it was asked for and the Authorization header. */
type Echo = { path: string; auth: string | null };

describe(`cluster administration (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
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
      betweenChangeAndAudit: () => {
        if (!failNextAudit) return Promise.resolve();
        failNextAudit = false;
        return Promise.reject(new Error('injected database failure'));
      },
    });
    serviceUrl = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    gateway = await buildGatewayApp({ upstreams: { backend: 'http://127.0.0.1:9', clusterAdmin: serviceUrl, bridge: 'http://127.0.0.1:9' } });
    gatewayUrl = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    cluster = createServer((req, res) => {
      clusterRequests.push(req);
      res.setHeader('set-cookie', 'session=secret-cookie');
      res.setHeader('x-echo-auth', req.headers.authorization ?? '');
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
    app.inject({
      method: method as 'GET',
      url: `/admin${url}`,
      headers: { authorization: `Bearer ${token}` },
      ...(payload !== undefined ? { payload: payload as object } : {}),
    });
  const valid = (name: string, extra: Record<string, unknown> = {}) => ({ name, base_url: clusterUrl, auth_type: 'none', rate_limit: 0, ...extra });
  const auditCount = async () =>
    Number(
      (
        await t.database.db
          .selectFrom('audit_entries')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  describe('bearer parsing (docs/contract/spec.md §8.1)', () => {
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
      const res = await admin(
        'POST',
        '/clusters',
        valid('yarn-prod', { auth_type: 'basic', username: 'ops', AuthPassword: 'hunter2', description: 'YARN RM' }),
      );
      expect(res.statusCode).toBe(201);
      const c = res.json<ClusterDto>();
      expect(c).toMatchObject({ name: 'yarn-prod', auth_type: 'basic', username: 'ops', has_password: true, rate_limit: 0, description: 'YARN RM' });
      expect(res.body).not.toContain('hunter2');
      expect(c).not.toHaveProperty('AuthPassword');
      expect(await auditCount()).toBe(before + 1);
      const stored = await t.database.db.selectFrom('clusters').select('password_enc').where('id', '=', c.id).executeTakeFirstOrThrow();
      expect(stored.password_enc).not.toContain('hunter2');
      const entry = (await admin('GET', `/audit?target_id=${c.id}`)).json<Audits>().entries[0]!;
      expect(entry).toMatchObject({ action: 'cluster.create', target_type: 'cluster', target_id: c.id, actor: tokenFingerprint(TOKENS[0]!) });
      expect(entry.details.before).toBeNull();
      expect(entry.details.after?.AuthPassword).toBe('***');
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
        expect(res.json<ErrorBody>().error).toBe('validation failed');
        expect(Object.keys(res.json<Required<ErrorBody>>().fields).sort()).toEqual([...fields].sort());
      }
      expect((await admin('POST', '/clusters', valid('yarn-prod'))).json<ErrorBody>()).toEqual(expect.objectContaining({ error: 'conflict' }));
      // PostgreSQL stores no U+0000: a record or a filter with one is the request's fault (it was a 500).
      for (const body of [valid('a\u0000b'), valid('nul-user', { auth_type: 'basic', username: 'a\u0000b', AuthPassword: 'pw' })]) {
        const res = await admin('POST', '/clusters', body);
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ error: 'validation failed', message: expect.stringMatching(/U\+0000/) as unknown });
      }
      expect((await admin('GET', '/audit?action=a%00b')).statusCode).toBe(400);
      expect(await auditCount()).toBe(before);
    });

    it('reads, updates (full record), keeps the password when AuthPassword is empty, and deletes', async () => {
      const c = (await admin('POST', '/clusters', valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: 'p1' }))).json<ClusterDto>();
      expect((await admin('GET', `/clusters/${c.id}`)).json<ClusterDto>().name).toBe('hdfs');
      expect((await admin('GET', '/clusters')).json<ClusterList>().clusters.map((x: { name: string }) => x.name)).toContain('hdfs');
      expect((await admin('GET', '/clusters/00000000-0000-0000-0000-000000000000')).json()).toEqual(expect.objectContaining({ error: 'not found' }));
      expect((await admin('GET', '/clusters/nope')).statusCode).toBe(404);

      const kept = await admin('PUT', `/clusters/${c.id}`, valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: '', rate_limit: 10 }));
      expect(kept.statusCode).toBe(200);
      expect(kept.json()).toMatchObject({ has_password: true, rate_limit: 10 });
      let entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update`)).json<Audits>().entries[0]!;
      expect(entry.details.changed).toEqual(['rate_limit']);
      expect(entry.details.before?.rate_limit).toBe(0);
      expect(entry.details.after?.rate_limit).toBe(10);

      await admin('PUT', `/clusters/${c.id}`, valid('hdfs', { auth_type: 'basic', username: 'u', AuthPassword: 'p2', rate_limit: 10 }));
      entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update`)).json<Audits>().entries[0]!;
      expect(entry.details.changed).toEqual(['AuthPassword']);
      expect(entry.details.before?.AuthPassword).toBe('***');
      expect(JSON.stringify(entry)).not.toMatch(/p1|p2/);

      const missing = await admin('PUT', `/clusters/${c.id}`, { name: 'hdfs' });
      expect(missing.statusCode).toBe(400);
      expect((await admin('PUT', '/clusters/00000000-0000-0000-0000-000000000000', valid('zz'))).statusCode).toBe(404);

      expect((await admin('DELETE', `/clusters/${c.id}`)).statusCode).toBe(204);
      expect((await admin('DELETE', `/clusters/${c.id}`)).statusCode).toBe(404);
      entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.delete`)).json<Audits>().entries[0]!;
      expect(entry.details).toMatchObject({ after: null, before: { name: 'hdfs' } });
    });

    it('lists audit entries newest first, filtered, with cursors', async () => {
      const all = (await admin('GET', '/audit?limit=1000')).json<Audits>().entries;
      for (let i = 1; i < all.length; i++) expect(Date.parse(all[i - 1]!.occurred_at)).toBeGreaterThanOrEqual(Date.parse(all[i]!.occurred_at));
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { entries: { id: string }[]; next_cursor: string | null } = (
          await admin('GET', `/audit?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
        ).json<Audits>();
        seen.push(...page.entries.map((e) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual(all.map((e) => e.id));
      expect((await admin('GET', '/audit?action=cluster.delete')).json<Audits>().entries.every((e: { action: string }) => e.action === 'cluster.delete')).toBe(
        true,
      );
      for (const limit of ['0', '1001', '2.5', 'ten']) {
        const res = await admin('GET', `/audit?limit=${limit}`);
        expect(res.statusCode, limit).toBe(400);
        expect(res.json<ErrorBody>(), limit).toMatchObject({ error: 'validation failed', fields: { limit: expect.any(String) as unknown } });
      }
      expect((await admin('GET', '/audit')).json<Audits>().entries).toHaveLength(Math.min(all.length, 100));
      expect((await admin('GET', '/audit?cursor=garbage')).statusCode).toBe(400);
      // Well-formed but foreign cursors (a bad date, a non-UUID id, wrong arity) are 400 too, never 500.
      for (const foreign of [['zzz', 'x'], ['not-a-date', '00000000-0000-4000-8000-000000000000'], [new Date().toISOString(), 'x'], [1, 2], ['a']]) {
        const res = await admin('GET', `/audit?cursor=${Buffer.from(JSON.stringify(foreign)).toString('base64url')}`);
        expect(res.statusCode, JSON.stringify(foreign)).toBe(400);
        expect(res.json()).toMatchObject({ error: 'validation failed', fields: { cursor: 'invalid cursor' } });
      }
    });

    it('100 concurrent updates of one cluster: 100 audit entries forming one before/after chain', async () => {
      const c = (await admin('POST', '/clusters', valid('race'))).json<ClusterDto>();
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          admin('PUT', `/clusters/${c.id}`, valid('race', { rate_limit: i + 1, description: `update ${i}` }), TOKENS[i % 2]),
        ),
      );
      expect(results.every((r) => r.statusCode === 200)).toBe(true);
      const entries = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update&limit=1000`)).json<{
        entries: { details: { before: { description: string | null }; after: { description: string | null } } }[];
      }>().entries;
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
      expect((await admin('GET', `/clusters/${c.id}`)).json<ClusterDto>().description).toBe(current);
    });

    it('a database failure between change and audit: neither lands', async () => {
      const c = (await admin('POST', '/clusters', valid('atomic', { rate_limit: 1 }))).json<ClusterDto>();
      const before = await auditCount();
      failNextAudit = true;
      const res = await admin('PUT', `/clusters/${c.id}`, valid('atomic', { rate_limit: 99 }));
      expect(res.statusCode).toBe(500);
      expect((await admin('GET', `/clusters/${c.id}`)).json<ClusterDto>().rate_limit).toBe(1);
      expect(await auditCount()).toBe(before);
      failNextAudit = true;
      expect((await admin('POST', '/clusters', valid('never-created'))).statusCode).toBe(500);
      expect((await admin('GET', '/clusters')).json<ClusterList>().clusters.map((x: { name: string }) => x.name)).not.toContain('never-created');
      expect(await auditCount()).toBe(before);
    });
  });

  describe('credentials never in base_url (docs/contract/spec.md §8.2)', () => {
    const clusterCount = async () =>
      Number(
        (
          await t.database.db
            .selectFrom('clusters')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('refuses user info and secret-looking query parameters with 400, stores nothing, audits nothing, echoes no secret', async () => {
      const before = { audit: await auditCount(), clusters: await clusterCount() };
      for (const base_url of [
        'https://ops:pw-in-url-1@rm.example.com',
        'https://ops@rm.example.com:8088/ws',
        'https://rm.example.com/?token=pw-in-url-2',
        'https://rm.example.com/api?region=eu&Access_Token=pw-in-url-3',
        'https://rm.example.com/?apiKey=pw-in-url-4',
        'https://rm.example.com/?X-Amz-Signature=pw-in-url-5',
        'https://rm.example.com/#token=pw-in-url-6',
      ]) {
        const res = await admin('POST', '/clusters', valid('with-credentials', { base_url }));
        expect(res.statusCode, base_url).toBe(400);
        expect(res.json()).toMatchObject({ error: 'validation failed', fields: { base_url: expect.any(String) as unknown } });
        expect(Object.keys(res.json<Required<ErrorBody>>().fields)).toEqual(['base_url']);
        expect(res.body).not.toMatch(/pw-in-url/);
      }
      // the same on update
      const c = (await admin('POST', '/clusters', valid('clean-url'))).json<ClusterDto>();
      const beforeUpdate = await auditCount();
      const put = await admin('PUT', `/clusters/${c.id}`, valid('clean-url', { base_url: 'https://ops:pw-in-url-7@rm.example.com' }));
      expect(put.statusCode).toBe(400);
      expect(put.json<ErrorBody>().fields).toHaveProperty('base_url');
      expect((await admin('GET', `/clusters/${c.id}`)).json<ClusterDto>().base_url).toBe(clusterUrl);
      expect(await auditCount()).toBe(beforeUpdate);
      expect(await clusterCount()).toBe(before.clusters + 1);
      expect(await auditCount()).toBe(before.audit + 1);
    });

    it('asks for a new password when base_url changes origin, so a stored password never follows the record', async () => {
      const c = (
        await admin(
          'POST',
          '/clusters',
          valid('moving', { base_url: 'https://rm.example.com/a', auth_type: 'basic', username: 'ops', AuthPassword: 'old-host-pw' }),
        )
      ).json<ClusterDto>();
      const before = await auditCount();
      for (const base_url of ['https://evil.example/a', 'http://rm.example.com/a', 'https://rm.example.com:8443/a']) {
        for (const extra of [{}, { AuthPassword: '' }, { AuthPassword: null }, { auth_type: 'none', username: null }]) {
          const res = await admin('PUT', `/clusters/${c.id}`, valid('moving', { base_url, auth_type: 'basic', username: 'ops', ...extra }));
          expect(res.statusCode, `${base_url} ${JSON.stringify(extra)}`).toBe(400);
          expect(res.json()).toMatchObject({ error: 'validation failed', fields: { AuthPassword: expect.stringContaining('origin') as unknown } });
        }
      }
      expect(await auditCount()).toBe(before);
      const unchanged = await t.database.db.selectFrom('clusters').selectAll().where('id', '=', c.id).executeTakeFirstOrThrow();
      expect(unchanged.base_url).toBe('https://rm.example.com/a');

      // the same origin (another path, the default port spelled out): the password is kept
      const samePlace = await admin(
        'PUT',
        `/clusters/${c.id}`,
        valid('moving', { base_url: 'https://RM.example.com:443/b', auth_type: 'basic', username: 'ops' }),
      );
      expect(samePlace.statusCode).toBe(200);
      expect(samePlace.json<ClusterDto>().has_password).toBe(true);

      // a new origin with a new password: accepted, audited without either password
      const moved = await admin(
        'PUT',
        `/clusters/${c.id}`,
        valid('moving', { base_url: 'https://other.example/a', auth_type: 'basic', username: 'ops', AuthPassword: 'new-host-pw' }),
      );
      expect(moved.statusCode).toBe(200);
      expect(moved.json()).toMatchObject({ base_url: 'https://other.example/a', has_password: true });
      const entry = (await admin('GET', `/audit?target_id=${c.id}&action=cluster.update`)).json<Audits>().entries[0]!;
      expect(entry.details.changed).toEqual(['base_url', 'AuthPassword']);
      expect(JSON.stringify(entry)).not.toMatch(/old-host-pw|new-host-pw/);

      // a record without a stored password moves freely
      const open = (await admin('POST', '/clusters', valid('no-password', { base_url: 'https://a.example' }))).json<ClusterDto>();
      expect((await admin('PUT', `/clusters/${open.id}`, valid('no-password', { base_url: 'https://b.example' }))).statusCode).toBe(200);
    });

    it('records stored before the rule: credentials in base_url are never shown (API, audit, get_cluster)', async () => {
      const legacy = await t.database.db
        .insertInto('clusters')
        .values({
          name: 'legacy',
          base_url: 'https://ops:legacy-pw@rm.example.com/x?token=legacy-token&a=1',
          auth_type: 'none',
          username: null,
          password_enc: null,
          rate_limit: 0,
          description: null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const shown = (await admin('GET', `/clusters/${legacy.id}`)).json<ClusterDto>();
      expect(shown.base_url).toBe('https://***@rm.example.com/x?token=***&a=1');
      expect(JSON.stringify((await admin('GET', '/clusters')).json<ClusterList>())).not.toMatch(/legacy-pw|legacy-token/);
      const fixed = await admin('PUT', `/clusters/${legacy.id}`, valid('legacy', { base_url: 'https://rm.example.com/x?a=1' }));
      expect(fixed.statusCode).toBe(200);
      const entry = (await admin('GET', `/audit?target_id=${legacy.id}`)).json<Audits>().entries[0]!;
      expect(entry.details.changed).toEqual(['base_url']);
      expect(JSON.stringify(entry)).not.toMatch(/legacy-pw|legacy-token/);
      await t.database.db
        .updateTable('clusters')
        .set({ base_url: 'https://ops:legacy-pw@rm.example.com/x?token=legacy-token' })
        .where('id', '=', legacy.id)
        .execute();
      const client = new Client({ name: 'test-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${AGENT}` } } }));
      const results = [
        await client.callTool({ name: 'get_cluster', arguments: { cluster: 'legacy' } }),
        await client.callTool({ name: 'list_clusters', arguments: {} }),
        await client.callTool({ name: 'cluster_request', arguments: { cluster: 'legacy', method: 'GET', path: '/' } }),
      ];
      expect(JSON.stringify(results)).not.toMatch(/legacy-pw|legacy-token/);
      expect(results[2]!.isError).toBe(true);
      await client.close();
    });
  });

  describe('/mcp through the gateway with the SDK client', () => {
    async function connect(token = AGENT) {
      const client = new Client({ name: 'test-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    }
    const textOf = (r: unknown) => (r as { content: { text: string }[] }).content[0]!.text;

    it('refuses a missing or wrong agent token with 401 unauthorized', async () => {
      for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: `Bearer ${TOKENS[0]}` }] as Record<string, string>[]) {
        const res = await fetch(`${gatewayUrl}/mcp`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{}' });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ error: 'unauthorized' });
      }
      await expect(connect('wrong')).rejects.toThrow();
    });

    it('refuses browser requests from foreign origins (DNS-rebinding guard), allows loopback pages', async () => {
      const init = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      });
      const headers = { authorization: `Bearer ${AGENT}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const evil = await fetch(`${serviceUrl}/mcp`, { method: 'POST', headers: { ...headers, origin: 'http://evil.example' }, body: init });
      expect(evil.status).toBe(403);
      const local = await fetch(`${serviceUrl}/mcp`, { method: 'POST', headers: { ...headers, origin: 'http://localhost:8080' }, body: init });
      expect(local.status).toBe(200);
    });

    it('lists and calls the tools; no secret in any result', async () => {
      await admin('POST', '/clusters', {
        name: 'livy',
        base_url: `${clusterUrl}/base`,
        auth_type: 'basic',
        username: 'agent-user',
        AuthPassword: 'top-secret-pw',
        rate_limit: 2,
      });
      await admin('POST', '/clusters', { name: 'simple-rm', base_url: clusterUrl, auth_type: 'simple', username: 'yarn', rate_limit: 0 });
      const client = await connect();
      const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
      expect(tools).toEqual(['cluster_request', 'get_cluster', 'list_clusters']);

      const list = textOf(await client.callTool({ name: 'list_clusters', arguments: {} }));
      expect((JSON.parse(list) as ClusterList).clusters.map((c) => c.name)).toContain('livy');
      const one = textOf(await client.callTool({ name: 'get_cluster', arguments: { cluster: 'livy' } }));
      expect(JSON.parse(one)).toMatchObject({ name: 'livy', has_password: true });
      expect(`${list}${one}`).not.toContain('top-secret-pw');

      const before = clusterRequests.length;
      const first = await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'GET', path: '/sessions', query: { from: '0' } } });
      const body = JSON.parse(textOf(first)) as ClusterResponse;
      expect(body.status).toBe(200);
      // The cluster got the credential; an answer that echoes it shows it hidden (SPEC §8.4: no secret in a tool result).
      expect(clusterRequests.at(-1)!.headers.authorization).toBe(`Basic ${Buffer.from('agent-user:top-secret-pw').toString('base64')}`);
      expect(JSON.parse(body.body)).toEqual({ path: '/base/sessions?from=0', auth: 'Basic ***' });
      expect(body.headers['x-echo-auth']).toBe('Basic ***');
      expect(JSON.stringify(first)).not.toMatch(/top-secret-pw|YWdlbnQtdXNlcjp0b3Atc2VjcmV0LXB3/);
      expect(body.headers).not.toHaveProperty('set-cookie');
      const simple = JSON.parse(
        textOf(await client.callTool({ name: 'cluster_request', arguments: { cluster: 'simple-rm', method: 'GET', path: 'ws/v1/cluster' } })),
      ) as ClusterResponse;
      expect((JSON.parse(simple.body) as Echo).path).toBe('/ws/v1/cluster?user.name=yarn');
      expect(simple.final_url).not.toContain('user.name');

      // rate_limit 2 per minute: the second call passes, the third is refused without a request
      expect((await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'HEAD', path: '/' } })).isError).toBeFalsy();
      const limited = await client.callTool({ name: 'cluster_request', arguments: { cluster: 'livy', method: 'GET', path: '/' } });
      expect(limited.isError).toBe(true);
      expect(textOf(limited)).toMatch(/rate limit of cluster livy reached: 2 requests per minute/);
      expect(clusterRequests.length - before).toBe(3);

      const missing = await client.callTool({ name: 'get_cluster', arguments: { cluster: 'nope' } });
      expect(missing.isError).toBe(true);
      // A name no cluster can have: not found, not the database's own words (a U+0000 gave
      // "invalid byte sequence for encoding UTF8"), and no long echo.
      for (const tool of ['get_cluster', 'cluster_request']) {
        const nul = await client.callTool({ name: tool, arguments: { cluster: 'li\u0000vy', method: 'GET', path: '/' } });
        expect(nul.isError, tool).toBe(true);
        expect(textOf(nul), tool).toMatch(/not found/);
        const long = await client.callTool({ name: tool, arguments: { cluster: 'x'.repeat(100_000), method: 'GET', path: '/' } });
        expect(long.isError, tool).toBe(true);
        expect(textOf(long).length, tool).toBeLessThan(1000);
      }
      await client.close();
    });

    it('keeps cluster_request paths under the base path: traversal, encodings, other hosts and query smuggling are refused, nothing is sent', async () => {
      await admin('POST', '/clusters', {
        name: 'scoped',
        base_url: `${clusterUrl}/gateway/yarn?tenant=a`,
        auth_type: 'simple',
        username: 'yarn',
        rate_limit: 0,
      });
      const client = await connect();
      const call = (path: string, query?: Record<string, string>) =>
        client.callTool({ name: 'cluster_request', arguments: { cluster: 'scoped', method: 'GET', path, ...(query ? { query } : {}) } });
      const before = clusterRequests.length;
      for (const path of [
        '../../x',
        '..',
        'ws/../../../admin',
        '%2e%2e/x',
        '%2E%2E%2Fx',
        '..%2fx',
        '%252e%252e/x',
        '..;/x',
        '..\\x',
        '..%5cx',
        `${clusterUrl}/x`,
        '//evil.example/x',
        'x?user.name=root',
        'x%3fuser.name=root',
        'x#y',
        '.\n./x',
      ]) {
        const res = await call(path);
        expect(res.isError, path).toBe(true);
        expect(textOf(res), path).toMatch(/invalid_path.*no request was sent/);
      }
      for (const query of [{ 'user.name': 'root' }, { tenant: 'b' }] as Record<string, string>[]) {
        const res = await call('apps', query);
        expect(res.isError, JSON.stringify(query)).toBe(true);
        expect(textOf(res)).toMatch(/set by the cluster record/);
      }
      expect(clusterRequests.length).toBe(before);

      const ok = JSON.parse(textOf(await call('/ws/v1/apps', { state: 'RUNNING&user.name=root' }))) as ClusterResponse;
      expect((JSON.parse(ok.body) as Echo).path).toBe('/gateway/yarn/ws/v1/apps?tenant=a&state=RUNNING%26user.name%3Droot&user.name=yarn');
      expect(clusterRequests.length).toBe(before + 1);
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
