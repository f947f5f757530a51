import { ServerResponse, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import {
  WEBDAV_EXTRA_METHODS,
  ambiguousPathReason,
  hasRequestBody,
  lingerAfterAnswer,
  redactUrl,
  requestBody,
  requestIdOf,
  type Metrics,
} from '@codeagent/service-kit/http';
import { connectionListed, upstreamHeaders } from './forwarding.js';
import { underPrefix, upstreamFailure, workspaceBridgeUrl, type ProxyRoute, type Route, type UpstreamName } from './routes.js';
import { applySecurityHeaders, type HeaderTarget } from './security-headers.js';
import { SMALL_BODY_BYTES, type UpstreamHandler, type UpstreamPool } from './upstream-pool.js';

/**
 * The gateway's fast path (docs/decisions/0192-gateway-fast-path.md): a request to a plain proxied
 * route (the backend's API, the cluster service, the bridge: no session check, no websocket) is
 * proxied straight from Node's HTTP server to the component's pool, without Fastify's request
 * lifecycle around it. It keeps every rule the framework's proxy keeps (app.ts): the route
 * table's most specific prefix, the request id, the path guard, `x-forwarded-*` from what the
 * gateway vouches for, no hop-by-hop headers either way, `Expect: 100-continue` answered when
 * the body is about to stream, early answers that keep the connection (lingering), 502/504 with
 * the ingress's own messages, the security headers of docs/contract/spec.md §4.5, the HTTP
 * metrics and the access log line. Anything it does not take on returns false and goes through
 * Fastify: every other route, a path the guard refuses (400), a body over MAX_UPLOAD_BYTES
 * (413), a GET with a body, a gateway behind trusted proxies (Fastify's `trustProxy` decides
 * what they are believed), and every request once the gateway is closing (503).
 */
export interface FastPathOptions {
  routes: readonly Route[];
  pools: ReadonlyMap<UpstreamName, UpstreamPool>;
  /** The largest declared body taken on (MAX_UPLOAD_BYTES plus the form overhead); more goes to Fastify's 413. */
  maxBodyBytes?: number;
  log: FastifyBaseLogger;
  metrics?: Metrics;
  accessLog: boolean;
  /** The upstream time limit; a small body being read first gets as long. */
  timeoutMs: number;
  /** Sends `100 Continue` to a client waiting for it (forwarding.ts). */
  sendContinue: (raw: IncomingMessage) => void;
  /**
   * Components served in the gateway's own process (BACKEND_IN_GATEWAY, decision 0194): their
   * requests are handed to this handler instead of going through the pool.
   */
  inProcess?: InProcessHandlers;
}

/** A component's request handler in the gateway's process (a Fastify app's `routing`). */
export type InProcessHandler = (req: IncomingMessage, res: ServerResponse) => void;
export type InProcessHandlers = Partial<Record<UpstreamName, InProcessHandler>>;

/** Takes the request on (true) or leaves it to Fastify (false, nothing written). */
export type FastPath = (req: IncomingMessage, res: ServerResponse) => boolean;

/** The access log's line of one request (as nginx's): method, path (secrets redacted), status, time. */
export function accessLogLine(method: string, url: string, status: number, ms: number): { method: string; url: string; status: number; ms: number } {
  return { method, url: redactUrl(url), status, ms: Math.round(ms * 10) / 10 };
}

/** The fast path with its controls: stop taking requests (the gateway is closing), and how many it took (tests). */
export type FastPathControl = FastPath & { close(): void; readonly taken: number };

/** Log levels at which the access log's lines (info) are written. */
const WRITES_INFO = new Set(['trace', 'debug', 'info']);
/** The status logged for a request whose client went away before any answer (nginx's). */
const CLIENT_CLOSED = 499;
const PROXY_METHODS = new Set(['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']);
const DAV_METHODS = new Set([...PROXY_METHODS, ...WEBDAV_EXTRA_METHODS]);
/** Hop-by-hop headers of an answer (RFC 9110 §7.6.1); Node writes its own. */
const ANSWER_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** Whether an answer's header (lower-case name) stays on this hop: hop-by-hop, or named by its `Connection` header. */
const hopByHop = (name: string, listed: ReadonlySet<string> | undefined): boolean => ANSWER_HOP_BY_HOP.has(name) || listed?.has(name) === true;

interface Entry {
  prefix: string;
  /** Undefined when the route is not taken on here (denied, checked, not configured). */
  fast?: { route: ProxyRoute; pool: UpstreamPool; methods: ReadonlySet<string>; rewrite: string | undefined; local: InProcessHandler | undefined };
}

/** Builds the fast path from the same route table and pools as the framework's proxies. */
export function fastPath(opts: FastPathOptions): FastPathControl {
  // Every prefix route, most specific first: the longest matching prefix decides, as in find-my-way and nginx.
  const entries: Entry[] = [];
  for (const route of opts.routes) {
    if (route.kind === 'page') continue;
    const pool = route.kind === 'proxy' ? opts.pools.get(route.upstream) : undefined;
    const plain = route.kind === 'proxy' && route.sessionCheck !== true && pool !== undefined;
    const rewrite = route.kind === 'proxy' && route.rewritePrefix !== undefined && route.rewritePrefix !== route.prefix ? route.rewritePrefix : undefined;
    entries.push({
      prefix: route.prefix,
      ...(plain
        ? {
            fast: {
              route,
              pool,
              methods: route.webdav === true ? DAV_METHODS : PROXY_METHODS,
              rewrite,
              // (In the process only where the path stays as it is: the backend's routes.)
              local: rewrite === undefined ? opts.inProcess?.[route.upstream] : undefined,
            },
          }
        : {}),
    });
  }
  entries.sort((a, b) => b.prefix.length - a.prefix.length);
  let closing = false;
  let taken = 0;

  const take = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (closing) return false;
    const url = workspaceBridgeUrl(req.url ?? '/');
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    let entry: Entry | undefined;
    for (const e of entries) {
      if (underPrefix(path, e.prefix)) {
        entry = e;
        break;
      }
    }
    const fast = entry?.fast;
    const method = req.method ?? 'GET';
    if (fast === undefined || !fast.methods.has(method)) return false;
    if (ambiguousPathReason(url) !== undefined) return false;
    const withBody = hasRequestBody(req);
    if (withBody && (method === 'GET' || method === 'HEAD')) return false;
    if (opts.maxBodyBytes !== undefined && Number(req.headers['content-length'] ?? 0) > opts.maxBodyBytes) return false;

    taken++;
    const started = performance.now();
    const id = requestIdOf(req);
    const prefix = fast.route.prefix;
    const metricsRoute = path.length === prefix.length ? prefix : path.length === prefix.length + 1 ? `${prefix}/` : `${prefix}/*`;
    const upstreamPath = fast.rewrite === undefined ? url : fast.rewrite + url.slice(prefix.length);
    const headers = upstreamHeaders(req.headers, {
      id,
      ip: req.socket.remoteAddress,
      scheme: 'encrypted' in req.socket && req.socket.encrypted === true ? 'https' : 'http',
      host: req.headers.host,
    });
    if (withBody) {
      // The body is read from here on: now the client may send it.
      opts.sendContinue(req);
    }
    // (The access log line is built only when it is written: LOG_LEVEL=warn writes none.)
    const accessLog = opts.accessLog && WRITES_INFO.has(opts.log.level);
    if (opts.metrics !== undefined || accessLog) {
      res.once('close', () => {
        const ms = performance.now() - started;
        // A client gone before any answer is nginx's 499, not the 200 Node's response starts with.
        const status = res.headersSent ? res.statusCode : CLIENT_CLOSED;
        opts.metrics?.recordRequest(metricsRoute, method, status, ms / 1000);
        if (accessLog) opts.log.info({ reqId: id, ...accessLogLine(method, req.url ?? '/', status, ms) }, 'request');
      });
    }

    if (fast.local !== undefined && res instanceof GatewayResponse) {
      handOver(req, res, fast.local, upstreamPath, headers, id);
      return true;
    }
    const send = (body: Readable | Buffer | undefined): void =>
      fast.pool.dispatch(
        { method, path: upstreamPath, headers, body },
        relay(req, res, id, opts.log, fast.rewrite === undefined ? undefined : [fast.rewrite, prefix]),
      );
    const declared = req.headers['content-length'];
    if (!withBody) send(undefined);
    else if (declared === undefined || Number(declared) <= SMALL_BODY_BYTES) {
      // A small body is read first, so that a request whose instance is gone can go to another
      // one (upstream-pool.ts sends only bodies in memory twice). A client that stops sending
      // it gets no answer, as from the component. A body of unknown length (chunked) is read so
      // far too: sent on at once, a trickle of one byte a minute held a connection of the
      // component's pool (128) for as long, and a few clients, even logged out, held them all.
      const chunks: Buffer[] = [];
      let size = 0;
      // A client that stops sending is cut off after the gateway's time limit, as the component would do.
      const timer = setTimeout(() => req.destroy(), opts.timeoutMs);
      const onData = (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        if (size <= SMALL_BODY_BYTES) return;
        // Larger than that (only a chunked body gets here): what was read, then the rest as it comes.
        clearTimeout(timer);
        req.off('data', onData);
        req.off('end', onEnd);
        req.pause();
        const rest = requestBody(req);
        send(
          Readable.from(
            (async function* () {
              yield* chunks;
              yield* rest as AsyncIterable<Buffer>;
            })(),
            { objectMode: false },
          ),
        );
      };
      const onEnd = () => {
        clearTimeout(timer);
        send(Buffer.concat(chunks));
      };
      req.on('data', onData);
      req.once('error', () => clearTimeout(timer));
      req.once('close', () => clearTimeout(timer));
      req.once('end', onEnd);
    } else send(requestBody(req));
    return true;
  };
  return Object.defineProperties(take, {
    close: {
      value: () => {
        closing = true;
      },
    },
    taken: { get: () => taken },
  }) as FastPathControl;
}

/**
 * Hands a request to a component served in this process (decision 0194): the component gets the
 * request it would get over the network (the path, the headers `upstreamHeaders` gives it) plus
 * what belongs to this hop (the client's Host, the body's framing: its parser reads the same
 * stream), and writes its answer to the client's connection itself, under the rules the relay
 * applies to a head from the network: no hop-by-hop headers, docs/contract/spec.md §4.5 and the
 * request id, the rest of an unread body discarded without closing the connection.
 */
function handOver(req: IncomingMessage, res: GatewayResponse, handle: InProcessHandler, path: string, headers: IncomingHttpHeaders, id: string): void {
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = req.headers['transfer-encoding'];
  if (req.headers.host !== undefined) headers.host = req.headers.host;
  req.url = path;
  req.headers = headers;
  res.handedOverId = id;
  handle(req, res);
}

/**
 * The responses of the gateway's HTTP server (`ServerResponse` option of `createServer`): when
 * its request was handed to a component in the process (`handedOverId` set by `handOver`), the
 * component's head meets the relay's answer rules on its way out. A subclass rather than a
 * `writeHead` patched onto each response: every response keeps one shape, which Node's own code
 * is optimised for.
 */
export class GatewayResponse extends ServerResponse {
  /** The request id of a request handed over in the process; undefined otherwise. */
  handedOverId: string | undefined = undefined;

  // (Node's own implicit head, on a first write without one, comes through here too.)
  override writeHead(status: number, ...rest: unknown[]): this {
    const id = this.handedOverId;
    const message = typeof rest[0] === 'string' ? rest[0] : undefined;
    const given = message === undefined ? rest[0] : rest[1];
    if (id === undefined) return super.writeHead(status, message, given as OutgoingHttpHeaders | undefined);
    lingerAfterAnswer(this.req, this);
    if (isHeaderObject(given) && this.getHeaderNames().length === 0) {
      // Fastify's way (every header in one object, none set before): one new object, no setHeader per header.
      const head: OutgoingHttpHeaders = {};
      for (const name in given) if (given[name] !== undefined) head[name.toLowerCase()] = given[name];
      const listed = connectionListed(head.connection);
      for (const name in head) if (hopByHop(name, listed)) delete head[name];
      securityHeaders({ hasHeader: (name) => head[name] !== undefined, setHeader: (name, value) => (head[name] = value) }, id);
      return super.writeHead(status, message, head);
    }
    mergeHead(this, given);
    const listed = connectionListed(this.getHeader('connection') as string | string[] | undefined);
    for (const name of this.getHeaderNames()) if (hopByHop(name, listed)) this.removeHeader(name);
    securityHeaders(this, id);
    return super.writeHead(status, message);
  }
}

const isHeaderObject = (given: unknown): given is OutgoingHttpHeaders => typeof given === 'object' && given !== null && !Array.isArray(given);

/** The headers given to `writeHead` (an object, name/value pairs, or a list of pairs), merged over those set before, as Node merges them. */
function mergeHead(res: ServerResponse, given: unknown): void {
  if (given === undefined || given === null) return;
  if (Array.isArray(given)) {
    const pairs = (given.length > 0 && Array.isArray(given[0]) ? (given as unknown[][]).flat() : given) as (string | number | string[])[];
    for (let i = 0; i < pairs.length; i += 2) res.removeHeader(String(pairs[i]));
    for (let i = 0; i < pairs.length; i += 2) res.appendHeader(String(pairs[i]), pairs[i + 1] as string | string[]);
    return;
  }
  for (const [name, value] of Object.entries(given as OutgoingHttpHeaders)) if (value !== undefined) res.setHeader(name, value);
}

/**
 * Relays the component's answer to the client as undici reports it: the head without hop-by-hop
 * headers and with the ingress's own (§4.5), then each chunk as it comes, pausing the component's
 * connection while the client's is full. A client that goes away aborts the request upstream.
 */
function relay(
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  log: FastifyBaseLogger,
  rewrite: [from: string, to: string] | undefined,
): UpstreamHandler {
  let abort: ((err?: Error) => void) | undefined;
  /** The client went away, or the answer was replaced by the ingress's failure answer: nothing more goes to the client. */
  let over = false;
  res.once('close', () => {
    if (res.writableFinished || over) return;
    over = true;
    abort?.(new Error('the client went away'));
  });
  return {
    onConnect(abortRequest) {
      abort = abortRequest;
      if (over) abortRequest(new Error('the client went away'));
    },
    onHeaders(statusCode, rawHeaders, resume) {
      if (over) return false;
      try {
        res.writeHead(statusCode, answerHead(rawHeaders, id, rewrite));
      } catch (e) {
        // A head Node cannot send (an invalid status): the ingress's 502 instead, as before any answer.
        answerFailure(req, res, id, e as Error, log);
        over = true;
        abort?.(e as Error);
        return false;
      }
      lingerAfterAnswer(req, res);
      res.on('drain', resume);
      return true;
    },
    onData(chunk) {
      return over || res.write(chunk);
    },
    onComplete() {
      if (!over) res.end();
    },
    onError(err, answered) {
      if (over) return;
      if (!answered) return answerFailure(req, res, id, err, log);
      log.warn({ reqId: id, upstream_error: err.message }, 'upstream answer broke off');
      res.destroy(err);
    },
  };
}

/** Header names and values Node sends (its own checks: an HTTP token; no control characters but tab). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * The head of the answer as name/value pairs for `writeHead`: the component's headers without
 * hop-by-hop ones (and without any Node would refuse to send, as the framework's proxy does),
 * `Location` rewritten for a rewritten prefix, plus docs/contract/spec.md §4.5 and the request id
 * unless the component gave it.
 */
function answerHead(raw: readonly Buffer[], id: string, rewrite: [from: string, to: string] | undefined): string[] {
  const all: string[] = [];
  let connection: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1').toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    if (name === 'connection') (connection ??= []).push(value);
    all.push(name, value);
  }
  const listed = connectionListed(connection?.length === 1 ? connection[0] : connection);
  const pairs: string[] = [];
  for (let i = 0; i < all.length; i += 2) {
    const name = all[i]!;
    const value = all[i + 1]!;
    if (hopByHop(name, listed) || !HEADER_NAME.test(name) || INVALID_VALUE.test(value)) continue;
    pairs.push(name, name === 'location' && rewrite !== undefined ? value.replace(rewrite[0], rewrite[1]) : value);
  }
  securityHeaders(headerPairs(pairs), id);
  return pairs;
}

/** `applySecurityHeaders`' view of a list of name/value pairs (lower-case names). */
function headerPairs(pairs: string[]): HeaderTarget {
  const at = (name: string) => {
    for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === name) return i;
    return -1;
  };
  return {
    hasHeader: (name) => at(name) !== -1,
    setHeader(name, value) {
      for (let i = at(name); i !== -1; i = at(name)) pairs.splice(i, 2);
      pairs.push(name, value);
    },
  };
}

/** docs/contract/spec.md §4.5 (security-headers.ts), and the request id unless the component gave it. */
function securityHeaders(answer: HeaderTarget, id: string): void {
  applySecurityHeaders(answer);
  if (!answer.hasHeader('x-request-id')) answer.setHeader('x-request-id', id);
}

/** The ingress's failure answer (routes.ts `upstreamFailure`), as app.ts's onUpstreamError gives it. */
function answerFailure(req: IncomingMessage, res: ServerResponse, id: string, err: Error, log: FastifyBaseLogger): void {
  const code = String((err as NodeJS.ErrnoException).code ?? '');
  log.warn({ reqId: id, code, upstream_error: err.message }, 'upstream failed');
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const failure = upstreamFailure(code === 'UND_ERR_HEADERS_TIMEOUT' || err.name === 'TimeoutError');
  const payload = JSON.stringify(failure.body);
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(payload));
  securityHeaders(res, id);
  lingerAfterAnswer(req, res);
  res.writeHead(failure.status);
  res.end(payload);
}
