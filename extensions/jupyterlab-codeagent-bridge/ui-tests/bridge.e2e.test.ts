// End-to-end: the platform gateway, a logged-in user, JupyterLab 4.5.10 (the lab host) with the
// prebuilt extension, a real Python kernel, and Debian's Chromium driven by playwright-core.
// The code agent is a fake that always proposes FIXED_SOURCE. Needs `node extensions/build.mjs`
// (run by `npm test`) and the Debian packages of .ci/system-deps; it fails, never skips, without them.
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, type Database, type TestDatabase } from '@codeagent/db';
import { buildBackendApp, ensureBootstrapAdmin } from '@codeagent/backend';
import { buildGatewayApp } from '@codeagent/gateway';
import { buildBridgeApp } from '@codeagent/bridge';
import { LocalObjectStore } from '@codeagent/storage';
import { assertLabPrerequisites, CHROMIUM, CHROMIUM_ARGS, freePort, notebook, root, startJupyter, type LabProcess } from './lab';
import { FIXED_SOURCE, startFakeCodeAgent, type FakeCodeAgent } from './stand-ins';

/** The real bridge server part, recording the `/edit` bodies the extension sends. */
interface RecordingBridge {
  url: string;
  edits: Record<string, unknown>[];
  close(): Promise<void>;
}

async function startBridge(database: Database, upstream: string, workdir: string): Promise<RecordingBridge> {
  const app = await buildBridgeApp({
    db: database.db,
    jwtSecret: JWT_SECRET,
    env: { url: upstream, user: undefined, password: undefined, allowedHosts: [] },
    workdir,
  });
  const bridgeUrl = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  // A thin recorder in front of the bridge: keeps each /edit body as the extension sent it.
  const edits: Record<string, unknown>[] = [];
  const recorder = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && req.url?.startsWith('/codeagent-bridge/edit')) edits.push(JSON.parse(body.toString()) as Record<string, unknown>);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k))) as Record<
        string,
        string
      >;
      fetch(`${bridgeUrl}${req.url}`, { method: req.method, headers, ...(body.length > 0 ? { body } : {}) }).then(
        async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await r.arrayBuffer()));
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(recorder.address() as { port: number }).port}`;
  return {
    url,
    edits,
    close: async () => {
      recorder.closeAllConnections();
      recorder.close();
      await app.close();
    },
  };
}

const shots = resolve(root, '.test-results/screenshots');
const JWT_SECRET = 'e2e-secret-that-is-long-enough-for-hs256-0123456789';
const ADMIN = { email: 'admin@localhost', password: 'e2e-admin-password' };
const JUPYTER_TOKEN = 'e2e-jupyter-token-never-shown-to-users';
const USER_SETTINGS = { codeagentModel: 'fake-1', requestTimeoutSeconds: 30 };
const BROKEN_SOURCE = 'values = [1, 2, 3]\nprint("mean", sum(values) / 0)';

describe('JupyterLab bridge extension in Chromium, through the platform gateway', () => {
  let agent: FakeCodeAgent;
  let bridge: RecordingBridge;
  let testDb: TestDatabase | undefined;
  let database: Database;
  let backend: FastifyInstance;
  let gateway: FastifyInstance;
  let jupyter: LabProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  const consoleLines: string[] = [];

  beforeAll(async () => {
    assertLabPrerequisites();

    const work = mkdtempSync(join(tmpdir(), 'codeagent-lab-e2e-'));
    const rootDir = join(work, 'notebooks');
    mkdirSync(rootDir);
    writeFileSync(join(rootDir, 'analysis.ipynb'), notebook(BROKEN_SOURCE));
    mkdirSync(shots, { recursive: true });

    agent = await startFakeCodeAgent();
    testDb = await createTestDatabase();
    database = testDb.database;
    bridge = await startBridge(database, agent.url, work);
    await ensureBootstrapAdmin(database.db, ADMIN.email, ADMIN.password);
    const store = new LocalObjectStore(join(work, 'storage'));
    await store.init();
    backend = await buildBackendApp({
      db: database.db,
      jwtSecret: JWT_SECRET,
      jwtTtlSeconds: 3600,
      storageProbe: () => Promise.resolve(true),
      runtimeProbe: () => Promise.resolve(true),
      store,
      internalServiceToken: 'e2e-internal-token',
      maxUploadBytes: 1024 * 1024,
    });
    const backendUrl = await backend.listen({ host: '127.0.0.1', port: 0 });
    const jupyterPort = await freePort();
    jupyter = await startJupyter(jupyterPort, work, JUPYTER_TOKEN);
    gateway = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridge.url },
      jupyter: { url: `http://127.0.0.1:${jupyterPort}`, token: JUPYTER_TOKEN },
    });
    base = await gateway.listen({ host: '127.0.0.1', port: 0 });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    page = await context.newPage();
    page.on('console', (m) => consoleLines.push(m.text()));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    jupyter?.child.kill('SIGTERM');
    await gateway?.close();
    await backend?.close();
    await testDb?.drop();
    await bridge?.close();
    await agent?.close();
  });

  const cellSource = () =>
    page.evaluate(() => {
      const app = (
        window as unknown as { jupyterapp: { shell: { currentWidget: { content: { widgets: { model: { sharedModel: { getSource(): string } } }[] } } } } }
      ).jupyterapp;
      return app.shell.currentWidget.content.widgets[0]!.model.sharedModel.getSource();
    });
  const footer = () => page.locator('.jp-CodeCell').first().locator('.codeagent-CellFooter');
  const proposal = () => footer().locator('.codeagent-proposal');
  const shot = async (name: string) => {
    const file = join(shots, name);
    await page.locator('.jp-NotebookPanel').first().screenshot({ path: file });
    // The README's pictures are refreshed on request only, so a test run never dirties the tree.
    if (process.env.CODEAGENT_UPDATE_SCREENSHOTS === '1') {
      mkdirSync(join(root, 'docs/images'), { recursive: true });
      copyFileSync(file, join(root, 'docs/images', name));
    }
  };

  it('refuses JupyterLab before login, and opens it after logging in through the gateway', async () => {
    const before = await page.request.get(`${base}/jupyter/lab`);
    expect(before.status()).toBe(401);
    const login = await page.request.post(`${base}/api/v1/auth/login`, { data: ADMIN });
    expect(login.status()).toBe(200);
    // Two settings set by the user (through JupyterLab's settings API, with the Bearer token):
    // only these may travel with each request, not the four defaults.
    const { access_token } = (await login.json()) as { access_token: string };
    const saved = await page.request.put(`${base}/jupyter/lab/api/settings/jupyterlab-codeagent-bridge:plugin`, {
      headers: { authorization: `Bearer ${access_token}` },
      data: { raw: JSON.stringify(USER_SETTINGS) },
    });
    expect(saved.status()).toBe(204);
    await page.goto(`${base}/jupyter/lab/tree/analysis.ipynb`);
    await footer().locator('button.codeagent-fix').waitFor({ timeout: 60_000 });
    // Three buttons under the code cell, and the providers list in the console.
    await expect(footer().locator('.codeagent-actions button:visible').allTextContents()).resolves.toEqual(['Optimize', 'Fix', 'Edit…']);
    // The kernel runs behind the gateway's websocket proxy; wait until it is idle.
    await page.waitForFunction(
      () => {
        const app = (
          window as unknown as {
            jupyterapp?: {
              shell: { currentWidget?: { sessionContext?: { session?: { kernel?: { status: string; connectionStatus: string } | null } | null } } };
            };
          }
        ).jupyterapp;
        const kernel = app?.shell.currentWidget?.sessionContext?.session?.kernel;
        return kernel?.status === 'idle' && kernel.connectionStatus === 'connected';
      },
      undefined,
      { timeout: 60_000 },
    );
    expect(consoleLines.some((l) => l.startsWith('codeagent-bridge providers:'))).toBe(true);
    expect(await page.content()).not.toContain(JUPYTER_TOKEN);
  }, 90_000);

  it('runs a failing cell, fixes it through a diff, accepts, and undoes in one step', async () => {
    await page.locator('.jp-CodeCell .cm-content').first().click();
    await page.keyboard.press('Shift+Enter');
    await page.locator('.jp-OutputArea-output').filter({ hasText: 'ZeroDivisionError' }).first().waitFor({ timeout: 60_000 });
    await shot('jupyterlab-footer.png');

    await footer().locator('button.codeagent-fix').click();
    await proposal().waitFor({ state: 'visible', timeout: 30_000 });
    await expect(proposal().locator('.codeagent-diff .cm-deletedChunk, .codeagent-diff .cm-changedLine').count()).resolves.toBeGreaterThan(0);
    await shot('jupyterlab-pending-diff.png');

    // What the extension sent: path, cell, and the error without ANSI colour codes.
    const sent = bridge.edits.at(-1) as {
      notebook_path: string;
      action: string;
      cell: { id: string; source: string };
      errors: { ename: string; traceback: string[] }[];
      settings?: unknown;
    };
    expect(sent).toMatchObject({ notebook_path: 'analysis.ipynb', action: 'fix', cell: { id: 'cell-1', source: BROKEN_SOURCE } });
    expect(sent.errors[0]!.ename).toBe('ZeroDivisionError');
    expect(sent.errors[0]!.traceback.join('\n')).not.toContain('\u001b[');
    expect(sent.settings).toEqual(USER_SETTINGS);

    await proposal().locator('button.codeagent-accept').click();
    expect(await cellSource()).toBe(FIXED_SOURCE);
    await expect(proposal().isHidden()).resolves.toBe(true);
    await shot('jupyterlab-fixed-cell.png');

    await page.locator('.jp-CodeCell .cm-content').first().click();
    await page.keyboard.press('Control+z');
    await expect.poll(cellSource, { timeout: 5_000 }).toBe(BROKEN_SOURCE);
  }, 120_000);

  it('rejecting a proposal leaves the cell unchanged; editing the cell discards a stale proposal', async () => {
    await footer().locator('button.codeagent-fix').click();
    await proposal().waitFor({ state: 'visible', timeout: 30_000 });
    await proposal().locator('button.codeagent-reject').click();
    await expect(proposal().isHidden()).resolves.toBe(true);
    expect(await cellSource()).toBe(BROKEN_SOURCE);

    await footer().locator('button.codeagent-fix').click();
    await proposal().waitFor({ state: 'visible', timeout: 30_000 });
    await page.locator('.jp-CodeCell .cm-content').first().click();
    await page.keyboard.press('End');
    await page.keyboard.type(' ');
    await proposal().waitFor({ state: 'hidden', timeout: 5_000 });
    await expect(footer().locator('.codeagent-status').textContent()).resolves.toMatch(/discarded/);
    await page.keyboard.press('Backspace');
    await expect.poll(cellSource).toBe(BROKEN_SOURCE);
  }, 90_000);

  it('edit asks for an instruction; Accept & Run runs the cell with the new source', async () => {
    await footer().locator('button.codeagent-edit').click();
    const dialog = page.locator('.jp-Dialog');
    await dialog.locator('input').fill('compute the mean instead of dividing by zero');
    await dialog.locator('button.jp-mod-accept').click();
    await proposal().waitFor({ state: 'visible', timeout: 30_000 });
    const sent = bridge.edits.at(-1) as { action: string; instruction?: string };
    expect(sent).toMatchObject({ action: 'edit', instruction: 'compute the mean instead of dividing by zero' });
    await proposal().locator('button.codeagent-accept-run').click();
    await page.locator('.jp-OutputArea-output').filter({ hasText: 'mean 2.0' }).first().waitFor({ timeout: 60_000 });
    expect(await cellSource()).toBe(FIXED_SOURCE);
  }, 90_000);

  it('shows progress while waiting (buttons disabled, spinner, cancel), and cancel gives up', async () => {
    agent.delayMs = 20_000;
    try {
      await footer().locator('button.codeagent-optimize').click();
      await footer().locator('.codeagent-spinner').waitFor({ state: 'visible', timeout: 5_000 });
      for (const name of ['optimize', 'fix', 'edit']) {
        await expect(footer().locator(`button.codeagent-${name}`).isDisabled()).resolves.toBe(true);
      }
      await footer().locator('button.codeagent-cancel').click();
      await footer().locator('.codeagent-spinner').waitFor({ state: 'hidden', timeout: 5_000 });
      await expect(footer().locator('.codeagent-status').textContent()).resolves.toBe('Cancelled.');
      await expect(footer().locator('button.codeagent-fix').isEnabled()).resolves.toBe(true);
      await expect(proposal().isHidden()).resolves.toBe(true);
      await expect(footer().locator('.codeagent-error').isHidden()).resolves.toBe(true);
    } finally {
      agent.delayMs = 0;
    }
  }, 60_000);

  it('shows a failure in the notebook, naming cause and fix, when the code agent is down', async () => {
    await agent.close();
    await footer().locator('button.codeagent-optimize').click();
    const inline = footer().locator('.codeagent-error');
    await inline.waitFor({ state: 'visible', timeout: 30_000 });
    await expect(inline.textContent()).resolves.toMatch(/code-agent server is not reachable.*opencode serve/);
    await page.locator('.jp-toast-message, .Toastify__toast').filter({ hasText: 'not reachable' }).first().waitFor({ timeout: 10_000 });
    // The buttons are usable again.
    await expect(footer().locator('button.codeagent-fix').isEnabled()).resolves.toBe(true);
  }, 60_000);
});
