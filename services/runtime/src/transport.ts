import { ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';

/**
 * @jupyterlab/services settings that reach a Jupyter server over its Unix socket: REST through
 * undici with `socketPath`, websockets through `ws`'s `ws+unix:` addresses. The URLs keep the
 * host `localhost` (Jupyter's host check accepts it); only the socket carries the traffic.
 * undici is imported here, when the first Jupyter server starts, not by an idle runtime
 * (decision 0085).
 */
export async function unixSocketSettings(
  socketPath: string,
  token: string,
  basePath = '/',
): Promise<{ settings: ServerConnection.ISettings; close(): Promise<void> }> {
  const { Agent, Headers, Request, fetch } = await import('undici');
  const agent = new Agent({ connect: { socketPath }, keepAliveTimeout: 10_000, connections: 16 });
  class UnixWebSocket extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      const u = new URL(String(url));
      super(`ws+unix:${socketPath}:${u.pathname}${u.search}`, protocols, { headers: { host: 'localhost' }, maxPayload: 256 * 1024 * 1024 });
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
