import type { Socket } from 'node:net';
import { ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';
import { connectInside } from '@codeagent/sandbox/inside';

/**
 * @jupyterlab/services settings that reach a Jupyter server over its Unix socket (in its
 * sandbox: never through a symlink there, decision 0253): REST through undici, websockets
 * through `ws`. The URLs keep the host `localhost` (Jupyter's host check accepts it); only the
 * socket carries the traffic.
 * undici is imported here, when the first Jupyter server starts, not by an idle runtime
 * (decision 0085).
 */
export async function unixSocketSettings(
  socketPath: string,
  token: string,
  basePath = '/',
): Promise<{ settings: ServerConnection.ISettings; close(): Promise<void> }> {
  const { Agent, Headers, Request, fetch } = await import('undici');
  const agent = new Agent({
    connect: (_options, callback) => {
      const socket = connectInside(socketPath);
      const refused = (err: Error) => callback(err, null);
      socket.once('error', refused);
      socket.once('connect', () => {
        socket.off('error', refused);
        callback(null, socket);
      });
    },
    keepAliveTimeout: 10_000,
    connections: 16,
  });
  class UnixWebSocket extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      const u = new URL(String(url));
      // (A message with bad UTF-8 is read with replacement characters: nothing here runs it, and a
      // message dropped unread (withMessageGate) is not validated either.)
      super(`ws://localhost${u.pathname}${u.search}`, protocols, {
        createConnection: (): Socket => connectInside(socketPath),
        headers: { host: 'localhost' },
        maxPayload: 256 * 1024 * 1024,
        skipUTF8Validation: true,
      });
    }
  }
  const settings = ServerConnection.makeSettings({
    baseUrl: `http://localhost${basePath}`,
    wsUrl: `ws://localhost${basePath}`,
    token,
    appendToken: true,
    fetch: ((input: InstanceType<typeof Request>) => fetch(input, { dispatcher: agent })) as unknown as typeof globalThis.fetch,
    Request: Request as unknown as typeof globalThis.Request,
    Headers: Headers as unknown as typeof globalThis.Headers,
    WebSocket: UnixWebSocket as unknown as typeof globalThis.WebSocket,
  });
  return { settings, close: () => agent.close() };
}

/** Settings for a Jupyter server on a TCP address (JUPYTER_URL, only with KERNEL_SANDBOX=off). */
export function tcpSettings(url: string, token: string): ServerConnection.ISettings {
  return ServerConnection.makeSettings({
    baseUrl: `${url}/`,
    wsUrl: `${url.replace(/^http/, 'ws')}/`,
    token,
    appendToken: true,
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
  });
}

/**
 * `settings` whose websockets drop a message unread (before it is decoded or parsed) when `admit`
 * refuses its size. The runtime's connection to a kernel through its Jupyter server needs only the
 * kernel's status while the kernel executes over ZeroMQ (decision 0190): the server relays every
 * IOPub message to it, and a background thread of a hostile kernel can send 8 MiB ones without
 * end, which `@jupyterlab/services` would decode and parse on the runtime every workspace shares
 * (decision 0247).
 */
export function withMessageGate(settings: ServerConnection.ISettings, admit: (bytes: number) => boolean): ServerConnection.ISettings {
  const Base = settings.WebSocket as unknown as typeof WebSocket;
  class GatedWebSocket extends Base {
    override emit(event: string | symbol, ...args: unknown[]): boolean {
      if (event === 'message' && !admit(messageBytes(args[0]))) return false;
      return super.emit(event, ...args);
    }
  }
  return { ...settings, WebSocket: GatedWebSocket as unknown as typeof globalThis.WebSocket };
}

function messageBytes(data: unknown): number {
  if (Array.isArray(data)) return (data as Buffer[]).reduce((n, b) => n + b.byteLength, 0);
  return (data as { byteLength?: number } | undefined)?.byteLength ?? 0;
}
