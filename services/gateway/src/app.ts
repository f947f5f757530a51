import type { IncomingHttpHeaders } from 'node:http';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  type RawServerBase,
  type RouteGenericInterface,
} from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { requestIdOptions, serviceKit } from '@codeagent/service-kit';
import { landingPage } from './landing.js';
import { checkJupyterAccess, SESSION_COOKIE, withoutCookie } from './jupyter-auth.js';

export interface Upstreams {
  backend: string;
  clusterAdmin: string;
  bridge: string;
}

/** The JupyterLab server behind `/jupyter/` (SPEC §10), reached with its own token. */
export interface JupyterUpstream {
  /** Its address, e.g. http://127.0.0.1:8095; it must serve under the base URL `/jupyter/`. */
  url: string;
  /** The Jupyter server's token: injected by the gateway, never shown to users. */
  token: string;
}

export interface GatewayOptions {
  upstreams: Upstreams;
  /** Where JupyterLab runs; without it `/jupyter/*` answers 404. */
  jupyter?: JupyterUpstream;
  /** Verifies platform user tokens before `/jupyter/*` is proxied; required with `jupyter`. */
  jwtSecret?: string;
  /** Upstream time limit (headers, and silence between body chunks), default 300 s. */
  timeoutMs?: number;
  logger?: FastifyServerOptions['logger'];
}

/** Error body of a failed upstream: 504 for a time-out, 502 for anything else (down, reset, garbage). */
function onUpstreamError(reply: FastifyReply<RouteGenericInterface, RawServerBase>, { error }: { error: Error }): void {
  const { statusCode, code } = error as Error & { statusCode?: number; code?: string };
  const timedOut = statusCode === 504;
  reply.request.log.warn({ code, upstream_error: error.message }, 'upstream failed');
  if (reply.sent) return;
  void reply
    .code(timedOut ? 504 : 502)
    .send(
      timedOut
        ? { error: 'gateway_timeout', message: 'the component behind this route did not answer in time' }
        : { error: 'bad_gateway', message: 'the component behind this route is not reachable; is it running?' },
    );
}

/**
 * The single ingress (SPEC §10): routes by path prefix and does nothing else. Bodies are
 * streamed both ways, `x-request-id` is passed on (and made when missing), `x-forwarded-*`
 * are set. `/internal/*` is never routed.
 */
export async function buildGatewayApp(opts: GatewayOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? false,
    ...requestIdOptions(),
    // A proxy must not cap bodies: the backend enforces MAX_UPLOAD_BYTES itself.
    bodyLimit: Number.MAX_SAFE_INTEGER,
    // Per-request log lines would cost more than the proxying itself; failures are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // Keep-alive from clients longer than undici's idle timeout towards them.
    keepAliveTimeout: 72_000,
  });
  await app.register(serviceKit);

  const timeout = opts.timeoutMs ?? 300_000;
  const forwardHeaders = (req: FastifyRequest<RouteGenericInterface, RawServerBase>, headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    const prior = req.headers['x-forwarded-for'];
    return {
      ...headers,
      'x-request-id': req.id,
      'x-forwarded-for': prior ? `${String(prior)}, ${req.ip}` : req.ip,
      'x-forwarded-proto': req.protocol,
      'x-forwarded-host': req.headers.host ?? '',
    };
  };

  const route = async (prefix: string, upstream: string) => {
    await app.register(httpProxy, {
      upstream,
      prefix,
      rewritePrefix: prefix,
      undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: timeout, bodyTimeout: timeout },
      replyOptions: {
        rewriteRequestHeaders: forwardHeaders,
        onError: onUpstreamError,
      },
    });
  };

  await route('/api/v1', opts.upstreams.backend);
  await route('/admin', opts.upstreams.clusterAdmin);
  await route('/mcp', opts.upstreams.clusterAdmin);
  await route('/codeagent-bridge', opts.upstreams.bridge);

  // The extension addresses the bridge relative to JupyterLab's base URL (SPEC §10). The
  // bridge checks the user token itself, as on `/codeagent-bridge/*`.
  await app.register(httpProxy, {
    upstream: opts.upstreams.bridge,
    prefix: '/jupyter/codeagent-bridge',
    rewritePrefix: '/codeagent-bridge',
    undici: { connections: 32, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: timeout, bodyTimeout: timeout },
    replyOptions: { rewriteRequestHeaders: forwardHeaders, onError: onUpstreamError },
  });

  if (opts.jupyter) {
    const { url: jupyterUrl, token: jupyterToken } = opts.jupyter;
    const jwtSecret = opts.jwtSecret;
    if (!jwtSecret) throw new Error('buildGatewayApp: `jwtSecret` is required to route /jupyter (only logged-in users may reach it)');
    // Users never hold the Jupyter token: the gateway replaces their credentials with it, and
    // drops the platform cookie and the Origin it already checked (Jupyter would compare the
    // Origin with its own address and refuse).
    const jupyterHeaders = (headers: IncomingHttpHeaders): IncomingHttpHeaders => {
      const out: IncomingHttpHeaders = { ...headers, authorization: `token ${jupyterToken}` };
      const cookie = withoutCookie(headers.cookie, SESSION_COOKIE);
      if (cookie === undefined) delete out.cookie;
      else out.cookie = cookie;
      delete out.origin;
      delete out.referer;
      return out;
    };
    await app.register(httpProxy, {
      upstream: jupyterUrl,
      prefix: '/jupyter',
      rewritePrefix: '/jupyter',
      websocket: true,
      undici: { connections: 64, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: timeout, bodyTimeout: timeout },
      preHandler: async (req, reply) => {
        const access = await checkJupyterAccess(req.method, req.headers, jwtSecret);
        if (!access.ok) return reply.code(access.status).send({ error: access.error, message: access.message });
      },
      replyOptions: {
        rewriteRequestHeaders: (req, headers) => jupyterHeaders(forwardHeaders(req, headers)),
        onError: onUpstreamError,
      },
      // (The typings omit `rewriteRequestHeaders`, which the websocket proxy does call.)
      wsClientOptions: {
        rewriteRequestHeaders: (_headers: IncomingHttpHeaders, req: FastifyRequest) =>
          jupyterHeaders({ cookie: req.headers.cookie, 'x-request-id': req.id }),
      } as Record<string, unknown>,
    });
  } else {
    const notConfigured = async (_req: FastifyRequest, reply: FastifyReply) =>
      reply.code(404).send({ error: 'not_found', message: 'no JupyterLab server is configured: set JUPYTERLAB_URL and start it (`codeagent jupyterlab`, see README)' });
    app.all('/jupyter', notConfigured);
    app.all('/jupyter/*', notConfigured);
  }

  // Never routed, whatever the method (SPEC §5.1, §10).
  app.all('/internal', async (_req, reply) => reply.code(404).send({ error: 'not_found' }));
  app.all('/internal/*', async (_req, reply) => reply.code(404).send({ error: 'not_found' }));

  app.get('/', async (_req, reply) => reply.type('text/html; charset=utf-8').send(landingPage));

  return app;
}
