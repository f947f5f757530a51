import type { Static } from '@sinclair/typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { matchesAny, parseBearer, safeEqual, tokenFingerprint } from '@codeagent/auth';
import { UnauthorizedError, requestIdOptions, serviceKit } from '@codeagent/service-kit';
import type { OutboundClient } from '@codeagent/safe-fetch';
import { ClusterService, SecretBox, VALIDATION_FAILED, validateCluster, type BetweenChangeAndAudit } from './domain/clusters.js';
import { DatabaseRateLimiter } from './domain/rate-limit.js';
import { AuditPage, AuditQuery, Cluster, ClusterList } from './domain/schemas.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpEvents, buildMcpServer } from './mcp.js';

/**
 * The MCP SDK (with zod and ajv) and the tools, loaded by the first /mcp call rather than at
 * start: an idle cluster service does not carry them (docs/decisions/0085).
 */
let mcpModules: Promise<[{ buildMcpServer: typeof buildMcpServer }, { StreamableHTTPServerTransport: typeof StreamableHTTPServerTransport }]> | undefined;
const loadMcp = () => (mcpModules ??= Promise.all([import('./mcp.js'), import('@modelcontextprotocol/sdk/server/streamableHttp.js')]));

export interface ClusterAdminOptions {
  db: Kysely<DB>;
  adminTokens: string[];
  agentToken: string;
  secretsKey: Buffer;
  /** Host names of browser origins allowed on /mcp besides loopback (MCP_ALLOWED_ORIGINS). */
  mcpAllowedOrigins?: string[];
  outbound: OutboundClient;
  loggerInstance?: FastifyBaseLogger;
  /** Counted by the metrics: audit entries written (after commit) and outbound refusals. */
  events?: McpEvents & { auditWritten?(action: string): void };
  /** Tests only: runs between a change and its audit entry, inside the transaction. */
  betweenChangeAndAudit?: BetweenChangeAndAudit;
}

declare module 'fastify' {
  interface FastifyRequest {
    adminActor: string;
  }
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

function originAllowed(origin: string | undefined, allowed: string[]): boolean {
  if (origin === undefined) return true;
  try {
    const host = new URL(origin).hostname.toLowerCase();
    return LOOPBACK_HOSTS.has(host) || allowed.includes(host);
  } catch {
    return false;
  }
}

/** The cluster administration service (docs/contract/spec.md §8): `/admin/*` for operators, `/mcp` for agents. */
export async function buildClusterAdminApp(opts: ClusterAdminOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: false }),
    ...requestIdOptions(),
    // MCP requests are hijacked from Fastify; close their keep-alive sockets too on shutdown.
    forceCloseConnections: true,
  });
  // §8.2: a validation failure answers `validation failed`, from a schema as from `validateCluster`.
  await app.register(serviceKit, { validationError: VALIDATION_FAILED });
  const clusters = new ClusterService(opts.db, new SecretBox(opts.secretsKey), opts.betweenChangeAndAudit);
  // Shared by every instance of the service (the database), not one process's memory.
  const limiter = new DatabaseRateLimiter(opts.db);
  const audited = (action: string) => opts.events?.auditWritten?.(action);
  app.decorateRequest('adminActor', '');

  await app.register(
    // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
    async (admin) => {
      // docs/contract/spec.md §8.1: the one bearer parser; every configured token compared in constant time.
      admin.addHook('onRequest', (req: FastifyRequest, _reply, done) => {
        const token = parseBearer(req.headers.authorization);
        if (token === '') return done(new UnauthorizedError('send Authorization: Bearer <admin token>', 'missing bearer token'));
        if (!matchesAny(token, opts.adminTokens)) return done(new UnauthorizedError('the token is not one of ADMIN_TOKENS', 'invalid bearer token'));
        req.adminActor = tokenFingerprint(token);
        done();
      });

      // The answers' schemas: a cluster carries exactly the fields of `Cluster`, nothing else.
      admin.get('/clusters', { schema: { response: { 200: ClusterList } } }, async () => ({ clusters: await clusters.list() }));
      admin.get<{ Params: { id: string } }>('/clusters/:id', { schema: { response: { 200: Cluster } } }, async (req) => clusters.get(req.params.id));
      // The body is checked by `validateCluster` (the `ClusterBody` schema and the rules beside it), which answers §8's `validation failed`.
      admin.post('/clusters', { schema: { response: { 201: Cluster } } }, async (req, reply) => {
        const created = await clusters.create(req.adminActor, validateCluster(req.body));
        audited('cluster.create');
        return reply.code(201).send(created);
      });
      admin.put<{ Params: { id: string } }>('/clusters/:id', { schema: { response: { 200: Cluster } } }, async (req) => {
        const input = validateCluster(req.body);
        const updated = await clusters.update(req.adminActor, req.params.id, input);
        audited('cluster.update');
        return updated;
      });
      admin.delete<{ Params: { id: string } }>('/clusters/:id', async (req, reply) => {
        await clusters.remove(req.adminActor, req.params.id);
        audited('cluster.delete');
        return reply.code(204).send(null);
      });
      admin.get<{ Querystring: Static<typeof AuditQuery> }>('/audit', { schema: { querystring: AuditQuery, response: { 200: AuditPage } } }, async (req) => {
        const q = req.query;
        return clusters.auditLog({ targetId: q.target_id, action: q.action, limit: q.limit ?? 100, cursor: q.cursor });
      });
    },
    { prefix: '/admin' },
  );

  // /mcp: the agent token is checked before the MCP transport sees the request.
  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    handler: async (req, reply) => {
      const token = parseBearer(req.headers.authorization);
      if (!safeEqual(token, opts.agentToken)) return reply.code(401).send({ error: 'unauthorized' });
      // DNS-rebinding guard (MCP transport security): a browser request carries Origin; only
      // loopback pages and configured origins may drive the endpoint. Agents send no Origin.
      if (!originAllowed(req.headers.origin, opts.mcpAllowedOrigins ?? [])) {
        return reply.code(403).send({ error: 'forbidden', message: 'this Origin may not call /mcp; add its host to MCP_ALLOWED_ORIGINS' });
      }
      const [mcp, sdk] = await loadMcp();
      reply.hijack();
      const server = mcp.buildMcpServer(clusters, opts.outbound, limiter, opts.events);
      const transport = new sdk.StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req.raw, reply.raw, req.body);
    },
  });

  return app;
}
