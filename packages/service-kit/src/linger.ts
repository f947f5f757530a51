import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

export interface LingerOptions {
  /** How long the unread rest of a body is read and discarded at most, default 30 s (nginx's lingering_time). */
  lingerMs?: number;
  /** How long to wait for the next chunk of that rest, default 5 s (nginx's lingering_timeout). */
  idleMs?: number;
}

/** Whether the request announced a body (a length above 0, or chunked). */
export function hasRequestBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return raw.headers['transfer-encoding'] !== undefined;
}

/**
 * Answers that come before the request body was read (a 413 on the declared length, a 401, a
 * proxy's early upstream answer) must not close a connection that still has unread bytes in it:
 * the kernel then answers the client's next segment with a reset, and a client still writing its
 * body (undici, Node's http client, the gateway in front of a service) loses the answer and
 * reports EPIPE or ECONNRESET; through the gateway that became a 502 instead of a 413.
 *
 * Like nginx's lingering close: keep the connection, read and discard the rest of the body, and
 * close only once it has ended, or when it goes quiet for `idleMs` or takes longer than
 * `lingerMs` (by then the client has long read the answer). A client that sent
 * `Expect: 100-continue` and got no 100 sends no body: Node closes that connection itself.
 */
export function lingerOnEarlyAnswers(app: FastifyInstance, opts: LingerOptions = {}): void {
  // (A callback hook: it runs on every answer, and most answer at once.)
  app.addHook('onSend', (req, reply, payload, done) => {
    // Fastify closes the connection after a body it refused, and @fastify/reply-from after an
    // early upstream answer: both would reset it. Keep it and discard the rest instead.
    if (lingerAfterAnswer(req.raw, reply.raw, opts) && String(reply.getHeader('connection') ?? '').toLowerCase() === 'close') {
      reply.removeHeader('connection');
    }
    done(null, payload);
  });
}

/**
 * The same for an answer written without Fastify (the gateway's proxy fast path): call it before
 * the answer is sent. True when the body is still coming and its rest will be discarded once the
 * answer is out; the answer must then not close the connection.
 */
export function lingerAfterAnswer(raw: IncomingMessage, res: ServerResponse, opts: LingerOptions = {}): boolean {
  // (Requests injected in tests have no socket to keep or close.)
  if (raw.complete || !hasRequestBody(raw) || !(raw.socket instanceof Socket)) return false;
  const waiting = res as ServerResponse & { _expect_continue?: boolean; _sent100?: boolean };
  if (waiting._expect_continue === true && waiting._sent100 !== true) return false; // no body is coming
  res.once('finish', () => discardRest(raw, opts.lingerMs ?? 30_000, opts.idleMs ?? 5_000));
  return true;
}

function discardRest(raw: IncomingMessage, lingerMs: number, idleMs: number): void {
  if (raw.complete || raw.destroyed) return;
  const socket = raw.socket;
  // Node discards a body nobody read without emitting it, so progress shows only in the
  // socket's byte count.
  let seen = socket.bytesRead;
  const idle = setInterval(() => {
    if (socket.bytesRead === seen) giveUp();
    seen = socket.bytesRead;
  }, idleMs);
  const overall = setTimeout(giveUp, lingerMs);
  function giveUp() {
    cleanup();
    socket.destroy();
  }
  function cleanup() {
    clearInterval(idle);
    clearTimeout(overall);
    raw.off('end', cleanup);
    socket.off('close', cleanup);
  }
  raw.once('end', cleanup);
  socket.once('close', cleanup);
  // The answer is out: nobody reads this body any more (a parser that gave up, a proxy whose
  // upstream answered early), so let it flow into nothing.
  raw.unpipe();
  raw.resume();
}
