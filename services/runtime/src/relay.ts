/**
 * Relaying to a Jupyter server on its Unix socket with the server's own token: the runtime's
 * per-workspace servers (lab-proxy.ts) and `codeagent jupyterlab`'s one server use it alike.
 * Node's own modules, the token comparison and the sandbox's safe connect only
 * (`@codeagent/runtime/relay`): the CLI's JupyterLab process loads this, not the runtime.
 */
import { request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { INTERNAL_TOKEN_HEADER, safeEqual } from '@codeagent/auth';
import { connectInside } from '@codeagent/sandbox/inside';

/** Headers for a server on its Unix socket: its own token instead of the caller's, host `localhost`. */
function innerHeaders(headers: IncomingHttpHeaders, token: string): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = { ...headers, authorization: `token ${token}`, host: 'localhost' };
  delete out[INTERNAL_TOKEN_HEADER];
  return out;
}

/** Whether a request carries `Authorization: token <token>` (compared in constant time; an empty token admits nobody). */
export function carriesToken(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? '';
  return token !== '' && header.startsWith('token ') && safeEqual(header.slice(6).trim(), token);
}

/** A Jupyter server listening on a Unix socket, and the token it asks for. */
export interface SocketServer {
  path: string;
  token: string;
}

/** The most of a server's answer that is held for a check (`AnswerCheck`): beyond it, 502. */
export const CHECKED_ANSWER_MAX = 4 * 1024 * 1024;

/**
 * What to answer instead of a successful answer of the server, decided once its whole body is
 * here (a save the server made but the platform did not store); undefined keeps the answer.
 */
export type AnswerCheck = (status: number, body: Buffer) => Promise<{ status: number; body: Record<string, unknown> } | undefined>;

/**
 * An HTTP request relayed to a Jupyter server on its Unix socket with the server's own token
 * (the caller checked the caller's); `failed` answers when the server does not. With `check`,
 * a successful answer is held (it is small: a contents model, the lab's settings; at most
 * `CHECKED_ANSWER_MAX`) until the check has decided;
 * `answerHeaders` may change the head of the server's answer before the client gets it.
 */
export function relayRequest(
  req: IncomingMessage,
  res: ServerResponse,
  server: SocketServer,
  failed: (err: Error) => void,
  check?: AnswerCheck,
  answerHeaders: (headers: IncomingHttpHeaders) => IncomingHttpHeaders = (h) => h,
  /** What is sent as the body (the request itself, or a stream made of it); failing, it fails the request. */
  body: Readable = req,
): void {
  /** A checked answer grew too large and was answered 502: what the server does next no longer matters. */
  let over = false;
  const upstream = request(
    { createConnection: () => connectInside(server.path), method: req.method, path: req.url, headers: innerHeaders(req.headers, server.token) },
    (up) => {
      const status = up.statusCode ?? 502;
      // Node's parser takes any three digits; `writeHead` throws on a final status outside 200–599.
      if (status < 200 || status > 599) {
        over = true;
        up.destroy();
        failed(new Error(`the server answered status ${status}`));
        return;
      }
      // A checked answer is not passed on unchecked at another URL the browser would follow.
      if (check !== undefined && status >= 300 && status < 400) {
        over = true;
        up.destroy();
        failed(new Error(`the server answered ${status} (a redirect) where its answer is checked`));
        return;
      }
      if (check === undefined || status >= 300) {
        res.writeHead(status, answerHeaders(up.headers));
        // An answer the server cuts short ends the client's too (else it waits for the rest).
        up.on('error', () => res.destroy());
        up.on('close', () => {
          if (!up.complete) res.destroy();
        });
        up.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      let held = 0;
      up.on('data', (chunk: Buffer) => {
        if (over) return;
        held += chunk.length;
        chunks.push(chunk);
        // A checked answer is a contents model or the lab's settings: a server that sends more is not well.
        if (held > CHECKED_ANSWER_MAX) {
          over = true;
          up.destroy();
          if (!res.headersSent) failed(new Error(`the answer to check exceeded ${CHECKED_ANSWER_MAX} bytes`));
        }
      });
      up.on('error', () => {
        if (!over) res.destroy();
      });
      up.on('end', () => {
        const body = Buffer.concat(chunks);
        const original = () => res.writeHead(status, answerHeaders(up.headers)).end(body);
        const replace = (instead: { status: number; body: Record<string, unknown> }) => {
          let text: string;
          try {
            text = JSON.stringify(instead.body);
          } catch (err) {
            failed(err as Error);
            return;
          }
          res.writeHead(instead.status, answerHeaders({ 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' })).end(text);
        };
        check(status, body)
          .then((instead) => (instead === undefined ? original() : replace(instead)), original)
          .catch(() => res.destroy());
      });
    },
  );
  upstream.on('error', (err) => {
    if (over) return;
    if (!res.headersSent) failed(err);
    else res.destroy();
  });
  // A client that leaves ends the request to the server: a held answer is not kept for no one.
  res.on('close', () => {
    if (!res.writableFinished) {
      over = true;
      upstream.destroy();
    }
  });
  body.once('error', (err) => upstream.destroy(err));
  body.pipe(upstream);
}

/** A websocket upgrade relayed the same way: the request's head written again, then bytes both ways. */
export function relayUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, server: SocketServer): void {
  const up = connectInside(server.path);
  up.on('error', () => socket.destroy());
  socket.on('error', () => up.destroy());
  socket.on('close', () => up.destroy());
  up.once('connect', () => {
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (const [k, v] of Object.entries(innerHeaders(req.headers, server.token))) {
      if (v === undefined) continue;
      for (const value of Array.isArray(v) ? v : [v]) lines.push(`${k}: ${value}`);
    }
    up.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) up.write(head);
    socket.pipe(up);
    // The server's answer head, rebuilt from what a handshake needs: a browser keeps the cookies
    // of a handshake too (a cookie for `/` would be the platform's), and lines that end in a bare
    // LF would hide one inside the status line. Then the bytes as they come.
    let answer = Buffer.alloc(0);
    const early = () => socket.destroy();
    up.once('close', early);
    const onHead = (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
      const end = answer.indexOf('\r\n\r\n');
      if (end === -1) {
        if (answer.length > ANSWER_HEAD_MAX) up.destroy();
        return;
      }
      up.off('data', onHead);
      up.off('close', early);
      const answerHead = handshakeHead(answer.subarray(0, end).toString('latin1'));
      if (answerHead.switched === false) {
        up.destroy();
        socket.end(answerHead.head);
        return;
      }
      socket.write(answerHead.head);
      if (answer.length > end + 4) socket.write(answer.subarray(end + 4));
      up.pipe(socket);
    };
    up.on('data', onHead);
  });
}

/** The headers of a server's handshake answer a browser gets (RFC 6455 §4.2.2). */
const HANDSHAKE_HEADERS = new Set(['upgrade', 'connection', 'sec-websocket-accept', 'sec-websocket-protocol', 'sec-websocket-extensions']);

/**
 * A server's handshake answer head as the browser gets it: the status line and the handshake's
 * own headers, every line ended by CRLF. A refusal keeps its status only (and the connection
 * ends); a head that is not a plain HTTP/1.1 head (a bare CR or LF) is 502.
 */
function handshakeHead(head: string): { switched: boolean; head: string } {
  const lines = head.split('\r\n');
  const status = /^HTTP\/1\.1 ([1-5][0-9][0-9])(?: |$)/.exec(lines[0]!)?.[1];
  const refusal = (code: string) => ({
    switched: false,
    head: `HTTP/1.1 ${code} ${code === '502' ? 'Bad Gateway' : 'Refused'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
  });
  if (status === undefined || (status.startsWith('1') && status !== '101') || lines.some((line) => /[\r\n]/.test(line))) return refusal('502');
  if (status !== '101') return refusal(status);
  const kept = [lines[0]!];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && HANDSHAKE_HEADERS.has(line.slice(0, colon).trim().toLowerCase())) kept.push(line);
  }
  return { switched: true, head: `${kept.join('\r\n')}\r\n\r\n` };
}

/** The most of an upgrade answer's head that is read before it ends (Node's own limit for heads: 16 KiB). */
const ANSWER_HEAD_MAX = 64 * 1024;
