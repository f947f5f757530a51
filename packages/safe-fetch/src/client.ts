import dns, { type LookupAddress, type LookupOptions } from 'node:dns';
import type { Agent, buildConnector, Dispatcher, request } from 'undici';
import { isBlockedAddress, literalIp } from './addresses.js';
import { canonicalHost, hostAllowed } from './allowlist.js';
import { OutboundError } from './errors.js';

export type LookupFunction = typeof dns.lookup;

export interface OutboundOptions {
  /** docs/contract/spec.md §8.5 allowlist entries; empty = any public host. */
  allowlist?: readonly string[];
  maxRedirects?: number;
  /** One deadline for the whole redirect chain. */
  timeoutMs?: number;
  maxResponseBytes?: number;
  /** Cut bodies at maxResponseBytes (`truncated: true`); when false, refuse with `response_too_large`. */
  truncate?: boolean;
  /** Tests only: lets 127.0.0.0/8 and ::1 through; every other blocked range stays blocked. */
  allowLoopback?: boolean;
  /** Replaces name resolution (signature of dns.lookup); tests inject answers with it. */
  lookup?: LookupFunction;
}

export type AuthAdapter = { type: 'none' } | { type: 'simple'; username: string } | { type: 'basic'; username: string; password?: string | undefined };

export interface OutboundRequest {
  method?: 'GET' | 'HEAD';
  headers?: Record<string, string>;
  auth?: AuthAdapter;
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  truncated: boolean;
  finalUrl: string;
  redirects: number;
}

export interface OutboundClient {
  fetch(url: string, init?: OutboundRequest): Promise<OutboundResponse>;
  close(): Promise<void>;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * The outbound client of the cluster service (docs/contract/spec.md §8.5): an undici Agent whose connector
 * (1) resolves names through a lookup that refuses any answer in a blocked range, and
 * (2) checks the address the socket actually connected to, so DNS rebinding between a check
 * and the connect cannot slip through. Literal IPs are checked before any connection.
 * Redirects are followed by hand, each hop checked again (scheme, allowlist, address).
 */
export function createOutboundClient(options: OutboundOptions = {}): OutboundClient {
  const allowlist = options.allowlist ?? [];
  const maxRedirects = options.maxRedirects ?? 5;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxResponseBytes ?? 1_048_576;
  const truncate = options.truncate ?? true;
  const allowLoopback = options.allowLoopback ?? false;
  const resolve = options.lookup ?? dns.lookup;

  const checkingLookup = (hostname: string, opts: LookupOptions, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    (resolve as (h: string, o: LookupOptions, cb: (err: NodeJS.ErrnoException | null, a: string | LookupAddress[], f?: number) => void) => void)(
      hostname,
      { ...opts, all: true },
      (err, answer, family) => {
        if (err) return callback(new OutboundError('dns_failed', `cannot resolve ${hostname}: ${err.code ?? err.message}`), '');
        const list: LookupAddress[] = Array.isArray(answer) ? answer : [{ address: answer, family: family ?? 4 }];
        if (list.length === 0) return callback(new OutboundError('dns_failed', `${hostname} has no address`), '');
        // Every answer is checked: one private address in a mixed answer refuses the host.
        const blocked = list.find((a) => isBlockedAddress(a.address, allowLoopback));
        if (blocked) return callback(new OutboundError('address_blocked', `${hostname} resolves to a blocked address`), '');
        if (opts.all) return callback(null, list);
        return callback(null, list[0]!.address, list[0]!.family);
      },
    );
  };

  /**
   * The undici Agent, made on the first request that passed the checks: undici (~9 MB of an
   * idle process) is imported then, not when the service starts (docs/decisions/0085).
   */
  let agent: Promise<{ agent: Agent; request: typeof request }> | undefined;
  const undici = () =>
    (agent ??= import('undici').then((u) => {
      const baseConnect = u.buildConnector({ lookup: checkingLookup, timeout: timeoutMs });
      const connect: buildConnector.connector = (opts, callback) =>
        baseConnect(opts, (err, socket) => {
          if (err || !socket) return callback(err ?? new Error('no socket'), null);
          const peer = socket.remoteAddress;
          if (!peer || isBlockedAddress(peer, allowLoopback)) {
            socket.destroy();
            return callback(new OutboundError('address_blocked', 'the connection reached a blocked address'), null);
          }
          return callback(null, socket);
        });
      return { agent: new u.Agent({ connect, connections: 32 }), request: u.request };
    }));
  let closed = false;

  /** Checks what can be checked before connecting; returns the URL to request. */
  function vet(raw: string | URL, auth: AuthAdapter | undefined): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new OutboundError('invalid_url', `not a URL: ${String(raw).slice(0, 200)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new OutboundError('scheme_not_allowed', `scheme ${url.protocol} is not allowed; use http or https`);
    if (url.username || url.password) throw new OutboundError('invalid_url', 'credentials in the URL are not allowed; use the cluster auth settings');
    if (!url.hostname) throw new OutboundError('invalid_url', 'the URL has no host');
    if (!hostAllowed(url.hostname, allowlist)) throw new OutboundError('host_not_allowed', `host ${canonicalHost(url.hostname)} is not in OUTBOUND_ALLOWLIST`);
    const ip = literalIp(url.hostname);
    if (ip !== undefined && isBlockedAddress(ip, allowLoopback)) throw new OutboundError('address_blocked', `address ${ip} is blocked`);
    url.hash = '';
    if (auth?.type === 'simple') url.searchParams.set('user.name', auth.username);
    return url;
  }

  function mapError(err: unknown): Error {
    if (err instanceof OutboundError) return err;
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof OutboundError) return cause;
    const code = (err as { code?: string }).code;
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new OutboundError('timeout', `no complete answer within ${timeoutMs} ms`);
    }
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new OutboundError('dns_failed', `cannot resolve the host (${code})`);
    return err instanceof Error ? err : new Error(String(err));
  }

  /** Reads the body within the cap; the rest of the chain's deadline bounds the whole read. */
  async function readCapped(body: Dispatcher.ResponseData['body'], declared: number, remainingMs: number): Promise<{ text: string; truncated: boolean }> {
    const timer = setTimeout(() => body.destroy(new OutboundError('timeout', `no complete answer within ${timeoutMs} ms`)), remainingMs);
    try {
      return await readWithin(body, declared);
    } finally {
      clearTimeout(timer);
    }
  }

  async function readWithin(body: Dispatcher.ResponseData['body'], declared: number): Promise<{ text: string; truncated: boolean }> {
    // A declared length within the cap cannot be exceeded (HTTP framing): read it in one go.
    if (Number.isFinite(declared) && declared <= maxBytes) return { text: await body.text(), truncated: false };
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      if (total + buf.length > maxBytes) {
        if (!truncate) {
          body.destroy();
          throw new OutboundError('response_too_large', `the response is larger than ${maxBytes} bytes`);
        }
        chunks.push(buf.subarray(0, maxBytes - total));
        body.destroy();
        return { text: Buffer.concat(chunks).toString('utf8'), truncated: true };
      }
      chunks.push(buf);
      total += buf.length;
    }
    return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
  }

  return {
    async fetch(raw, init = {}) {
      // One deadline for the whole chain: each hop gets what is left of it for its headers,
      // and the body read is cut when it runs out. (Per-request timeouts instead of an
      // AbortSignal: the signal's bookkeeping cost a third of a loopback round trip.)
      const deadline = Date.now() + timeoutMs;
      const left = () => {
        const ms = deadline - Date.now();
        if (ms <= 0) throw new OutboundError('timeout', `no complete answer within ${timeoutMs} ms`);
        return ms;
      };
      let method = init.method ?? 'GET';
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (init.auth?.type === 'basic') {
        // Kept on every hop, also to another host (seed rule, docs/contract/spec.md §8.5).
        headers.authorization = `Basic ${Buffer.from(`${init.auth.username}:${init.auth.password ?? ''}`).toString('base64')}`;
      }
      let url = vet(raw, init.auth);
      if (closed) throw new Error('the outbound client is closed');
      const { agent: dispatcher, request } = await undici();
      for (let redirects = 0; ; redirects++) {
        let res: Dispatcher.ResponseData;
        try {
          const ms = left();
          res = await request(url, { dispatcher, method, headers, headersTimeout: ms, bodyTimeout: ms });
        } catch (err) {
          throw mapError(err);
        }
        const location = res.headers.location;
        if (REDIRECTS.has(res.statusCode) && typeof location === 'string') {
          await res.body.dump().catch(() => undefined);
          if (redirects + 1 > maxRedirects) throw new OutboundError('too_many_redirects', `more than ${maxRedirects} redirects`);
          url = vet(new URL(location, url), init.auth);
          if (res.statusCode === 303) method = 'GET';
          continue;
        }
        let read;
        try {
          read = method === 'HEAD' ? { text: '', truncated: false } : await readCapped(res.body, Number(res.headers['content-length'] ?? NaN), left());
        } catch (err) {
          throw mapError(err);
        }
        const flat: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
        return { status: res.statusCode, headers: flat, body: read.text, truncated: read.truncated, finalUrl: url.toString(), redirects };
      }
    },
    async close() {
      closed = true;
      if (agent) await (await agent).agent.close();
    },
  };
}
