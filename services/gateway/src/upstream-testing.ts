import { createHash } from 'node:crypto';
import { request, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * Test helpers for the servers that stand behind an ingress in tests (a Jupyter server, a
 * backend's session route, replicas) and the websocket handshakes sent through it. One copy for
 * the gateway's tests and the backend's test through the gateway
 * (`@codeagent/gateway/upstream-testing`).
 */

/** Listens on 127.0.0.1 (any free port unless one is given); resolves with the base URL. */
export function listenOn(server: Server, port = 0): Promise<string> {
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

/** Closes the server and every connection it still holds. */
export async function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

/**
 * Completes a websocket handshake on an upgraded socket (RFC 6455 accept key); the socket is
 * added to `open` so that the test can destroy it at the end.
 */
export function acceptWebsocket(req: IncomingMessage, socket: Duplex, open?: Set<Duplex>): void {
  open?.add(socket);
  const accept = createHash('sha1')
    .update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
    .digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
}

/** The request of a websocket handshake (path and query) at `base`, sent; `timeoutMs` bounds the wait for its answer. */
function handshake(base: string, path: string, headers: Record<string, string>, timeoutMs?: number): ClientRequest {
  const url = new URL(path, base);
  const req = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname + url.search,
    agent: false, // a refused handshake closes its socket: never reuse one
    ...(timeoutMs !== undefined ? { timeout: timeoutMs } : {}),
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
  });
  req.on('timeout', () => req.destroy(new Error('no answer to the websocket handshake')));
  req.end();
  return req;
}

/** Opens a websocket handshake (path and query) at `base`; resolves with 101 or the refusal's status. */
export function upgrade(base: string, path: string, headers: Record<string, string>, timeoutMs?: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = handshake(base, path, headers, timeoutMs);
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve(101);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

/**
 * A websocket opened and kept: `closed` settles when the other side ends it, by closing the
 * connection or by sending a close frame (a proxy that closes cleanly waits for the client's
 * answering close frame, which a browser sends at once and this client never does).
 */
export interface OpenSocket {
  closed: Promise<void>;
  isOpen(): boolean;
  end(): void;
}

/** Opens a websocket at `base` and keeps it (what it receives is read and dropped); refused: rejects. */
export function openSocket(base: string, path: string, headers: Record<string, string>): Promise<OpenSocket> {
  return new Promise((resolve, reject) => {
    const req = handshake(base, path, headers);
    req.on('upgrade', (_res, socket, head) => {
      let open = true;
      socket.on('error', () => undefined);
      const closed = new Promise<void>((r) => {
        const ended = () => {
          open = false;
          r();
        };
        socket.once('close', ended);
        // The server's frames (unmasked), read only as far as their opcodes: a close frame (8) ends it.
        let buffered = head;
        const onData = (chunk: Buffer) => {
          buffered = Buffer.concat([buffered, chunk]);
          for (;;) {
            const frame = serverFrame(buffered);
            if (frame === undefined) return;
            if (frame.opcode === 8) {
              socket.off('data', onData);
              socket.resume();
              return ended();
            }
            buffered = buffered.subarray(frame.size);
          }
        };
        socket.on('data', onData);
        if (head.length > 0) onData(Buffer.alloc(0));
      });
      resolve({ closed, isOpen: () => open, end: () => socket.destroy() });
    });
    req.on('response', (res) => {
      res.resume();
      reject(new Error(`websocket refused: ${res.statusCode}`));
    });
    req.on('error', reject);
  });
}

/** The opcode and whole size of the first frame in `b` (a server's: unmasked), once all of it is there. */
function serverFrame(b: Buffer): { opcode: number; size: number } | undefined {
  if (b.length < 2) return undefined;
  const short = b[1]! & 0x7f;
  const [headSize, length] =
    short === 126 ? [4, b.length >= 4 ? b.readUInt16BE(2) : -1] : short === 127 ? [10, b.length >= 10 ? Number(b.readBigUInt64BE(2)) : -1] : [2, short];
  if (length < 0 || b.length < headSize + length) return undefined;
  return { opcode: b[0]! & 0x0f, size: headSize + length };
}

export interface NodeAnswer {
  status: number;
  body: string;
  headers: IncomingHttpHeaders;
  /** The server sent `100 Continue` (with `expectContinue`). */
  continued: boolean;
}

/**
 * One request with Node's http client (no fetch: it adds headers of its own and sends only the
 * standard methods' bodies as given), on a connection of its own. A Buffer body is sent with its
 * length, an array of them chunked (no length announced); with `expectContinue` the body goes
 * only after a `100 Continue`, as curl does it.
 */
export function nodeRequest(
  base: string,
  path: string,
  opts: { method: string; body?: Buffer | Buffer[]; headers?: Record<string, string>; expectContinue?: boolean },
): Promise<NodeAnswer> {
  const url = new URL(path, base);
  const body = opts.body;
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        // As written: `new URL` would resolve dot segments (`%2e%2e` too) that a test means to send.
        path,
        method: opts.method,
        agent: false,
        headers: {
          ...(Buffer.isBuffer(body) ? { 'content-length': String(body.length) } : {}),
          ...(opts.expectContinue ? { expect: '100-continue' } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers, continued }));
      },
    );
    req.on('error', reject);
    const send = () => {
      if (Array.isArray(body)) {
        for (const b of body) req.write(b);
        req.end();
      } else req.end(body);
    };
    if (opts.expectContinue) {
      req.on('continue', () => {
        continued = true;
        send();
      });
    } else send();
  });
}
