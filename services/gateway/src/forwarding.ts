import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyRequest, RawServerBase, RouteGenericInterface } from 'fastify';

/**
 * Not passed on: `expect` (answered here), and headers a client could use to pass itself off as
 * someone else to the components (only the gateway speaks for the client).
 */
const DROPPED = new Set([
  'expect',
  'forwarded',
  'x-real-ip',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);

/**
 * `Expect: 100-continue` (curl sends it for every body over 1 MiB). undici refuses to send the
 * header upstream, and the components need no such round trip: the gateway answers it itself,
 * as nginx does. Node would send `100 Continue` at once; the gateway sends it only when it is
 * about to stream the body to a component, so a body that is refused before that (413 on the
 * declared length, 401/403 at /jupyter, 404) is never sent, and Node closes such a connection
 * because the client may still send the body it was not asked for.
 */
export function answerExpectContinue(app: FastifyInstance): (raw: IncomingMessage) => void {
  const waiting = new WeakMap<IncomingMessage, ServerResponse>();
  app.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    waiting.set(req, res);
    app.server.emit('request', req, res);
  });
  return (raw) => {
    const res = waiting.get(raw);
    if (res === undefined) return;
    waiting.delete(raw);
    if (!res.headersSent && !res.writableEnded) res.writeContinue();
  };
}

/** The scheme the client used: its own connection's, or what a trusted proxy reports (docs/contract/spec.md §4.5). */
function originalScheme(req: FastifyRequest<RouteGenericInterface, RawServerBase>): 'http' | 'https' {
  return String(req.protocol).toLowerCase() === 'https' ? 'https' : 'http';
}

/** Hop-by-hop headers (RFC 9110 §7.6.1): about one connection, never passed on; the pool sets `host`. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'upgrade', 'host']);

/** The header names a `Connection` header lists (they are hop-by-hop too). */
export function connectionListed(value: string | string[] | undefined): ReadonlySet<string> | undefined {
  // (The common values name no other header: nothing to split per request.)
  if (value === undefined || value === 'keep-alive' || value === 'close' || value === 'Keep-Alive') return undefined;
  const names = [value]
    .flat()
    .flatMap((v) => v.split(','))
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== '');
  return names.length > 0 ? new Set(names) : undefined;
}

/** What the gateway vouches for about the client of a request. */
export interface ClientFacts {
  id: string;
  ip: string | undefined;
  scheme: 'http' | 'https';
  host: string | undefined;
}

/**
 * The headers a component receives: the client's, without hop-by-hop headers and without those
 * a client could pass itself off with, plus `x-request-id` and the `x-forwarded-*` that the
 * gateway vouches for. One rule for both ways through the gateway (the framework's proxy and
 * the fast path, fast-path.ts).
 */
export function upstreamHeaders(headers: IncomingHttpHeaders, client: ClientFacts): IncomingHttpHeaders {
  const listed = connectionListed(headers.connection);
  const out: IncomingHttpHeaders = {};
  for (const name in headers) if (!DROPPED.has(name) && !HOP_BY_HOP.has(name) && listed?.has(name) !== true) out[name] = headers[name];
  out['x-request-id'] = client.id;
  out['x-forwarded-for'] = client.ip;
  out['x-forwarded-proto'] = client.scheme;
  out['x-forwarded-host'] = client.host;
  return out;
}

/**
 * `upstreamHeaders` for a request Fastify has seen. Fastify's `trustProxy` (TRUSTED_PROXIES)
 * decides whose X-Forwarded-For/-Proto/-Host are believed: only when the immediate peer is a
 * listed proxy; otherwise the peer's own address, the gateway's scheme and the Host header.
 * Components get one client address, never the chain a client may have made up.
 */
export function forwardedHeaders(req: FastifyRequest<RouteGenericInterface, RawServerBase>, headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return upstreamHeaders(headers, { id: req.id, ip: req.ip, scheme: originalScheme(req), host: req.host });
}
