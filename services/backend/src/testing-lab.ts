// The whole lab stack of the browser tests: a backend (real PostgreSQL), the workspace mounts, the
// runtime with sandboxed Jupyter servers, the gateway in front, and Debian's Chromium.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { mountTokenKey } from '@codeagent/auth';
import type { LabOrigins } from '@codeagent/config';
import { freePort } from '@codeagent/service-kit/http';
import type { ObjectStore } from '@codeagent/storage';
import { WorkspaceMounts, buildRuntimeApp, databaseLabState, defaultLabHost, labProxy, type Kernels } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { INTERNAL_TOKEN, addMembers, createAndLogin, createWorkspace, startTestBackend, type TestBackend } from './testing.js';

const CHROMIUM = '/usr/bin/chromium';

/** Debian's Chromium, headless, with the flags this machine needs (never a downloaded browser). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error('Chromium is missing: apt-get install chromium (scripts/system-deps.sh)');
  return chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}

export interface LabStack {
  b: TestBackend;
  kernels: Kernels;
  /** The platform's origin: the gateway (`http://127.0.0.1:<port>`). */
  base: string;
  /** A workspace, and an editor of it (password `password-123`) whose browser page is `page`. */
  ws: string;
  editor: { id: string; token: string };
  browser: Browser;
  page: Page;
  close(): Promise<void>;
}

/**
 * Starts the stack; `labOrigins` (given the gateway's origin) turns on the labs' hosts of their
 * own (decision 0263) in the gateway and the runtime.
 */
export async function startLabStack(opts: {
  token: string;
  /** The editor's e-mail address. */
  editor: string;
  store?: ObjectStore;
  labOrigins?: (platform: string, port: number) => LabOrigins;
}): Promise<LabStack> {
  const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-lab-stack-'));
  const b = await startTestBackend(opts.store ? { store: opts.store } : {});
  const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
  const backend = backendUrl.replace(/\/$/, '');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const labOrigins = opts.labOrigins?.(base, port);
  const mounts = new WorkspaceMounts({
    dataDir,
    davUrl: (w) => `${backend}/api/v1/dav/${w}/`,
    tokenKey: mountTokenKey(INTERNAL_TOKEN),
    log: b.app.log,
    dirCacheSeconds: 1,
    cacheBytes: 256 * 1024 * 1024,
  });
  const kernels = await startTestKernels({ lab: defaultLabHost(), mounts });
  const runtime: FastifyInstance = await buildRuntimeApp({
    kernels: kernels.kernels,
    internalServiceToken: 'runtime-token',
    lab: labProxy({ pool: kernels.pool, token: opts.token, log: b.app.log, labState: databaseLabState(() => Promise.resolve(b.t.database.db)), labOrigins }),
  });
  const runtimeUrl = await runtime.listen({ host: '127.0.0.1', port: 0 });
  const gateway = await buildGatewayApp({
    upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' },
    jupyter: { url: runtimeUrl, token: opts.token, perWorkspace: true },
    labOrigins,
  });
  await gateway.listen({ host: '127.0.0.1', port });
  const ws = await createWorkspace(b, 'browser lab');
  const editor = await createAndLogin(b, opts.editor);
  await addMembers(b, ws, [[editor, 'editor']]);
  const browser = await launchChromium();
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  return {
    b,
    kernels,
    base,
    ws,
    editor,
    browser,
    page,
    async close() {
      await browser.close();
      await gateway.close();
      await runtime.close();
      await kernels.stop();
      await b.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
