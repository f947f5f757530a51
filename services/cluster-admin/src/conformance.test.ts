import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { createOutboundClient } from '@codeagent/safe-fetch';
import { buildClusterAdminApp } from './app.js';

/**
 * `@modelcontextprotocol/conformance server` (a pinned dev dependency; it needs Node 22, like the
 * platform) against a test instance of /mcp, run with the same Node as the tests.
 *
 * Scenarios: the protocol and tool ones that apply to this server. The rest of the active suite
 * calls the reference server's own tools, resources and prompts (docs/mcp-conformance.md).
 */
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'tools-call-simple-text', 'tools-call-error', 'dns-rebinding-protection'];
const CONFORMANCE = join(dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');

describe('MCP conformance suite against /mcp', () => {
  let database: TestDatabase | undefined;
  let app: FastifyInstance;
  let proxy: Server;
  let url: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    app = await buildClusterAdminApp({
      db: database.database.db,
      adminTokens: ['admin'],
      agentToken: 'agent',
      secretsKey: Buffer.alloc(32, 3),
      outbound: createOutboundClient(),
    });
    const target = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
    // The tool cannot send a bearer token: this proxy adds AGENT_TOKEN and passes the rest as is.
    proxy = createServer((req, res) => {
      const up = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, authorization: 'Bearer agent' } },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`;
  }, 300_000);

  afterAll(async () => {
    proxy?.closeAllConnections();
    proxy?.close();
    await app?.close();
    await database?.drop();
  });

  // The servers run in this process: the tool must run asynchronously, or nobody answers it.
  const run = (scenario: string) =>
    new Promise<string>((resolve) => {
      const child = spawn(process.execPath, [CONFORMANCE, 'server', '--url', url, '--scenario', scenario], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(out);
      });
    });

  it.each(SCENARIOS)('%s passes', async (scenario) => {
    const out = await run(scenario);
    // The tool's own summary of one scenario: "Passed: N/M, F failed, W warnings".
    const summary = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(out);
    expect(summary, out).not.toBeNull();
    expect(Number(summary![3]), out).toBe(0);
    expect(Number(summary![1]), out).toBe(Number(summary![2]));
    expect(Number(summary![1]), out).toBeGreaterThan(0);
  });
});
