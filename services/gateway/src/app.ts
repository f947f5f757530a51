import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyBaseLogger,
  type FastifyServerOptions,
  type RawServerBase,
  type RouteGenericInterface,
} from 'fastify';
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy';
import {
  WEBDAV_EXTRA_METHODS,
  hasRequestBody,
  lastChunkWhen,
  opsRoutes,
  requestBody,
  requestIdOptions,
  serviceKit,
  type Metrics,
} from '@codeagent/service-kit/http';
import { registerWebApp } from './web-app.js';
import { PAGES } from './landing.js';
import {
  backendSessionChecker,
  checkJupyterAccess,
  checkWorkspaceLabAccess,
  isPageRequest,
  loginRedirect,
  SESSION_COOKIE,
  withoutCookie,
  type SessionChecker,
} from './jupyter-auth.js';
import { labHostWorkspace, labStateKey, registerLabHosts, startLabLogin } from './lab-hosts.js';
import { ROUTES, UPSTREAMS, USER_ID_HEADER, largeAnswer, takesUpgrade, upstreamFailure, workspaceBridgeUrl, type UpstreamName } from './routes.js';
import { underLabsDomain, type LabOrigins } from '@codeagent/config';
import { InMemoryBody, SMALL_BODY_BYTES, UpstreamPool } from './upstream-pool.js';
import { OpenSockets } from './open-sockets.js';
import { answerExpectContinue, forwardedHeaders } from './forwarding.js';
import { answerClientError, applySecurityHeaders, asAppPage, securityHeaders, type SecurityRouteConfig } from './security-headers.js';
import { accessLogLine, fastPath, GatewayResponse, type FastPathControl, type InProcessHandlers } from './fast-path.js';

/** The methods @fastify/http-proxy proxies unless told otherwise (its `defaultHttpMethods`). */
const PROXY_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/** Where each component runs: one address, or several instances (balanced, health-checked). */
export type Addresses = string | readonly string[];

export interface Upstreams {
  backend: Addresses;
  clusterAdmin: Addresses;
  bridge: Addresses;
}

/** The JupyterLab server behind `/jupyter/` (docs/contract/spec.md §10), reached with its own token. */
export interface JupyterUpstream {
  /** Its address(es), e.g. http://127.0.0.1:8095; it must serve under the base URL `/jupyter/`. */
  url: Addresses;
  /** The Jupyter server's token: injected by the gateway, never shown to users. */
  token: string;
  /**
   * `url` is the runtime, which serves each workspace's JupyterLab at `/jupyter/<workspace id>/`
   * (issue 15): members only, viewers read only. Otherwise (JUPYTERLAB_URL set) `url` is the one
   * shared developer server of `codeagent jupyterlab`, for system administrators only.
   */
  perWorkspace?: boolean;
  /** How often open kernel and terminal websockets have their access asked again (SOCKET_RECHECK_MS; shorter in tests). */
  recheckMs?: number;
}

/** Room for multipart framing around a file of MAX_UPLOAD_BYTES (the backend allows as much). */
export const FORM_OVERHEAD_BYTES = 64 * 1024;

export interface GatewayOptions {
  upstreams: Upstreams;
  /**
   * Where JupyterLab runs; without it `/jupyter/*` answers 404. Each request there is checked
   * with the backend (`GET /api/v1/auth/session` on `upstreams.backend`).
   */
  jupyter?: JupyterUpstream;
  /** LAB_ORIGIN: each workspace's JupyterLab on a host of its own (lab-hosts.ts, decision 0263); only with `jupyter.perWorkspace`. */
  labOrigins?: LabOrigins | undefined;
  /** TRUSTED_PROXIES: peers (addresses, CIDRs) whose X-Forwarded-For/-Proto/-Host are believed; default none. */
  trustedProxies?: readonly string[];
  /**
   * MAX_UPLOAD_BYTES: a body declared larger (plus FORM_OVERHEAD_BYTES) gets 413 before a byte of
   * it is read, and with `Expect: 100-continue` before the client sends it. Default: no limit of
   * the gateway's own (the components still enforce theirs).
   */
  maxUploadBytes?: number;
  /** Upstream time limit (headers, and silence between body chunks), default 300 s. */
  timeoutMs?: number;
  /**
   * A client that sends no byte of its request's body for this long is answered 408 and cut off
   * (nginx's `client_body_timeout`, 60 s by default; decision 0222). Default 60 s.
   */
  bodyIdleMs?: number;
  logger?: FastifyServerOptions['logger'];
  /** The component's logger (`createLogger` of service-kit: LOG_FORMAT, redaction); instead of `logger`. */
  loggerInstance?: FastifyBaseLogger;
  /** Called when an instance of a component goes down or comes back (metrics). */
  onUpstreamState?: (upstream: UpstreamName, instance: string, up: boolean) => void;
  /** HTTP metrics of every request, by route (served on GATEWAY_METRICS_PORT, never here). */
  metrics?: Metrics;
  /** One log line per request (method, path, status, time, request id), as nginx's access log. */
  accessLog?: boolean;
  /**
   * The built web app (`web/dist/app`, see web-app.ts): served at `/`, its paths and `/assets/`.
   * Without it, or when it holds no index.html, `/` is the static start page.
   */
  webRoot?: string;
  /**
   * Plain proxied routes skip Fastify's request lifecycle (fast-path.ts, decision 0192); default
   * on. Off, every request goes through the framework's proxies (the tests compare the two).
   */
  fastPath?: boolean;
  /**
   * Components served in the gateway's own process (BACKEND_IN_GATEWAY, decision 0194): the
   * fast path hands their plain proxied requests to these handlers; the pools still reach
   * them over the network for everything else (session checks, the framework's proxies).
   */
  inProcess?: InProcessHandlers;
}

const fastPaths = new WeakMap<FastifyInstance, FastPathControl>();

/** How many requests a gateway took through its fast path (tests). */
export function fastPathTaken(app: FastifyInstance): number {
  return fastPaths.get(app)?.taken ?? 0;
}

/** Error body of a failed upstream: 504 for a time-out, 502 for anything else (down, reset, garbage). */
function onUpstreamError(reply: FastifyReply<RouteGenericInterface, RawServerBase>, { error }: { error: Error }): void {
  const { statusCode, code } = error as Error & { statusCode?: number; code?: string };
  reply.request.log.warn({ code, upstream_error: error.message }, 'upstream failed');
  if (reply.sent) return;
  const failure = upstreamFailure(statusCode === 504);
  void reply.code(failure.status).send(failure.body);
}

/**
 * While a request's body arrives, its connection may be silent for at most `ms` (decision 0222):
 * a client that stops sending (a stalled upload, or one that never meant to send what it
 * declared) is answered 408 and its connection closed, instead of holding the gateway and the
 * component for as long as the component waits. The time is the socket's own (no byte in
 * either direction), set while the body is unread and cleared once it has all arrived, so a
 * long download or a quiet websocket is never cut.
 */
export function limitBodyIdle(req: IncomingMessage, res: ServerResponse, ms: number): void {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return;
  const socket = req.socket;
  socket.setTimeout(ms);
  // (An answer already finished has given the socket Node's keep-alive time: left as it is.)
  req.once('end', () => {
    if (!res.writableFinished) socket.setTimeout(0);
  });
  // Node's HTTP server tells the request first: listened to, it leaves the socket to us.
  // The request itself is destroyed (not only its socket): an answer already finished has taken
  // it off the connection's list, and the upload to the component would otherwise wait for the
  // rest of the body for ever (the component's staged file with it).
  const cutOff = () => req.destroy(new Error(`no byte of the request's body arrived for ${ms} ms`));
  req.once('timeout', () => {
    if (res.headersSent) {
      cutOff();
      return;
    }
    const body = JSON.stringify({
      error: 'request_timeout',
      message: `no byte of the request's body arrived for ${Math.round(ms / 1000)} s; send it again`,
    });
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(body));
    res.setHeader('connection', 'close');
    applySecurityHeaders(res);
    res.writeHead(408);
    res.end(body, cutOff);
  });
}

type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** The answer to an upgrade the gateway does not take, where Node cannot turn it into a plain request. */
function refuseUpgrade(socket: Duplex): void {
  // (Node has taken its own listeners off an upgraded socket: a reset must not become an uncaught error.)
  socket.on('error', () => socket.destroy());
  const body = JSON.stringify({
    error: 'invalid_request',
    message: 'only websockets below /jupyter/ are upgraded: send this request without an Upgrade header (or run the gateway on Node.js 24.9 or newer)',
  });
  socket.end(
    `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `x-content-type-options: nosniff\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * The single ingress (docs/contract/spec.md §10): routes by path prefix and does nothing else. Bodies are
 * streamed both ways, `x-request-id` is passed on (and made when missing), `x-forwarded-*`
 * are set from what the gateway can vouch for (TRUSTED_PROXIES), every answer carries the
 * security headers of docs/contract/spec.md §4.5. `/internal/*` is never routed. No database, no JWT secret:
 * sessions at `/jupyter` are checked by asking the backend.
 */
export async function buildGatewayApp(opts: GatewayOptions): Promise<FastifyInstance> {
  const trusted = opts.trustedProxies ?? [];
  const labs = opts.jupyter?.perWorkspace === true ? opts.labOrigins : undefined;
  const bodyIdleMs = opts.bodyIdleMs ?? 60_000;
  // Set once the routes are known; until then (and when off) every request goes to Fastify.
  let fast: FastPathControl | undefined;
  // The framework's websocket proxies (JupyterLab's), set once they are registered: with none
  // (a gateway without JupyterLab) no request is an upgrade, and `/jupyter` answers its 404.
  let websocketProxies: UpgradeListener[] = [];
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: opts.logger ?? false }),
    ...requestIdOptions(),
    // Believe X-Forwarded-* only from the listed proxies, and only their own entry (docs/contract/spec.md §4.5).
    trustProxy: trusted.length > 0 ? [...trusted] : false,
    // A proxy must not cap bodies: the components enforce their limits while the body streams.
    bodyLimit: Number.MAX_SAFE_INTEGER,
    // Per-request log lines would cost more than the proxying itself; failures are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // The HTTP server is the gateway's own, so that the fast path sees each request first. As
    // Fastify sets up its own: keep-alive from clients longer than undici's idle timeout towards
    // them, and no overall request time limit (an upload may take long; the body has its own).
    serverFactory: (handler) => {
      // (Its responses are GatewayResponse: the answer rules for a component in the process, fast-path.ts.)
      // Only a websocket handshake for a websocket route is an upgrade (`takesUpgrade`); any other
      // `Upgrade` is answered as the plain request it also is (the framework's proxy would hold
      // its connection open forever, unanswered).
      const server = createServer(
        { ServerResponse: GatewayResponse, shouldUpgradeCallback: (req) => websocketProxies.length > 0 && takesUpgrade(req.url ?? '/', req.headers.upgrade) },
        (req, res) => {
          limitBodyIdle(req, res, bodyIdleMs);
          // (A lab's host has rules of its own, lab-hosts.ts: the framework's path. The fast path
          // is on only without trusted proxies, so the Host header is the host the client addressed.)
          if (fast === undefined || underLabsDomain(labs, req.headers.host) || !fast(req, res)) handler(req, res);
        },
      ) as unknown as Server;
      server.keepAliveTimeout = 72_000;
      server.requestTimeout = 0;
      server.setTimeout(0);
      return server;
    },
    // A workspace's JupyterLab reaches the bridge below its own base URL.
    rewriteUrl: (req) => workspaceBridgeUrl(req.url ?? '/'),
    // (Fastify's answer to an unreadable request, with the headers of every other answer.)
    clientErrorHandler: answerClientError,
  });
  // WebDAV's methods, proxied on the routes that ask for them (`webdav` in the route table).
  for (const method of WEBDAV_EXTRA_METHODS) app.addHttpMethod(method, { hasBody: true });
  // (Bodies pass on unread: the components parse and check them.)
  await app.register(serviceKit, { parseJson: false });
  securityHeaders(app);
  // Metrics are recorded here but served on the gateway's internal port: `/metrics` is a 404 here.
  if (opts.metrics) await app.register(opsRoutes, { metrics: opts.metrics, serveRoutes: false });
  if (opts.accessLog) {
    // The request id followed through every component's logs starts here.
    app.addHook('onResponse', (req, reply, done) => {
      req.log.info(accessLogLine(req.method, req.url, reply.statusCode, reply.elapsedTime), 'request');
      done();
    });
  }
  const sendContinue = answerExpectContinue(app);

  const maxUpload = opts.maxUploadBytes;
  if (maxUpload !== undefined) {
    const limit = maxUpload + FORM_OVERHEAD_BYTES;
    app.addHook('onRequest', (req, reply, done) => {
      const length = req.headers['content-length'];
      const declared = length === undefined ? 0 : Number(length);
      if (declared <= limit) return done();
      void reply
        .code(413)
        .send({ error: 'payload_too_large', message: `the request body is ${declared} bytes, more than MAX_UPLOAD_BYTES (${maxUpload} bytes) allows` });
    });
  }

  // The body goes upstream through a stream of its own: when a component answers early (a 413
  // on the declared length) undici destroys the body it was sending, and that must not destroy
  // the client's connection before the answer reaches it (the rest is then read and discarded).
  app.addHook('preParsing', (req, _reply, payload, done) => done(null, hasRequestBody(req.raw) ? requestBody(req.raw) : payload));

  // Routes that answer without looking at a body, whatever its type (no 415 before the 404).
  const refuse = (url: string, answer: (req: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) =>
    app.all(url, { onRequest: answer }, async (_req, reply) => reply);

  const timeout = opts.timeoutMs ?? 300_000;

  // The framework's path (the labs' session-checked routes, and every route behind trusted
  // proxies) passes a body on as the client sends it. A declared small one is read whole here
  // first, as the fast path does: sent slowly, it would otherwise hold a connection of the
  // component's first pool for as long, and a member's 70 slow lab saves held all 64 of the
  // labs' (decision 0258). Larger ones and those of unknown length go over the `bulk` pool.
  app.addHook('preHandler', async (req, reply) => {
    const body = req.body;
    if (!(body instanceof Readable) || body instanceof InMemoryBody) return;
    const size = Number(req.headers['content-length']);
    if (!(size > 0 && size <= SMALL_BODY_BYTES)) return;
    sendContinue(req.raw);
    const timer = setTimeout(() => body.destroy(new Error(`the body did not arrive within ${timeout} ms`)), timeout);
    try {
      req.body = new InMemoryBody(await buffer(body));
    } catch (err) {
      // Cut off (limitBodyIdle answered 408) or gone: nothing is left to answer.
      if (reply.raw.headersSent || req.raw.destroyed) return reply.hijack();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  });
  const forwardHeaders = (req: FastifyRequest<RouteGenericInterface, RawServerBase>, headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    // The body streams from here on: now the client may send it.
    sendContinue(req.raw as IncomingMessage);
    return forwardedHeaders(req, headers);
  };

  // One pool per component with an address: its instances, balanced and health-checked.
  const addresses: Partial<Record<UpstreamName, Addresses>> = { ...opts.upstreams, ...(opts.jupyter ? { jupyter: opts.jupyter.url } : {}) };
  const pools = new Map<UpstreamName, UpstreamPool>();
  for (const [name, urls] of Object.entries(addresses) as [UpstreamName, Addresses][]) {
    const spec = UPSTREAMS[name];
    const healthPath = name === 'jupyter' && opts.jupyter?.perWorkspace !== true ? '/jupyter/api' : spec.healthPath;
    pools.set(
      name,
      new UpstreamPool({
        name,
        urls: [urls].flat(),
        healthPath,
        connections: spec.connections,
        timeoutMs: timeout,
        log: app.log,
        bulkAnswer: largeAnswer,
        ...(opts.onUpstreamState ? { onState: (instance, up) => opts.onUpstreamState!(name, instance, up) } : {}),
      }),
    );
  }
  app.addHook('onClose', async () => void (await Promise.all([...pools.values()].map((p) => p.close()))));

  // /jupyter: each request and upgrade is checked with the backend first (the same backend pool).
  const sessions: SessionChecker = backendSessionChecker(pools.get('backend')!);
  app.addHook('onClose', async () => sessions.close());
  const jupyterToken = opts.jupyter?.token ?? '';
  const perWorkspace = opts.jupyter?.perWorkspace === true;
  const labStates = labStateKey(jupyterToken);
  if (labs !== undefined && perWorkspace) registerLabHosts(app, labs, sessions, labStates);
  // Users never hold the Jupyter token: the gateway replaces their credentials with it, and
  // drops the platform cookie and the Origin it already checked (Jupyter would compare the
  // Origin with its own address and refuse).
  const jupyterHeaders = (headers: IncomingHttpHeaders, userId?: string): IncomingHttpHeaders => {
    const out: IncomingHttpHeaders = { ...headers, authorization: `token ${jupyterToken}` };
    // Who the checked user is, for what the runtime keeps per user (decision 0251); never the client's word.
    delete out[USER_ID_HEADER];
    if (userId !== undefined) out[USER_ID_HEADER] = userId;
    const cookie = withoutCookie(headers.cookie, SESSION_COOKIE);
    if (cookie === undefined) delete out.cookie;
    else out.cookie = cookie;
    delete out.origin;
    delete out.referer;
    return out;
  };
  /** The user a checked request belongs to: one user stays on one Jupyter instance. */
  const checkedUser = new WeakMap<IncomingMessage, string>();
  const labAccess = (method: string, url: string, headers: IncomingHttpHeaders, host: string, requestId: string) =>
    perWorkspace ? checkWorkspaceLabAccess(method, url, headers, host, requestId, sessions) : checkJupyterAccess(method, headers, host, requestId, sessions);
  // Open kernel and terminal websockets lose their connection once their access is refused.
  const openSockets = new OpenSockets((a, requestId) => labAccess(a.method, a.url, a.headers, a.host, requestId), opts.jupyter?.recheckMs);
  app.addHook('onClose', (_instance, done) => {
    openSockets.close();
    done();
  });

  for (const route of ROUTES) {
    if (route.kind === 'deny') {
      // Never routed, whatever the method (docs/contract/spec.md §5.1, §10).
      const notFound = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(404).send({ error: 'not_found' });
      refuse(route.prefix, notFound);
      refuse(`${route.prefix}/*`, notFound);
      continue;
    }
    if (route.kind === 'page') {
      // With the web app, it answers `/` and `/login` itself (web-app.ts); the pages stay for a gateway without it.
      if (opts.webRoot !== undefined) continue;
      const page = PAGES[route.page];
      app.get(route.path, async (_req, reply) => asAppPage(reply, page.csp).type(page.contentType).header('cache-control', 'no-store').send(page.body));
      continue;
    }
    const pool = pools.get(route.upstream);
    if (!pool) {
      // Only JupyterLab may be left out (tests, a gateway without it).
      const notConfigured = async (_req: FastifyRequest, reply: FastifyReply) =>
        reply
          .code(404)
          .send({ error: 'not_found', message: 'no JupyterLab server is configured: set JUPYTERLAB_URL and start it (`codeagent jupyterlab`, see README)' });
      refuse(route.prefix, notConfigured);
      refuse(`${route.prefix}/*`, notConfigured);
      continue;
    }
    const checked = route.sessionCheck === true;
    const config: SecurityRouteConfig = { upstreamCsp: route.upstreamCsp === true };
    const proxyOptions: FastifyHttpProxyOptions & { websocket?: boolean } = {
      // No fixed address: the pool picks an instance per request (and per websocket).
      upstream: '',
      prefix: route.prefix,
      rewritePrefix: route.rewritePrefix ?? route.prefix,
      websocket: route.websocket === true,
      ...(route.webdav ? { httpMethods: [...PROXY_METHODS, ...WEBDAV_EXTRA_METHODS] } : {}),
      config,
      undici: pool,
      ...(checked
        ? {
            // Every HTTP request and every websocket upgrade (both pass through here).
            // eslint-disable-next-line @typescript-eslint/no-misused-promises -- @fastify/reply-from awaits an async preHandler (Fastify hook runner)
            preHandler: async (req: FastifyRequest, reply: FastifyReply) => {
              const access = await labAccess(req.method, req.url, req.headers, req.host, req.id);
              if (!access.ok) {
                // A browser without a valid session goes to the login page and comes back.
                if (perWorkspace && access.status === 401 && isPageRequest(req.method, req.headers)) {
                  // (On a lab's host: through the platform's origin for a ticket, decision 0263.)
                  const hostWs = labHostWorkspace(labs, req.host);
                  if (hostWs !== undefined) return startLabLogin(reply, labs!, labStates, hostWs, req.originalUrl);
                  return reply.code(302).header('cache-control', 'no-store').redirect(loginRedirect(req.url));
                }
                return reply.code(access.status).send({ error: access.error, message: access.message });
              }
              checkedUser.set(req.raw, access.userId);
              // A body that streams on is let through to its last chunk only if the access still
              // holds once it has arrived: a member removed during a slow lab save must not have it
              // written (decision 0261).
              if (req.body instanceof Readable && !(req.body instanceof InMemoryBody)) {
                req.body = lastChunkWhen(req.body, async () => {
                  const again = await labAccess(req.method, req.url, req.headers, req.host, req.id);
                  if (again.ok) return true;
                  if (!reply.sent) void reply.code(again.status).send({ error: again.error, message: again.message });
                  return false;
                });
              }
              // (Real upgrades only: a plain request that names `Upgrade` is answered on its
              // keep-alive connection, which may carry other clients' requests behind a proxy.)
              if ((req.raw as IncomingMessage & { upgrade?: boolean }).upgrade === true)
                openSockets.add(req.raw.socket, { method: req.method, url: req.url, headers: req.headers, host: req.host });
            },
          }
        : {}),
      replyOptions: {
        getUpstream: (req) => pool.upstreamFor(checked ? checkedUser.get(req.raw as IncomingMessage) : undefined),
        rewriteRequestHeaders: checked
          ? (req, headers) => jupyterHeaders(forwardHeaders(req, headers), checkedUser.get(req.raw as IncomingMessage))
          : forwardHeaders,
        onError: onUpstreamError,
        // A component's 503 goes to the client as it is, as from nginx and the fast path
        // (@fastify/reply-from would ask again up to ten times for a GET).
        retryDelay: () => null,
      },
      ...(checked
        ? {
            // (The typings omit `rewriteRequestHeaders`, which the websocket proxy does call.)
            wsClientOptions: {
              // (The checked user named here too: the runtime ends their websockets when they change, decision 0259.)
              rewriteRequestHeaders: (_headers: IncomingHttpHeaders, req: FastifyRequest) =>
                jupyterHeaders({ cookie: req.headers.cookie, 'x-request-id': req.id }, checkedUser.get(req.raw)),
            } as Record<string, unknown>,
          }
        : {}),
    };
    // (`websocket` is a boolean here; the typings want a literal.)
    await app.register(httpProxy, proxyOptions as FastifyHttpProxyOptions & { websocket?: false });
  }

  // Node before 24.9 ignores `shouldUpgradeCallback` (serverFactory) and hands every upgrade to
  // the framework's proxies' listener: there, an upgrade the gateway does not take is refused
  // (400, the connection closed) instead of held open unanswered.
  websocketProxies = app.server.listeners('upgrade') as UpgradeListener[];
  app.server.removeAllListeners('upgrade');
  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (websocketProxies.length > 0 && takesUpgrade(req.url ?? '/', req.headers.upgrade)) {
      for (const listener of websocketProxies) listener.call(app.server, req, socket, head);
    } else refuseUpgrade(socket);
  });

  // `/`, the web app's paths and its assets (web-app.ts); the start page when none is built.
  registerWebApp(app, opts.webRoot);

  // Plain proxied routes, straight from the HTTP server (fast-path.ts). Fastify's `trustProxy`
  // alone decides what trusted proxies are believed, so behind them every request goes through it.
  if (opts.fastPath !== false && trusted.length === 0) {
    const taken = fastPath({
      routes: ROUTES,
      pools,
      ...(maxUpload !== undefined ? { maxBodyBytes: maxUpload + FORM_OVERHEAD_BYTES } : {}),
      log: app.log,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
      accessLog: opts.accessLog === true,
      timeoutMs: timeout,
      sendContinue,
      ...(opts.inProcess ? { inProcess: opts.inProcess } : {}),
    });
    app.addHook('preClose', (done) => {
      taken.close();
      done();
    });
    fast = taken;
  }
  if (fast !== undefined) fastPaths.set(app, fast);

  return app;
}
