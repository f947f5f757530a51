import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ServerConnection } from '@jupyterlab/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KernelService, LIST_SERVER_MS } from './kernels.js';
import type { JupyterPool, JupyterServerRef } from './servers.js';

const listen = (server: Server) =>
  new Promise<string>((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)));

describe('listing the kernels of every server', () => {
  let answering: Server;
  let stalled: Server;
  const servers: JupyterServerRef[] = [];
  beforeAll(async () => {
    answering = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify([{ id: 'k-1', name: 'python3', execution_state: 'idle', last_activity: '2026-11-28T00:00:00Z', connections: 0 }]));
    });
    // A Jupyter server its own user code stopped (SIGSTOP): it takes the connection, never answers.
    stalled = createServer(() => undefined);
    for (const [server, workspaceId] of [
      [answering, 'ws-a'],
      [stalled, 'ws-stalled'],
    ] as const) {
      const baseUrl = await listen(server);
      servers.push({
        workspaceId,
        settings: ServerConnection.makeSettings({ baseUrl, wsUrl: baseUrl.replace('http', 'ws'), token: 't' }),
      } as unknown as JupyterServerRef);
    }
  });
  afterAll(async () => {
    for (const s of [answering, stalled]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('answers within its limit with the servers that answer: a stalled one lists nothing and holds nothing up', async () => {
    const pool = { running: () => servers } as unknown as JupyterPool;
    const kernels = new KernelService(pool);
    const started = Date.now();
    const listed = await kernels.list();
    expect(Date.now() - started).toBeLessThan(LIST_SERVER_MS + 2000);
    expect(listed).toEqual([
      { kernel_id: 'k-1', kernel_name: 'python3', execution_state: 'idle', last_activity: '2026-11-28T00:00:00Z', workspace_id: 'ws-a' },
    ]);
  }, 30_000);
});
