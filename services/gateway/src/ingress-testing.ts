import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { freePort } from '@codeagent/service-kit/http';
import { buildGatewayApp, type Addresses, type GatewayOptions } from './app.js';
import { renderNginxConfig } from './nginx.js';

/**
 * Test helper: the same routing tests run through both ingresses (issue 18), the gateway and
 * Debian's nginx with the configuration `codeagent nginx-config` renders from the same route
 * table, so that the two never drift. nginx is required (CI installs it through
 * `.ci/system-deps`); a missing nginx fails the tests with the command that installs it.
 */
export type IngressKind = 'gateway' | 'nginx';
export const INGRESSES: readonly IngressKind[] = ['gateway', 'nginx'];
export const NGINX = '/usr/sbin/nginx';

export interface Ingress {
  kind: IngressKind;
  /** http://127.0.0.1:<port> */
  base: string;
  /** nginx's error log and access log; empty for the gateway. */
  output(): string;
  close(): Promise<void>;
}

const list = (a: Addresses): string[] => [a].flat();

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** nginx with the rendered configuration, in front of the same upstreams the gateway would use. */
export async function startNginx(opts: GatewayOptions): Promise<Ingress> {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: install Debian's nginx (scripts/system-deps.sh nginx, or apt-get install nginx)`);
  const runDir = mkdtempSync(join(tmpdir(), 'codeagent-nginx-'));
  // As root, nginx's workers run as nobody: they must reach the temporary directories.
  chmodSync(runDir, 0o755);
  const port = await freePort();
  const conf = join(runDir, 'nginx.conf');
  writeFileSync(
    conf,
    renderNginxConfig({
      listen: { host: '127.0.0.1', port },
      upstreams: {
        backend: list(opts.upstreams.backend),
        clusterAdmin: list(opts.upstreams.clusterAdmin),
        bridge: list(opts.upstreams.bridge),
        ...(opts.jupyter ? { jupyter: list(opts.jupyter.url) } : {}),
      },
      jupyterToken: opts.jupyter?.token ?? '',
      ...(opts.jupyter?.perWorkspace ? { jupyterPerWorkspace: true } : {}),
      ...(opts.trustedProxies ? { trustedProxies: opts.trustedProxies } : {}),
      ...(opts.maxUploadBytes !== undefined ? { maxUploadBytes: opts.maxUploadBytes } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.webRoot !== undefined ? { webRoot: opts.webRoot } : {}),
      runDir,
      accessLog: join(runDir, 'access.log'),
      workerProcesses: 1,
      workerConnections: 1024,
    }),
    { mode: 0o600 },
  );
  const child: ChildProcess = spawn(NGINX, ['-p', runDir, '-c', conf, '-e', 'stderr', '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let out = '';
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (let i = 0; !(await accepts(port)); i++) {
    if (child.exitCode !== null || i > 100) {
      child.kill('SIGKILL');
      throw new Error(`nginx did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    kind: 'nginx',
    base: `http://127.0.0.1:${port}`,
    output: () => {
      try {
        return out + readFileSync(join(runDir, 'access.log'), 'utf8');
      } catch {
        return out;
      }
    },
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}

/**
 * Closes a server started by a test at once: connections still open (a client that never sent
 * the body it announced, a keep-alive socket) are cut instead of holding the teardown until
 * Node's request timeout.
 */
export async function closeNow(app: FastifyInstance): Promise<void> {
  const closing = app.close();
  app.server.closeAllConnections();
  await closing;
}

/** The gateway (in this process) or nginx (a child process), from the same options. */
export async function startIngress(kind: IngressKind, opts: GatewayOptions): Promise<Ingress> {
  if (kind === 'nginx') return startNginx(opts);
  const app = await buildGatewayApp(opts);
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  return { kind, base, output: () => '', close: () => closeNow(app) };
}
