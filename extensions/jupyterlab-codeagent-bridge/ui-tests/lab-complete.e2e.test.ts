// End-to-end: the lab host is a complete JupyterLab (issue 15 item 7). Through the platform
// gateway, in Debian's Chromium driven by playwright-core: the Launcher with notebook, console and
// terminal tiles; the Settings Editor (reached by the menus the bridge's error texts name) with
// the Code agent bridge settings, editable; a terminal whose shell runs inside the lab's sandbox;
// the notebook toolbar's model picker listing the providers of the real bridge, fed by the fake
// code agent, whose choice the cell actions send. And the abuse cases: logged out, not allowed.
// Needs `node extensions/build.mjs`, `npm run build` and .ci/system-deps; fails, never skips, without them.
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { buildBackendApp, ensureBootstrapAdmin } from '@codeagent/backend';
import { buildGatewayApp } from '@codeagent/gateway';
import { buildBridgeApp } from '@codeagent/bridge';
import { commandLine, descendants } from '@codeagent/sandbox';
import { LocalObjectStore } from '@codeagent/storage';
import { assertLabPrerequisites, CHROMIUM, CHROMIUM_ARGS, freePort, notebook, startJupyter, upgradeStatus, type LabProcess } from './lab';
import { FAKE_API_KEY, startFakeCodeAgent, type FakeCodeAgent } from './stand-ins';

const JWT_SECRET = 'lab-complete-secret-that-is-long-enough-for-hs256-0123';
const ADMIN = { email: 'admin@localhost', password: 'lab-complete-admin-password' };
const USER = { email: 'user@example.com', name: 'Plain User', password: 'lab-complete-user-password' };
const JUPYTER_TOKEN = 'lab-complete-jupyter-token-never-shown';
const SETTINGS_URL = '/jupyter/lab/api/settings/jupyterlab-codeagent-bridge:plugin';
/** The sandbox uid of `codeagent jupyterlab` (SANDBOX_UID_BASE's default), when the tests run as root. */
const SANDBOX_UID = '1900000000';

type AnyApp = { shell: { currentWidget: unknown } };

describe('a complete JupyterLab host in Chromium, through the platform gateway', () => {
  let agent: FakeCodeAgent;
  let testDb: TestDatabase | undefined;
  let backend: FastifyInstance | undefined;
  let bridge: FastifyInstance | undefined;
  let gateway: FastifyInstance | undefined;
  let jupyter: LabProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  let work: string;
  let adminToken: string;

  beforeAll(async () => {
    assertLabPrerequisites();
    work = mkdtempSync(join(tmpdir(), 'codeagent-lab-complete-'));
    mkdirSync(join(work, 'notebooks'));
    mkdirSync(join(work, 'agent'));
    writeFileSync(join(work, 'notebooks', 'analysis.ipynb'), notebook('print(1 / 0)'));

    agent = await startFakeCodeAgent();
    testDb = await createTestDatabase();
    const db = testDb.database.db;
    bridge = await buildBridgeApp({
      db,
      jwtSecret: JWT_SECRET,
      env: { url: agent.url, user: undefined, password: undefined, allowedHosts: [] },
      workdir: join(work, 'agent'),
    });
    const bridgeUrl = (await bridge.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    await ensureBootstrapAdmin(db, ADMIN.email, ADMIN.password);
    const store = new LocalObjectStore(join(work, 'storage'));
    await store.init();
    backend = await buildBackendApp({
      db,
      jwtSecret: JWT_SECRET,
      jwtTtlSeconds: 3600,
      storageProbe: () => Promise.resolve(true),
      runtimeProbe: () => Promise.resolve(true),
      store,
      internalServiceToken: 'lab-complete-internal-token',
      maxUploadBytes: 1024 * 1024,
    });
    const backendUrl = await backend.listen({ host: '127.0.0.1', port: 0 });
    const jupyterPort = await freePort();
    jupyter = await startJupyter(jupyterPort, work, JUPYTER_TOKEN);
    gateway = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: bridgeUrl },
      jupyter: { url: `http://127.0.0.1:${jupyterPort}`, token: JUPYTER_TOKEN },
    });
    base = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    const login = await page.request.post(`${base}/api/v1/auth/login`, { data: ADMIN });
    expect(login.status()).toBe(200);
    adminToken = ((await login.json()) as { access_token: string }).access_token;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (jupyter && jupyter.child.exitCode === null) {
      const exited = new Promise((r) => jupyter!.child.once('exit', r));
      jupyter.child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    }
    await gateway?.close();
    await backend?.close();
    await bridge?.close();
    await testDb?.drop();
    await agent?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const userSettings = async (): Promise<Record<string, unknown>> => {
    const res = await page.request.get(`${base}${SETTINGS_URL}`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(res.status()).toBe(200);
    return ((await res.json()) as { settings: Record<string, unknown> }).settings;
  };

  /** Opens the lab unless this page already shows it (each test also runs alone, with -t). */
  const ensureLab = async () => {
    if (!(await page.evaluate(() => 'jupyterapp' in window).catch(() => false))) await page.goto(`${base}/jupyter/lab`);
    await page.waitForFunction(() => 'jupyterapp' in window, undefined, { timeout: 60_000 });
  };

  it('opens with the Launcher: notebook, console and terminal tiles', async () => {
    await page.goto(`${base}/jupyter/lab`);
    const launcher = page.locator('.jp-Launcher');
    await launcher.waitFor({ state: 'visible', timeout: 60_000 });
    await expect(launcher.locator('.jp-LauncherCard[data-category="Notebook"]').first().getAttribute('title')).resolves.toBe('Python 3 (ipykernel)');
    await expect(launcher.locator('.jp-LauncherCard[data-category="Console"]').count()).resolves.toBe(1);
    await expect(
      launcher
        .locator('.jp-LauncherCard')
        .filter({ hasText: /^Terminal$/ })
        .count(),
    ).resolves.toBe(1);
  }, 90_000);

  it('Settings › Settings Editor › Code agent bridge exists and edits the settings', async () => {
    await ensureLab();
    await page.locator('.lm-MenuBar-itemLabel', { hasText: /^Settings$/ }).click();
    await page.locator('.lm-Menu-itemLabel', { hasText: /^Settings Editor$/ }).click();
    const entry = page.locator('.jp-PluginList-entry', { hasText: 'Code agent bridge' });
    await entry.waitFor({ state: 'visible', timeout: 30_000 });
    await entry.click();
    // The form of the extension (the panel holds one per plugin), its six fields titled as in the schema.
    const field = (name: string) => page.locator(`[id="jp-SettingsEditor-jupyterlab-codeagent-bridge:plugin_${name}"]`);
    const form = page.locator('.jp-SettingsForm').filter({ has: field('codeagentServerUrl') });
    await form.waitFor({ state: 'visible', timeout: 15_000 });
    const titles = await form.locator('.jp-FormGroup-fieldLabel').allTextContents();
    expect(titles).toEqual(
      expect.arrayContaining([
        'Code-agent server URL',
        'Code-agent server user',
        'Code-agent server password',
        'Provider',
        'Model',
        'Request time-out (seconds)',
      ]),
    );
    const timeout = field('requestTimeoutSeconds');
    await timeout.fill('45');
    await timeout.press('Tab');
    await expect.poll(async () => (await userSettings()).requestTimeoutSeconds, { timeout: 15_000 }).toBe(45);
  }, 60_000);

  it('opens a terminal from the Launcher whose shell runs inside the sandbox', async () => {
    await ensureLab();
    // The Launcher's tab, or a new Launcher (the File browser's "+" does the same).
    const tab = page.locator('.lm-TabBar-tab', { hasText: 'Launcher' }).first();
    if ((await tab.count()) > 0) await tab.click();
    else
      await page.locator('.jp-FileBrowser [data-command="launcher:create"], .jp-FileBrowser .jp-ToolbarButtonComponent[title="New Launcher"]').first().click();
    await page
      .locator('.jp-LauncherCard')
      .filter({ hasText: /^Terminal$/ })
      .click();
    await page.locator('.jp-Terminal').first().waitFor({ state: 'visible', timeout: 30_000 });
    // Collect what the terminal's server session sends (the xterm canvas has no text to read).
    await page.waitForFunction(
      () => {
        const w = (window as unknown as { jupyterapp: AnyApp }).jupyterapp.shell.currentWidget as {
          content?: {
            session?: { connectionStatus: string; messageReceived: { connect(f: (s: unknown, m: { type: string; content?: string[] }) => void): void } };
          };
        };
        const session = w?.content?.session;
        if (session?.connectionStatus !== 'connected') return false;
        const win = window as unknown as { termOut?: string };
        if (win.termOut === undefined) {
          win.termOut = '';
          session.messageReceived.connect((_s, m) => {
            if (m.type === 'stdout') win.termOut += m.content?.[0] ?? '';
          });
        }
        return true;
      },
      undefined,
      { timeout: 30_000 },
    );
    // The text as a user reads it: without escape sequences (prompt colours, bracketed paste) and carriage returns.
    const output = async () =>
      (await page.evaluate(() => (window as unknown as { termOut: string }).termOut))
        // eslint-disable-next-line no-control-regex
        .replace(/\u001b\[[0-9;?]*[A-Za-z]|\u001b\][^\u0007]*\u0007/g, '')
        .replace(/\r/g, '');
    await page.locator('.jp-Terminal').first().click();
    await page.keyboard.type('echo hi\n');
    await expect.poll(output, { timeout: 15_000 }).toMatch(/\nhi\n/);
    await page.keyboard.type(`id -u; pwd; ls -d /work ${work} 2>&1; echo "done-$((6*7))"\n`);
    await expect.poll(output, { timeout: 15_000 }).toMatch(/done-42/);
    const text = await output();
    if (process.getuid?.() === 0) expect(text).toMatch(new RegExp(`\\n${SANDBOX_UID}\\n`));
    expect(text).toMatch(/\n\/workspace\n/);
    expect(text).toMatch(/\/work'?: No such file or directory/);
    expect(text).toContain(`${work}': No such file or directory`);

    // Seen from the host: the shell is a process of the lab's sandbox (its uid, its namespaces),
    // and nothing of the gateway's token is in its environment.
    const shells = descendants(jupyter!.child.pid!).filter((pid) => (commandLine(pid) ?? [])[0] === '/bin/bash');
    expect(shells.length).toBe(1);
    const pid = shells[0]!;
    if (process.getuid?.() === 0) expect(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]).toBe(SANDBOX_UID);
    expect(readlinkSync(`/proc/${pid}/ns/mnt`)).not.toBe(readlinkSync('/proc/self/ns/mnt'));
    expect(readlinkSync(`/proc/${pid}/ns/net`)).not.toBe(readlinkSync('/proc/self/ns/net'));
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain(JUPYTER_TOKEN);
  }, 90_000);

  it('the notebook toolbar picker lists the providers of /providers; the choice is saved and sent by the cell actions', async () => {
    await page.goto(`${base}/jupyter/lab/tree/analysis.ipynb`);
    const picker = page.locator('.jp-NotebookPanel-toolbar .codeagent-model-picker').first();
    await picker.waitFor({ state: 'visible', timeout: 30_000 });
    await expect.poll(() => picker.getAttribute('data-state'), { timeout: 15_000 }).toBe('ready');
    const listed = await picker.evaluate((el) =>
      [...(el as HTMLSelectElement).children].map((c) =>
        c instanceof HTMLOptGroupElement ? `${c.label}: ${[...c.children].map((o) => o.textContent).join(', ')}` : c.textContent,
      ),
    );
    expect(listed).toEqual(['Default model', 'Fake: Fake One (default)', 'Other Labs: Other One, Other Two (default)']);
    expect(await page.content()).not.toContain(FAKE_API_KEY);

    await picker.selectOption({ label: 'Other One' });
    await expect
      .poll(
        async () => {
          const s = await userSettings();
          return [s.codeagentProvider, s.codeagentModel];
        },
        { timeout: 15_000 },
      )
      .toEqual(['other', 'other-1']);

    const footer = page.locator('.jp-NotebookPanel:visible .jp-CodeCell').first().locator('.codeagent-CellFooter');
    const proposal = footer.locator('.codeagent-proposal');
    const failure = footer.locator('.codeagent-error');
    // The proposal, or the failure the footer shows instead (so a failing run says why).
    const outcome = async () =>
      (await proposal.isVisible()) ? 'proposal' : (await failure.isVisible()) ? `failure: ${await failure.textContent()}` : 'waiting';
    await footer.locator('button.codeagent-fix').click();
    await expect.poll(outcome, { timeout: 30_000 }).toBe('proposal');
    expect(agent.models.at(-1)).toEqual({ providerID: 'other', modelID: 'other-1' });
    await proposal.locator('button.codeagent-reject').click();

    // "Default model" removes both settings: the bridge's own configuration decides again.
    await picker.selectOption({ label: 'Default model' });
    await expect
      .poll(
        async () => {
          const s = await userSettings();
          return [s.codeagentProvider ?? '', s.codeagentModel ?? ''];
        },
        { timeout: 15_000 },
      )
      .toEqual(['', '']);
    await footer.locator('button.codeagent-fix').click();
    await expect.poll(outcome, { timeout: 30_000 }).toBe('proposal');
    expect(agent.models.at(-1)).toBeNull();
  }, 90_000);

  it('refuses terminals and the provider list to a logged-out visitor (401) and to a user who is not an administrator (403)', async () => {
    const anon = await browser!.newContext();
    try {
      expect((await anon.request.post(`${base}/jupyter/api/terminals`)).status()).toBe(401);
      expect((await anon.request.get(`${base}/jupyter/api/terminals`)).status()).toBe(401);
      expect((await anon.request.get(`${base}/jupyter/codeagent-bridge/providers`)).status()).toBe(401);
    } finally {
      await anon.close();
    }
    expect(await upgradeStatus(base, '/jupyter/terminals/websocket/1')).toBe(401);

    const created = await page.request.post(`${base}/api/v1/platform/users`, { headers: { authorization: `Bearer ${adminToken}` }, data: USER });
    expect(created.status()).toBe(201);
    const login = await page.request.post(`${base}/api/v1/auth/login`, { data: { email: USER.email, password: USER.password } });
    const { access_token: userToken } = (await login.json()) as { access_token: string };
    // Log the browser back in as the administrator for any later test.
    await page.request.post(`${base}/api/v1/auth/login`, { data: ADMIN });
    const asUser = { authorization: `Bearer ${userToken}` };
    expect((await fetch(`${base}/jupyter/api/terminals`, { method: 'POST', headers: asUser })).status).toBe(403);
    expect(await upgradeStatus(base, '/jupyter/terminals/websocket/1', { cookie: `codeagent_session=${userToken}` })).toBe(403);
  }, 60_000);
});
