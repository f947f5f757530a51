// End-to-end: the web app in Debian's Chromium (playwright-core) against the real platform: the
// backend on the test database, the gateway serving the built app (web/dist/app, built here if
// stale). The bootstrap admin creates a user, a workspace and the membership through the UI; the
// user uploads 20 MB with a progress bar that reaches 100 %, deletes the file and restores it
// from the trash; a viewer gets no write controls; an uploaded .html is downloaded, never run;
// `?next=` never leaves the platform; axe-core finds no serious or critical violation.
// Needs /usr/bin/chromium (.ci/system-deps); it fails, never skips, without it.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createAndLogin, startTestBackend, type TestBackend } from '@codeagent/backend/testing';

const CHROMIUM = '/usr/bin/chromium';
const web = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const axeSource = (createRequire(import.meta.url)('axe-core') as { source: string }).source;
const USER = { email: 'ada@example.com', name: 'Ada', password: 'ada-password-123' };
const MiB = 1024 * 1024;
const UI_WAIT = { timeout: 20_000 };
const shots = resolve(web, '../.test-results/screenshots/web');
const docImages = resolve(web, '../docs/images');

/** A screenshot of each screen in .test-results; with CODEAGENT_UPDATE_SCREENSHOTS=1 also into docs/images (the README shows them). */
async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(shots, { recursive: true });
  const file = join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  if (process.env.CODEAGENT_UPDATE_SCREENSHOTS === '1') copyFileSync(file, join(docImages, `web-${name}.png`));
}

interface AxeResult {
  violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
}

/** axe-core in the page (through the DevTools protocol: the page's CSP allows no injected script tag). */
async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  const result = await page.evaluate<AxeResult>('axe.run(document, { resultTypes: ["violations"] })');
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${JSON.stringify(v.nodes.map((n) => n.target))})`);
}

async function logIn(page: Page, base: string, email: string, password: string, path = '/login'): Promise<void> {
  await page.goto(`${base}${path}`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}

describe(`the web app in Chromium (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let gateway: FastifyInstance;
  let base: string;
  let browser: Browser;
  let files: string;
  const contexts: BrowserContext[] = [];
  const newPage = async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    return context.newPage();
  };
  let ws = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error('Debian chromium is missing: run .ci/system-deps (apt-get install chromium)');
    const built = spawnSync(process.execPath, [join(web, 'build.mjs')], { encoding: 'utf8', timeout: 120_000 });
    if (built.status !== 0) throw new Error(`node web/build.mjs failed:\n${built.stderr}`);
    b = await startTestBackend({ maxUploadBytes: 64 * MiB });
    const backendUrl = await b.app.listen({ host: '127.0.0.1', port: 0 });
    gateway = await buildGatewayApp({
      upstreams: { backend: backendUrl, clusterAdmin: 'http://127.0.0.1:9', bridge: 'http://127.0.0.1:9' },
      webRoot: join(web, 'dist', 'app'),
    });
    base = (await gateway.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    files = mkdtempSync(join(tmpdir(), 'codeagent-web-e2e-'));
  }, 180_000);

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await gateway?.close();
    await b?.close();
    if (files) rmSync(files, { recursive: true, force: true });
  });

  it('the admin logs in, creates a user, a workspace and the membership; the last admin cannot be demoted', async () => {
    const page = await newPage();
    await logIn(page, base, ADMIN_EMAIL, ADMIN_PASSWORD);
    await expect.poll(() => page.url(), UI_WAIT).toBe(`${base}/`);
    await page.getByRole('heading', { name: 'My workspaces' }).waitFor(UI_WAIT);
    // No token in script-readable storage: the session is the HttpOnly cookie.
    expect(await page.evaluate('JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage), document.cookie])')).toBe('[[],[],""]');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Administration' }).click();
    await page.getByRole('heading', { name: 'Administration' }).waitFor(UI_WAIT);
    await page.getByRole('heading', { name: 'Users' }).waitFor(UI_WAIT);

    const userForm = page.getByRole('form', { name: 'Create user' });
    await userForm.getByLabel('Email').fill(USER.email);
    await userForm.getByLabel('Name').fill(USER.name);
    await userForm.getByLabel('Password').fill(USER.password);
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await page.getByRole('button', { name: `Disable ${USER.email}` }).waitFor(UI_WAIT);

    const wsForm = page.getByRole('form', { name: 'Create workspace' });
    await wsForm.getByLabel('Name').fill('Research');
    await wsForm.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('heading', { name: 'Members of Research' }).waitFor(UI_WAIT);

    const addForm = page.getByRole('form', { name: 'Add member' });
    await addForm.getByLabel('User').selectOption({ label: USER.email });
    await addForm.getByLabel('Role').selectOption('editor');
    await addForm.getByRole('button', { name: 'Add member' }).click();
    await page.getByLabel(`Role of ${USER.email}`).waitFor(UI_WAIT);
    expect(await page.getByLabel(`Role of ${USER.email}`).inputValue()).toBe('editor');

    // Demoting the only admin member: the server's last_admin refusal, in words, next to the row.
    await page.getByLabel(`Role of ${ADMIN_EMAIL}`).selectOption('viewer');
    await page.getByText('Refused: this is the last admin of the workspace').waitFor(UI_WAIT);
    expect(await page.getByLabel(`Role of ${ADMIN_EMAIL}`).inputValue()).toBe('admin');
    await shot(page, 'administration');

    expect(await seriousViolations(page)).toEqual([]);
    const list = await fetch(`${base}/api/v1/platform/workspaces`, { headers: bearer(b.adminToken) });
    ws = ((await list.json()) as { items: { id: string; name: string }[] }).items.find((w) => w.name === 'Research')!.id;
    expect(ws).toBeTruthy();
  }, 90_000);

  it('the user comes back to the page asked for after login, uploads 20 MB with progress to 100 %, deletes it and restores it from the trash', async () => {
    const page = await newPage();
    // A deep link without a session: to the login page, then back.
    await page.goto(`${base}/workspaces/${ws}/files/`);
    await expect.poll(() => new URL(page.url()).pathname, UI_WAIT).toBe('/login');
    expect(new URL(page.url()).searchParams.get('next')).toBe(`/workspaces/${ws}/files/`);
    await page.getByRole('heading', { name: 'Log in to codeagent' }).waitFor(UI_WAIT);
    await shot(page, 'login');
    await page.getByLabel('Email').fill(USER.email);
    await page.getByLabel('Password').fill(USER.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect.poll(() => new URL(page.url()).pathname, UI_WAIT).toBe(`/workspaces/${ws}/files/`);
    await page.getByText('No files here yet').waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Workspaces' }).click();
    await page.getByRole('heading', { name: 'My workspaces' }).waitFor(UI_WAIT);
    await shot(page, 'home');
    await page.getByRole('link', { name: 'Research' }).click();
    await page.getByText('No files here yet').waitFor(UI_WAIT);

    const big = join(files, 'measurements.bin');
    writeFileSync(big, Buffer.alloc(20 * MiB, 7));
    await page.getByTestId('file-input').setInputFiles(big);
    const row = page.locator('.upload').filter({ hasText: 'measurements.bin' });
    await row.getByText('Uploaded').waitFor({ timeout: 60_000 });
    // 100 % from XMLHttpRequest's own upload progress events (the app never sets it by itself).
    expect(await row.getByTestId('upload-percent').textContent()).toBe('100 %');
    expect(await row.locator('progress').getAttribute('value')).toBe('100');
    await page.getByRole('link', { name: 'measurements.bin' }).first().waitFor(UI_WAIT);
    await page.getByRole('cell', { name: '20 MB' }).waitFor(UI_WAIT);
    await shot(page, 'files-upload');

    // Drag and drop: a file dropped on the page is uploaded into the folder shown.
    const dropped = await page.evaluateHandle(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['dropped by drag and drop'], 'dropped.txt', { type: 'text/plain' }));
      return dt;
    });
    await page.dispatchEvent('section.files', 'drop', { dataTransfer: dropped });
    await page.locator('.upload').filter({ hasText: 'dropped.txt' }).getByText('Uploaded').waitFor(UI_WAIT);
    const droppedRes = await fetch(`${base}/api/v1/data-resources/${ws}/objects/dropped.txt`, { headers: bearer(b.adminToken) });
    expect(await droppedRes.text()).toBe('dropped by drag and drop');
    await page.getByRole('button', { name: 'Delete dropped.txt' }).click();
    await page.getByRole('button', { name: 'Delete dropped.txt' }).waitFor({ state: 'detached', ...UI_WAIT });
    const stored = await fetch(`${base}/api/v1/data-resources/${ws}/objects?prefix=`, { headers: bearer(b.adminToken) });
    expect(((await stored.json()) as { items: { path: string; size: number }[] }).items).toEqual([
      expect.objectContaining({ path: 'measurements.bin', size: 20 * MiB }),
    ]);

    await page.getByRole('button', { name: 'Delete measurements.bin' }).click();
    await page.getByText('No files here yet').waitFor(UI_WAIT);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Trash' }).click();
    await shot(page, 'trash');
    await page.getByRole('button', { name: 'Restore measurements.bin' }).click();
    await page.getByRole('button', { name: 'Restore measurements.bin' }).waitFor({ state: 'detached', ...UI_WAIT });
    // Purge for good (after a confirmation): the trash is empty.
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete dropped.txt for good' }).click();
    await page.getByText('The trash is empty').waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Files' }).click();
    await page.getByRole('link', { name: 'measurements.bin' }).first().waitFor(UI_WAIT);

    // A file in a folder, replaced once: the folder, its breadcrumbs, the versions, a restore.
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: USER.email, password: USER.password }),
    });
    const token = ((await login.json()) as { access_token: string }).access_token;
    for (const text of ['first draft', 'second draft']) {
      const put = await fetch(`${base}/api/v1/data-resources/${ws}/objects/reports/2026 q1/notes.txt`, {
        method: 'PUT',
        headers: { ...bearer(token), 'content-type': 'text/plain' },
        body: text,
      });
      expect(put.status).toBeLessThan(300);
    }
    await page.reload();
    await page.getByRole('link', { name: 'reports/' }).click();
    await page.getByRole('link', { name: '2026 q1/' }).click();
    await page.getByRole('link', { name: 'notes.txt' }).first().waitFor(UI_WAIT);
    const crumbs = page.getByRole('navigation', { name: 'Breadcrumbs' });
    expect(await crumbs.getByRole('link').allTextContents()).toEqual(['All files', 'reports', '2026 q1']);
    await page.getByRole('button', { name: 'Versions of notes.txt' }).click();
    const panel = page.getByRole('complementary', { name: 'Versions of reports/2026 q1/notes.txt' });
    await panel.getByRole('button', { name: 'Restore' }).waitFor(UI_WAIT);
    await shot(page, 'versions');
    await panel.getByRole('button', { name: 'Restore' }).click();
    await expect
      .poll(async () => (await fetch(`${base}/api/v1/data-resources/${ws}/objects/reports/2026%20q1/notes.txt`, { headers: bearer(token) })).text(), UI_WAIT)
      .toBe('first draft');
    expect(await seriousViolations(page)).toEqual([]);
    await crumbs.getByRole('link', { name: 'All files' }).click();
    await page.getByRole('link', { name: 'measurements.bin' }).first().waitFor(UI_WAIT);

    // Logging out ends the session: the app sends the visitor to the login page again.
    await page.getByRole('button', { name: 'Log out' }).click();
    await expect.poll(() => new URL(page.url()).pathname, UI_WAIT).toBe('/login');
    await page.goto(`${base}/`);
    await expect.poll(() => new URL(page.url()).pathname, UI_WAIT).toBe('/login');
  }, 120_000);

  it('an editor runs a notebook now and sees its status change without reloading', async () => {
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: USER.email, password: USER.password }),
    });
    const token = ((await login.json()) as { access_token: string }).access_token;
    const notebook = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [{ cell_type: 'code', id: 'c1', metadata: {}, source: 'print(1)', outputs: [], execution_count: null }],
    };
    const put = await fetch(`${base}/api/v1/data-resources/${ws}/objects/analysis.ipynb`, {
      method: 'PUT',
      headers: { ...bearer(token), 'content-type': 'application/x-ipynb+json' },
      body: JSON.stringify(notebook),
    });
    expect(put.status).toBe(201);

    const page = await newPage();
    await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/runs`)}`);
    await page.getByLabel('Notebook').waitFor(UI_WAIT);
    expect(await page.getByLabel('Notebook').inputValue()).toBe('analysis.ipynb');
    await page.getByRole('button', { name: 'Run now' }).click();
    const row = page.getByRole('row').filter({ hasText: 'analysis.ipynb' });
    await row.locator('.status-queued').waitFor(UI_WAIT);
    // No worker runs in this test: the run is cancelled through the API, and the page, which
    // polls while a run is queued or running, shows it without a reload.
    const runs = await fetch(`${base}/api/v1/workspaces/${ws}/runs`, { headers: bearer(token) });
    const run = ((await runs.json()) as { items: { id: string }[] }).items[0]!;
    const cancel = await fetch(`${base}/api/v1/workspaces/${ws}/runs/${run.id}/cancel`, { method: 'POST', headers: bearer(token) });
    expect(cancel.status).toBe(200);
    await row.locator('.status-cancelled').waitFor(UI_WAIT);
    await row.getByRole('button', { name: 'Log' }).click();
    await page.getByRole('complementary', { name: 'Run log' }).waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);

  it('a viewer sees the files but no upload or delete control', async () => {
    const viewer = await createAndLogin(b, 'viewer@example.com');
    const added = await fetch(`${base}/api/v1/platform/workspaces/${ws}/members`, {
      method: 'POST',
      headers: { ...bearer(b.adminToken), 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: viewer.id, role: 'viewer' }),
    });
    expect(added.status).toBe(201);
    const page = await newPage();
    await logIn(page, base, 'viewer@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${ws}/files/`)}`);
    await page.getByRole('link', { name: 'measurements.bin' }).first().waitFor(UI_WAIT);
    expect(await page.getByRole('button', { name: 'Upload files' }).count()).toBe(0);
    expect(await page.getByTestId('file-input').count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBe(0);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Trash' }).click();
    await page.getByText('The trash is empty').waitFor(UI_WAIT);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Runs' }).click();
    await page.getByRole('row').filter({ hasText: 'analysis.ipynb' }).locator('.status-cancelled').waitFor(UI_WAIT);
    expect(await page.getByRole('button', { name: 'Run now' }).count()).toBe(0);
    await shot(page, 'runs');
    // Nor the administration, which is for system administrators only (its address shows nothing).
    expect(await page.getByRole('link', { name: 'Administration' }).count()).toBe(0);
    await page.goto(`${base}/manage`);
    await page.getByRole('heading', { name: 'Page not found' }).waitFor(UI_WAIT);
    expect(await page.getByRole('form', { name: 'Create user' }).count()).toBe(0);
    // A workspace the viewer is not a member of: no files, and words that say why.
    const other = await fetch(`${base}/api/v1/platform/workspaces`, {
      method: 'POST',
      headers: { ...bearer(b.adminToken), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Secret' }),
    });
    const otherId = ((await other.json()) as { id: string }).id;
    await fetch(`${base}/api/v1/data-resources/${otherId}/objects/secret.txt`, { method: 'PUT', headers: bearer(b.adminToken), body: 'secret' });
    await page.goto(`${base}/workspaces/${otherId}/files/`);
    await page.getByText('You are not a member of this workspace').waitFor(UI_WAIT);
    await page.getByText('Not found: it may have been deleted or moved.').waitFor(UI_WAIT);
    expect(await page.getByText('secret.txt').count()).toBe(0);
  }, 60_000);

  it('an uploaded .html file is downloaded as an attachment; its script never runs in the platform origin', async () => {
    const editor = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: USER.email, password: USER.password }),
    });
    const token = ((await editor.json()) as { access_token: string }).access_token;
    const html = '<!doctype html><html><body><h1>report</h1><script>fetch("/api/v1/pwned-by-upload",{method:"POST"})</script></body></html>';
    const put = await fetch(`${base}/api/v1/data-resources/${ws}/objects/report.html`, {
      method: 'PUT',
      headers: { ...bearer(token), 'content-type': 'text/html' },
      body: html,
    });
    expect(put.status).toBe(201);

    const page = await newPage();
    const pwned: string[] = [];
    page.context().on('request', (r) => {
      if (r.url().includes('pwned-by-upload')) pwned.push(r.url());
    });
    await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/files/`)}`);
    const link = page.getByRole('link', { name: 'Download report.html' });
    await link.waitFor(UI_WAIT);
    const [download] = await Promise.all([page.waitForEvent('download', UI_WAIT), link.click()]);
    expect(download.suggestedFilename()).toBe('report.html');
    const res = await page.request.get(`${base}/api/v1/data-resources/${ws}/objects/report.html`);
    expect(res.headers()['content-disposition']).toMatch(/^attachment/);
    expect(res.headers()['x-content-type-options']).toBe('nosniff');
    // Opening the file's address directly: downloaded (or sandboxed), never rendered with script.
    await page.goto(`${base}/api/v1/data-resources/${ws}/objects/report.html`).catch((err: Error) => {
      if (!/Download is starting|net::ERR_ABORTED/.test(err.message)) throw err;
    });
    await page.goto(`${base}/`);
    expect(pwned).toEqual([]);
  }, 60_000);

  it('?next= never leads off the platform after login (open redirect)', async () => {
    for (const next of ['https://evil.example/', '//evil.example/', '/\\evil.example', 'javascript:alert(1)']) {
      const page = await newPage();
      await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(next)}`);
      await expect.poll(() => page.url(), UI_WAIT).toBe(`${base}/`);
      await page.getByRole('heading', { name: 'My workspaces' }).waitFor(UI_WAIT);
      await page.context().close();
    }
  }, 90_000);

  it('a wrong password is answered in words next to the form', async () => {
    const page = await newPage();
    await logIn(page, base, USER.email, 'not-the-password');
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor(UI_WAIT);
    expect(new URL(page.url()).pathname).toBe('/login');
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);
  it('the admin resets a password, renames and deletes a workspace (after confirming) and finds it under the deleted ones', async () => {
    const page = await newPage();
    await logIn(page, base, ADMIN_EMAIL, ADMIN_PASSWORD, '/login?next=%2Fmanage');
    await page.getByRole('heading', { name: 'Administration' }).waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'Reset password of viewer@example.com' }).click();
    const reset = page.getByRole('form', { name: 'New password for viewer@example.com' });
    await reset.getByLabel('New password').fill('viewer-new-password-1');
    await reset.getByRole('button', { name: 'Set password' }).click();
    await page.getByText('New password set for viewer@example.com').waitFor(UI_WAIT);
    const relogin = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'viewer@example.com', password: 'viewer-new-password-1' }),
    });
    expect(relogin.status).toBe(200);

    await page.getByRole('button', { name: 'Rename Secret' }).click();
    const renameForm = page.getByRole('form', { name: 'Rename Secret' });
    await renameForm.getByLabel('New name').fill('Archive');
    await renameForm.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('button', { name: 'Delete Archive' }).waitFor(UI_WAIT);
    // Dismissing the confirmation deletes nothing; accepting it deletes.
    page.once('dialog', (d) => void d.dismiss());
    await page.getByRole('button', { name: 'Delete Archive' }).click();
    await page.getByRole('button', { name: 'Rename Archive' }).waitFor(UI_WAIT);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete Archive' }).click();
    await page.getByRole('button', { name: 'Delete Archive' }).waitFor({ state: 'detached', ...UI_WAIT });
    await page.getByLabel('Show deleted workspaces').check();
    await page.getByText(/Archive \(deleted/).waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);
});
