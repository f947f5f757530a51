import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * What a response that is not one of the app's pages may do when a browser opens it as a
 * document: nothing (no script, style, frame, form; a unique origin). API answers are data, so
 * this costs them nothing, and a component that forgets to protect user content (an object
 * served with the uploader's `text/html`) still cannot run script in the platform's origin.
 */
export const DATA_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox";

/** Referrers stay inside the platform: paths name workspaces and files. */
export const REFERRER_POLICY = 'same-origin';

/**
 * The CSP of the app's own pages (the start page, later the web UI): scripts and styles from the
 * platform's origin only, never inline (styles may be pinned by hash), and framed only by itself.
 */
export function pageCsp(styleHashes: readonly string[] = []): string {
  const styles = ["'self'", ...styleHashes.map((h) => `'${h}'`)].join(' ');
  return [
    "default-src 'self'",
    "script-src 'self'",
    `style-src ${styles}`,
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'self'",
  ].join('; ');
}

/** The CSP source of an inline `<style>` element's exact text. */
export function styleHash(css: string): string {
  return `sha256-${createHash('sha256').update(css, 'utf8').digest('base64')}`;
}

/** Marks one of the app's pages: the page CSP instead of the data CSP, framed by the platform only. */
export function asAppPage(reply: FastifyReply, csp: string): FastifyReply {
  return reply.header('content-security-policy', csp).header('x-frame-options', 'SAMEORIGIN');
}

/** Route option `config.upstreamCsp: true`: the upstream's pages (JupyterLab) bring their own CSP; add none. */
export interface SecurityRouteConfig {
  upstreamCsp?: boolean;
}

/**
 * docs/contract/spec.md §4.5 on every answer of the gateway, proxied or its own, errors included:
 * `X-Content-Type-Options: nosniff` always; a `Referrer-Policy` unless the component chose one;
 * and the data CSP on anything that carries no CSP of its own. A stricter header a component
 * sets (the backend's `sandbox` on downloads) is never replaced.
 */
export function securityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', (req, reply, payload, done) => {
    const config = req.routeOptions.config as SecurityRouteConfig | undefined;
    applySecurityHeaders({ hasHeader: (name) => reply.hasHeader(name), setHeader: (name, value) => reply.header(name, value) }, config?.upstreamCsp === true);
    done(null, payload);
  });
}

/** Where the headers of an answer are set: a Fastify reply or Node's response (the fast path). */
export interface HeaderTarget {
  hasHeader(name: string): boolean;
  setHeader(name: string, value: string): unknown;
}

/** The rule of `securityHeaders` for one answer, whoever writes it. */
export function applySecurityHeaders(answer: HeaderTarget, upstreamCsp = false): void {
  answer.setHeader('x-content-type-options', 'nosniff');
  if (!answer.hasHeader('referrer-policy')) answer.setHeader('referrer-policy', REFERRER_POLICY);
  if (!upstreamCsp && !answer.hasHeader('content-security-policy')) answer.setHeader('content-security-policy', DATA_CSP);
}

/**
 * Node's answer to a request it could not read (a head too large: 431; a malformed one: 400; too
 * slow: 408), as Fastify writes it, with the headers of every other answer: it may come back at a
 * lab's own origin (decision 0263), where a lab page's script that sent a browser there could read
 * the address from an answer without the data CSP (a hostile review did: a ticket in it).
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const message = status === 408 ? 'Client Timeout' : status === 431 ? 'Exceeded maximum allowed HTTP header size' : 'Client Error';
  const body = JSON.stringify({ error: STATUS_CODES[status], message, statusCode: status });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n` +
        `Content-Security-Policy: ${DATA_CSP}\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
