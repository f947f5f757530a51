// End-to-end: the web app in Debian's Chromium (playwright-core) against the real platform: the
// backend on the test database, the gateway serving the built app (web/dist/app, built here if
// stale). The bootstrap admin creates a user, a workspace and the membership through the UI; the
// user uploads 20 MB with a progress bar that reaches 100 %, deletes the file and restores it
// from the trash; a viewer gets no write controls; an uploaded .html is downloaded, never run;
// `?next=` never leaves the platform; axe-core finds no serious or critical violation.
// Issue 16's later screens: previews (text, CSV, images, notebooks; SVG/HTML shown as source,
// never run), rename through WebDAV MOVE, a cancelled upload that leaves the old content and no
// version, a notebook run on a real kernel (runtime + worker started here) whose output, error
// traceback and image the run view shows, and schedules with the next five fire times.
// Needs /usr/bin/chromium (.ci/system-deps); it fails, never skips, without it.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '@codeagent/gateway';
import {
  addMembers,
  ADMIN_EMAIL,
  ADMIN_PASSWORD,
  bearer,
  createAndLogin,
  createWorkspace,
  INTERNAL_TOKEN,
  startTestBackend,
  type TestBackend,
} from '@codeagent/backend/testing';
import { Cron } from 'croner';
import pino from 'pino';
import { buildRuntimeApp } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { WorkspaceFiles } from '@codeagent/files';
import { platformRunIO, runtimeClient, ScheduleWorker } from '@codeagent/worker';

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

/** The editor's token (API calls beside the browser). */
async function tokenOf(base: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${base}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** A w×h PNG of one colour, built without an image library (zlib and CRC32): in the kernel (Python) and here. */
const PNG_PYTHON = [
  'import struct, zlib',
  'def png(w, h, rgb):',
  '    raw = b"".join(b"\\x00" + bytes(rgb) * w for _ in range(h))',
  '    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)',
  '    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")',
].join('\n');
function pngOf(w: number, h: number, rgb: [number, number, number]): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([Buffer.from(type), data])) >>> 0);
    return Buffer.concat([len, Buffer.from(type), data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: w }, () => rgb).flat())]);
  const raw = Buffer.concat(Array.from({ length: h }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const notebookOf = (cells: { cell_type?: string; source: string; outputs?: unknown[] }[]) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: cells.map((c, i) => ({
      cell_type: c.cell_type ?? 'code',
      id: `c${i}`,
      metadata: {},
      source: c.source,
      ...((c.cell_type ?? 'code') === 'code' ? { outputs: c.outputs ?? [], execution_count: null } : {}),
    })),
  });

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
    const page = await context.newPage();
    // An exception in the app fails no assertion by itself: print it, so a failing test says why.
    page.on('pageerror', (err) => console.error(`[page error] ${err.message}`));
    return page;
  };
  let ws = '';
  let backendUrl = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error('Debian chromium is missing: run .ci/system-deps (apt-get install chromium)');
    const built = spawnSync(process.execPath, [join(web, 'build.mjs')], { encoding: 'utf8', timeout: 120_000 });
    if (built.status !== 0) throw new Error(`node web/build.mjs failed:\n${built.stderr}`);
    b = await startTestBackend({ maxUploadBytes: 64 * MiB });
    backendUrl = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
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

  /** Every object path of a workspace, sorted (what the tests compare a page's actions with). */
  const objectPaths = async (space: string, token: string) => {
    const res = await fetch(`${base}/api/v1/data-resources/${space}/objects?prefix=`, { headers: bearer(token) });
    return ((await res.json()) as { items: { path: string }[] }).items.map((o) => o.path).sort();
  };
  /** One call of the objects API (PUT with a body, GET, DELETE) as `token`'s user. */
  const objectCall = (space: string, token: string, method: string, path: string, body?: string) =>
    fetch(`${base}/api/v1/data-resources/${space}/objects/${path}`, { method, headers: bearer(token), ...(body === undefined ? {} : { body }) });

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
    await page.getByRole('button', { name: 'Delete for good: dropped.txt' }).click();
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
    // The folder's row counts the files anywhere under it (the listing by folder, decision 0199).
    await expect.poll(async () => page.getByRole('row', { name: /reports\// }).textContent(), UI_WAIT).toContain('1 file');
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
    // Parameters (decision 0214): not a JSON object, said before sending; a name Python cannot
    // assign to, the server's 400 in words; nothing queued by either.
    const parameters = page.getByLabel('Parameters');
    await parameters.fill('[1, 2]');
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.getByText('Parameters must be a JSON object').waitFor(UI_WAIT);
    await parameters.fill('{"class": 1}');
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.getByText('parameters.class: is a Python keyword').waitFor(UI_WAIT);
    const none = await fetch(`${base}/api/v1/workspaces/${ws}/runs`, { headers: bearer(token) });
    expect(((await none.json()) as { items: unknown[] }).items).toEqual([]);
    await parameters.fill('{"n": 7, "region": "eu"}');
    await page.getByRole('button', { name: 'Run now' }).click();
    const row = page.getByRole('row').filter({ hasText: 'analysis.ipynb' });
    await row.locator('.status-queued').waitFor(UI_WAIT);
    const runs = await fetch(`${base}/api/v1/workspaces/${ws}/runs`, { headers: bearer(token) });
    const run = ((await runs.json()) as { items: { id: string; parameters: unknown }[] }).items[0]!;
    expect(run.parameters).toEqual({ n: 7, region: 'eu' });
    // No worker runs in this test: the run stays queued until the editor cancels it (after
    // confirming; dismissing changes nothing).
    const statusOf = async () =>
      ((await (await fetch(`${base}/api/v1/workspaces/${ws}/runs/${run.id}`, { headers: bearer(token) })).json()) as { status: string }).status;
    page.once('dialog', (d) => void d.dismiss());
    await row.getByRole('button', { name: /^Cancel the run of analysis.ipynb/ }).click();
    expect(await statusOf()).toBe('queued');
    page.once('dialog', (d) => void d.accept());
    await row.getByRole('button', { name: /^Cancel the run of analysis.ipynb/ }).click();
    await row.locator('.status-cancelled').waitFor(UI_WAIT);
    expect(await statusOf()).toBe('cancelled');
    // Only a queued or running run offers it.
    expect(await row.getByRole('button', { name: /^Cancel/ }).count()).toBe(0);
    await row.getByRole('button', { name: 'Log' }).click();
    await page.getByRole('complementary', { name: 'Run log' }).waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);

  it('an editor runs a notebook on a real kernel and sees its output, an image, and a failing run with its traceback', async () => {
    // The runtime (kernels in real sandboxes) and the schedule worker, started for this test only:
    // the test above relies on no worker claiming its run.
    const log = pino({ level: 'warn' });
    const kernels = await startTestKernels({
      log,
      uids: databaseUidAllocator(b.t.database.db, 1_930_000_000),
      sandbox: { uidBase: 1_930_000_000, filesMaxBytes: 64 * MiB },
    });
    const runtime = await buildRuntimeApp({ kernels: kernels.kernels, internalServiceToken: INTERNAL_TOKEN });
    const worker = new ScheduleWorker({
      db: b.t.database.db,
      io: platformRunIO(new WorkspaceFiles(b.t.database.db, b.store), backendUrl, INTERNAL_TOKEN),
      runtime: runtimeClient((await runtime.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, ''), INTERNAL_TOKEN),
      log,
      pollMs: 200,
      concurrency: 1,
      runTimeoutSeconds: 120,
      // A run copies the workspace's files into its sandbox: the 20 MB upload of an earlier test is among them.
      filesMaxBytes: 64 * MiB,
    });
    try {
      const token = await tokenOf(base, USER.email, USER.password);
      const put = async (path: string, body: string) =>
        (
          await fetch(`${base}/api/v1/data-resources/${ws}/objects/${path}`, {
            method: 'PUT',
            headers: { ...bearer(token), 'content-type': 'application/x-ipynb+json' },
            body,
          })
        ).status;
      expect(
        await put(
          'plots/chart.ipynb',
          notebookOf([
            { cell_type: 'markdown', source: '# A chart\n<script>never run</script>' },
            { source: 'print("hello from the kernel", 6 * 7)' },
            { source: `${PNG_PYTHON}\nfrom IPython.display import Image, display\ndisplay(Image(data=png(48, 32, (220, 40, 40))))` },
          ]),
        ),
      ).toBe(201);
      expect(await put('plots/broken.ipynb', notebookOf([{ source: 'x = 1' }, { source: 'def f():\n    return 1 / 0\nf()' }]))).toBe(201);
      expect(await put('plots/forever.ipynb', notebookOf([{ source: 'import time\nwhile True:\n    time.sleep(0.1)' }]))).toBe(201);
      worker.start();
      /** The newest run of `notebook` once it has ended, asked through the API (the page shows the same list). */
      const ended = async (notebook: string) => {
        const deadline = Date.now() + 180_000;
        for (;;) {
          const list = (await (await fetch(`${base}/api/v1/workspaces/${ws}/runs`, { headers: bearer(token) })).json()) as {
            items: { id: string; notebook_path: string; status: string; error: string | null }[];
          };
          const run = list.items.find((r) => r.notebook_path === notebook);
          if (run && !['queued', 'running'].includes(run.status)) {
            const log = await (await fetch(`${base}/api/v1/workspaces/${ws}/runs/${run.id}/log`, { headers: bearer(token) })).text();
            return { ...run, log };
          }
          if (Date.now() > deadline) throw new Error(`the run of ${notebook} did not end in time: ${JSON.stringify(run)}`);
          await new Promise((r) => setTimeout(r, 500));
        }
      };

      const page = await newPage();
      await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/runs`)}`);
      await page.getByRole('combobox', { name: /^Notebook/ }).selectOption('plots/chart.ipynb');
      await page.getByRole('button', { name: 'Run now' }).click();
      const row = page.getByRole('row').filter({ hasText: 'plots/chart.ipynb' });
      const chart = await ended('plots/chart.ipynb');
      expect(chart.status, JSON.stringify(chart)).toBe('succeeded');
      // The page polls while the run is queued or running: no reload.
      await row.locator('.status-succeeded').waitFor(UI_WAIT);
      await row.getByRole('button', { name: /^Log and output/ }).click();
      const panel = page.getByRole('complementary', { name: 'Run log and output' });
      const executed = panel.getByRole('region', { name: 'Executed notebook' });
      await executed.getByText('hello from the kernel 42').waitFor(UI_WAIT);
      // The image output is decoded by the browser (a data: URL of the kernel's PNG), 48×32.
      const img = executed.locator('img.nb-image');
      await expect.poll(() => img.evaluate((el: HTMLImageElement) => `${el.naturalWidth}x${el.naturalHeight}`), UI_WAIT).toBe('48x32');
      // Markdown is shown as its source, never as markup.
      await executed.getByText('<script>never run</script>').waitFor(UI_WAIT);
      expect(await page.locator('.notebook script').count()).toBe(0);
      expect(await panel.locator('pre.log').textContent()).toMatch(/claimed[\s\S]*started[\s\S]*finished/);
      const outputPath = `plots/chart.runs/${chart.id}.ipynb`;
      expect(await panel.getByRole('link', { name: 'Open it in JupyterLab' }).getAttribute('href')).toBe(`/jupyter/${ws}/lab/tree/${outputPath}`);
      await shot(page, 'run-output');
      expect(await seriousViolations(page)).toEqual([]);

      await page.getByRole('combobox', { name: /^Notebook/ }).selectOption('plots/broken.ipynb');
      await page.getByRole('button', { name: 'Run now' }).click();
      const badRow = page.getByRole('row').filter({ hasText: 'plots/broken.ipynb' });
      const broken = await ended('plots/broken.ipynb');
      expect(broken.status, JSON.stringify(broken)).toBe('failed');
      await badRow.locator('.status-failed').waitFor(UI_WAIT);
      await badRow.getByRole('button', { name: /^Log and output/ }).click();
      const error = page.getByRole('region', { name: 'Executed notebook' }).getByRole('group', { name: /ZeroDivisionError/ });
      await error.getByText('ZeroDivisionError: division by zero').first().waitFor(UI_WAIT);
      // The traceback, without ANSI colour codes.
      const traceback = (await error.locator('pre').textContent()) ?? '';
      expect(traceback).toMatch(/return 1 \/ 0/);
      expect(traceback).not.toContain('\u001b[');
      await shot(page, 'run-error');
      expect(await seriousViolations(page)).toEqual([]);

      // A run that would never end: cancelled from its row while running, its kernel stopped by
      // the worker, which is free for the next run.
      await page.getByRole('combobox', { name: /^Notebook/ }).selectOption('plots/forever.ipynb');
      await page.getByRole('button', { name: 'Run now' }).click();
      const foreverRow = page.getByRole('row').filter({ hasText: 'plots/forever.ipynb' });
      await foreverRow.locator('.status-running').waitFor({ timeout: 60_000 });
      page.once('dialog', (d) => void d.accept());
      await foreverRow.getByRole('button', { name: /^Cancel the run of plots\/forever.ipynb/ }).click();
      const forever = await ended('plots/forever.ipynb');
      expect(forever.status, JSON.stringify(forever)).toBe('cancelled');
      await foreverRow.locator('.status-cancelled').waitFor(UI_WAIT);
      // The worker noticed, stopped the kernel and wrote the run's log.
      const logOf = async (id: string) => (await fetch(`${base}/api/v1/workspaces/${ws}/runs/${id}/log`, { headers: bearer(token) })).text();
      await expect.poll(() => logOf(forever.id), { timeout: 30_000 }).toMatch(/cancelled while running; the kernel was stopped/);
      expect(await foreverRow.getByRole('button', { name: /^Cancel/ }).count()).toBe(0);
      await page.getByRole('combobox', { name: /^Notebook/ }).selectOption('plots/chart.ipynb');
      await page.getByRole('button', { name: 'Run now' }).click();
      await expect.poll(() => page.getByRole('row').filter({ hasText: 'plots/chart.ipynb' }).count(), UI_WAIT).toBe(2);
      const again = await ended('plots/chart.ipynb');
      expect(again.id).not.toBe(chart.id);
      expect(again.status, JSON.stringify(again)).toBe('succeeded');
    } finally {
      await worker.stop(5000);
      await runtime.close();
      await kernels.stop();
    }
  }, 480_000);

  it('schedules: the cron helper shows the next five fire times in the user’s zone, as the server computes them; enable, disable, change, delete', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US', timezoneId: 'America/New_York' });
    contexts.push(context);
    const page = await context.newPage();
    await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/runs`)}`);
    const form = page.getByRole('form', { name: 'New schedule' });
    await form.getByLabel('What to run').selectOption('analysis.ipynb');
    await form.getByLabel('Time zone').fill('Europe/Berlin');
    // Not a cron: said in words before anything is sent.
    await form.getByLabel('Cron').fill('every day');
    await form.getByText('It has 2 fields').waitFor(UI_WAIT);
    // A day its months lack: it would never run (the server refuses it too).
    await form.getByLabel('Cron').fill('0 0 31 4,6,9,11 *');
    await form.getByText('it would never run').waitFor(UI_WAIT);
    await form.getByLabel('Cron').fill('30 7 * * 1-5');
    const fires = form.getByRole('list', { name: 'Next five runs' }).getByRole('listitem');
    await expect.poll(() => fires.count(), UI_WAIT).toBe(5);
    const expected = new Cron('30 7 * * 1-5', { paused: true, timezone: 'Europe/Berlin' }).nextRuns(5).map((d) =>
      d.toLocaleString('en-US', {
        timeZone: 'America/New_York',
        weekday: 'short',
        year: 'numeric',
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
        timeZoneName: 'short',
      }),
    );
    expect(await fires.allTextContents()).toEqual(expected);
    await form.getByText('in your time zone (America/New_York)').waitFor(UI_WAIT);
    await shot(page, 'schedules');
    expect(await seriousViolations(page)).toEqual([]);
    await form.getByRole('button', { name: 'Add schedule' }).click();
    await page.getByRole('button', { name: 'Disable schedule 30 7 * * 1-5' }).waitFor(UI_WAIT);
    const token = await tokenOf(base, USER.email, USER.password);
    const schedules = async () =>
      (
        (await (await fetch(`${base}/api/v1/workspaces/${ws}/schedules`, { headers: bearer(token) })).json()) as {
          items: { cron: string; timezone: string; enabled: boolean; next_run_at: string | null }[];
        }
      ).items;
    // The server's next fire time is the helper's first.
    const [created] = await schedules();
    expect(created).toMatchObject({ cron: '30 7 * * 1-5', enabled: true });
    expect(Date.parse(created!.next_run_at!)).toBe(new Cron('30 7 * * 1-5', { paused: true, timezone: 'Europe/Berlin' }).nextRun()!.getTime());

    await page.getByRole('button', { name: 'Disable schedule 30 7 * * 1-5' }).click();
    await page.getByRole('button', { name: 'Enable schedule 30 7 * * 1-5' }).waitFor(UI_WAIT);
    expect((await schedules())[0]!.enabled).toBe(false);
    await page.getByRole('button', { name: 'Enable schedule 30 7 * * 1-5' }).click();
    await page.getByRole('button', { name: 'Disable schedule 30 7 * * 1-5' }).waitFor(UI_WAIT);
    expect((await schedules())[0]!.enabled).toBe(true);
    // Changed in place: the helper for the new cron, the server's refusal on the row, then saved.
    await page.getByRole('button', { name: 'Edit schedule 30 7 * * 1-5' }).click();
    const edit = page.getByRole('form', { name: 'Change schedule 30 7 * * 1-5' });
    await edit.getByLabel('Time zone').fill('Mars/Olympus_Mons');
    await edit.getByText('Mars/Olympus_Mons is not an IANA time zone').waitFor(UI_WAIT);
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('row').filter({ hasText: '30 7 * * 1-5' }).getByRole('alert').waitFor(UI_WAIT);
    expect((await schedules())[0]).toMatchObject({ cron: '30 7 * * 1-5', timezone: 'Europe/Berlin' });
    await edit.getByLabel('Time zone').fill('Asia/Tokyo');
    await edit.getByLabel('Cron').fill('45 8 * * 1-5');
    await expect.poll(() => edit.getByRole('list', { name: 'Next five runs' }).getByRole('listitem').count(), UI_WAIT).toBe(5);
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('button', { name: 'Disable schedule 45 8 * * 1-5' }).waitFor(UI_WAIT);
    expect(await page.getByRole('form', { name: /^Change schedule/ }).count()).toBe(0);
    const [changed] = await schedules();
    expect(changed).toMatchObject({ cron: '45 8 * * 1-5', timezone: 'Asia/Tokyo', enabled: true });
    expect(Date.parse(changed!.next_run_at!)).toBe(new Cron('45 8 * * 1-5', { paused: true, timezone: 'Asia/Tokyo' }).nextRun()!.getTime());
    expect(await seriousViolations(page)).toEqual([]);

    // Delete asks first: dismissing keeps it, accepting deletes it.
    page.once('dialog', (d) => void d.dismiss());
    await page.getByRole('button', { name: 'Delete schedule 45 8 * * 1-5' }).click();
    await page.getByRole('button', { name: 'Disable schedule 45 8 * * 1-5' }).waitFor(UI_WAIT);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete schedule 45 8 * * 1-5' }).click();
    await page.getByText('No schedules yet.').waitFor(UI_WAIT);
    expect(await schedules()).toEqual([]);
    // One disabled schedule stays, for the viewer's test.
    const kept = await fetch(`${base}/api/v1/workspaces/${ws}/schedules`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: JSON.stringify({ notebook_path: 'analysis.ipynb', cron: '0 0 1 1 *', enabled: false }),
    });
    expect(kept.status).toBe(201);
  }, 90_000);

  it('previews text, CSV, images and notebooks; SVG and HTML are shown as source and never run; rename moves a file with its versions', async () => {
    const token = await tokenOf(base, USER.email, USER.password);
    const put = async (path: string, body: string | Buffer, type: string) => {
      const res = await fetch(`${base}/api/v1/data-resources/${ws}/objects/${path}`, {
        method: 'PUT',
        headers: { ...bearer(token), 'content-type': type },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      expect(res.status, path).toBeLessThan(300);
    };
    await put('preview/table.csv', 'city,population\n"Berlin, DE",3850809\nParis,2102650\n"Say ""hi""",1\n', 'text/csv');
    await put('preview/photo.png', pngOf(64, 40, [30, 120, 220]), 'image/png');
    await put('preview/readme.txt', 'plain words\n<b>not bold</b>\n', 'text/plain');
    const hostile = `fetch("/api/v1/pwned-by-preview",{method:"POST"})`;
    await put(
      'preview/evil.svg',
      `<svg xmlns="http://www.w3.org/2000/svg" onload='${hostile}'><script>${hostile}</script><circle r="5"/></svg>`,
      'image/svg+xml',
    );
    await put('preview/evil.html', `<!doctype html><img src=x onerror='${hostile}'><script>${hostile}</script>`, 'text/html');
    await put(
      'preview/outputs.ipynb',
      notebookOf([
        {
          source: 'show()',
          outputs: [
            { output_type: 'display_data', metadata: {}, data: { 'text/html': `<img src=x onerror='${hostile}'>` } },
            { output_type: 'display_data', metadata: {}, data: { 'image/svg+xml': `<svg onload='${hostile}'></svg>`, 'text/plain': '<Figure with an SVG>' } },
            { output_type: 'stream', name: 'stdout', text: ['line one\n', 'line two\n'] },
            { output_type: 'display_data', metadata: {}, data: { 'image/png': 'javascript:alert(1)' } },
          ],
        },
      ]),
      'application/x-ipynb+json',
    );

    const page = await newPage();
    const pwned: string[] = [];
    page.context().on('request', (r) => {
      if (r.url().includes('pwned-by-preview')) pwned.push(r.url());
    });
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/files/preview/`)}`);
    const panel = page.getByRole('complementary', { name: /^Preview of/ });

    await page.getByRole('button', { name: 'Preview table.csv' }).click();
    const table = panel.getByRole('table', { name: 'First rows of table.csv' });
    await table.waitFor(UI_WAIT);
    expect(await table.getByRole('columnheader').allTextContents()).toEqual(['city', 'population']);
    expect(await table.getByRole('cell').allTextContents()).toEqual(['Berlin, DE', '3850809', 'Paris', '2102650', 'Say "hi"', '1']);
    await shot(page, 'preview-csv');
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Preview photo.png' }).click();
    const photo = panel.getByRole('img', { name: 'Preview of photo.png' });
    await expect.poll(() => photo.evaluate((el: HTMLImageElement) => `${el.naturalWidth}x${el.naturalHeight}`), UI_WAIT).toBe('64x40');

    await page.getByRole('button', { name: 'Preview readme.txt' }).click();
    await expect.poll(() => panel.getByTestId('preview-text').textContent(), UI_WAIT).toBe('plain words\n<b>not bold</b>\n');

    for (const name of ['evil.svg', 'evil.html']) {
      await page.getByRole('button', { name: `Preview ${name}` }).click();
      await expect.poll(() => panel.getByTestId('preview-text').textContent(), UI_WAIT).toContain(`<script>${hostile}</script>`);
      expect(await panel.locator('img, svg, iframe, object, embed').count()).toBe(0);
    }

    await page.getByRole('button', { name: 'Preview outputs.ipynb' }).click();
    const cells = panel.getByRole('region', { name: 'Cells of outputs.ipynb' });
    await cells.getByText('line one').waitFor(UI_WAIT);
    await cells.getByText('(text/html output not shown here').waitFor(UI_WAIT);
    await cells.getByText('<Figure with an SVG>').waitFor(UI_WAIT);
    // Neither the HTML nor the SVG became elements, and a crafted "image" is no URL at all.
    expect(await cells.locator('img, svg, iframe, script').count()).toBe(0);
    await shot(page, 'preview-notebook');
    expect(await seriousViolations(page)).toEqual([]);
    await page.waitForTimeout(500);
    expect(pwned).toEqual([]);
    expect(dialogs).toEqual([]);

    // Rename (WebDAV MOVE): a new folder moves it; its versions go along.
    await put('preview/readme.txt', 'second text', 'text/plain');
    await page.reload();
    await page.getByRole('button', { name: 'Rename readme.txt' }).click();
    const rename = page.getByRole('form', { name: 'Rename preview/readme.txt' });
    // An existing path is never overwritten from here.
    await rename.getByLabel('New path').fill('preview/table.csv');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await rename.getByText('preview/table.csv already exists').waitFor(UI_WAIT);
    await rename.getByLabel('New path').fill('archive/readme-old.txt');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await rename.waitFor({ state: 'detached', ...UI_WAIT });
    await page.getByRole('button', { name: 'Preview readme.txt' }).waitFor({ state: 'detached', ...UI_WAIT });
    const moved = await fetch(`${base}/api/v1/data-resources/${ws}/objects/archive/readme-old.txt`, { headers: bearer(token) });
    expect(await moved.text()).toBe('second text');
    const versions = await fetch(`${base}/api/v1/data-resources/${ws}/versions/archive/readme-old.txt`, { headers: bearer(token) });
    expect(((await versions.json()) as { items: unknown[] }).items.length).toBeGreaterThanOrEqual(1);
    expect((await fetch(`${base}/api/v1/data-resources/${ws}/objects/preview/readme.txt`, { headers: bearer(token) })).status).toBe(404);
  }, 90_000);

  it('a cancelled upload leaves the old content intact and adds no version', async () => {
    const token = await tokenOf(base, USER.email, USER.password);
    const url = `${base}/api/v1/data-resources/${ws}/objects/cancel/data.bin`;
    expect((await fetch(url, { method: 'PUT', headers: bearer(token), body: 'the old content' })).status).toBe(201);
    const page = await newPage();
    await logIn(page, base, USER.email, USER.password, `/login?next=${encodeURIComponent(`/workspaces/${ws}/files/cancel/`)}`);
    await page.getByRole('link', { name: 'data.bin' }).first().waitFor(UI_WAIT);
    // A slow link (DevTools throttling), so that the upload is still under way when cancelled.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 20, downloadThroughput: -1, uploadThroughput: 1 * MiB });
    const big = join(files, 'data.bin');
    writeFileSync(big, Buffer.alloc(48 * MiB, 9));
    await page.getByTestId('file-input').setInputFiles(big);
    const row = page.locator('.upload').filter({ hasText: 'data.bin' });
    await expect.poll(async () => Number.parseInt((await row.getByTestId('upload-percent').textContent()) ?? '0', 10), { timeout: 30_000 }).toBeGreaterThan(0);
    await row.getByRole('button', { name: 'Cancel upload of data.bin' }).click();
    await row.getByText('Upload cancelled.').waitFor(UI_WAIT);
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    // The server sees the body break off; give it a moment, then: the old content, no version.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await (await fetch(url, { headers: bearer(token) })).text()).toBe('the old content');
    const versions = await fetch(`${base}/api/v1/data-resources/${ws}/versions/cancel/data.bin`, { headers: bearer(token) });
    // The list shows the current content only (as `current`): no version was added.
    expect(((await versions.json()) as { items: { current: boolean; size: number }[] }).items).toEqual([
      expect.objectContaining({ current: true, size: 'the old content'.length }),
    ]);
    await shot(page, 'upload-cancelled');
  }, 90_000);

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
    expect(await page.getByRole('button', { name: /^Rename/ }).count()).toBe(0);
    // A notebook opens in the workspace's JupyterLab (read-only for a viewer, decision 0101); other files do not offer it.
    expect(await page.getByRole('link', { name: 'Open in JupyterLab: analysis.ipynb' }).getAttribute('href')).toBe(`/jupyter/${ws}/lab/tree/analysis.ipynb`);
    expect(await page.getByRole('link', { name: 'Open in JupyterLab: measurements.bin' }).count()).toBe(0);
    // A viewer may preview, but a MOVE sent by hand is refused by the server.
    await page.getByRole('button', { name: 'Preview analysis.ipynb' }).click();
    await page.getByRole('region', { name: 'Cells of analysis.ipynb' }).getByText('print(1)').waitFor(UI_WAIT);
    const move = await page.evaluate(
      async (w) =>
        (await fetch(`/api/v1/dav/${w}/analysis.ipynb`, { method: 'MOVE', headers: { destination: `${location.origin}/api/v1/dav/${w}/stolen.ipynb` } }))
          .status,
      ws,
    );
    expect(move).toBe(403);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Trash' }).click();
    await page.getByText('The trash is empty').waitFor(UI_WAIT);
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Runs' }).click();
    await page.getByRole('row').filter({ hasText: 'analysis.ipynb' }).locator('.status-cancelled').waitFor(UI_WAIT);
    expect(await page.getByRole('button', { name: 'Run now' }).count()).toBe(0);
    // Schedules: seen, not changed.
    await page.getByRole('cell', { name: '0 0 1 1 *' }).waitFor(UI_WAIT);
    expect(await page.getByRole('form', { name: 'New schedule' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /schedule/ }).count()).toBe(0);
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
  it('a user changes their own password on the account page: other sessions end, this one stays; mistakes are said, nothing changed', async () => {
    const user = await createAndLogin(b, 'changes-own@example.com');
    const me = (token: string) => fetch(`${base}/api/v1/auth/me`, { headers: bearer(token) }).then((r) => r.status);
    expect(await me(user.token)).toBe(200);
    const page = await newPage();
    await logIn(page, base, 'changes-own@example.com', 'password-123');
    await page.getByRole('heading', { name: 'My workspaces' }).waitFor(UI_WAIT);
    await page.getByRole('link', { name: 'changes-own@example.com' }).click();
    await page.getByRole('heading', { name: 'Your account' }).waitFor(UI_WAIT);
    expect(await page.title()).toMatch(/^Your account/);
    const form = page.getByRole('form', { name: 'Change your password' });
    const fill = async (current: string, next: string, repeat: string) => {
      await form.getByLabel('Current password').fill(current);
      await form.getByLabel('New password', { exact: true }).fill(next);
      await form.getByLabel('Repeat the new password').fill(repeat);
      await form.getByRole('button', { name: 'Change password' }).click();
    };
    // Said before anything is sent.
    await fill('password-123', 'short', 'short');
    await form.getByRole('alert').filter({ hasText: 'at least 8 characters' }).waitFor(UI_WAIT);
    await fill('password-123', 'a-new-password-1', 'a-new-password-2');
    await form.getByRole('alert').filter({ hasText: 'The two new passwords differ' }).waitFor(UI_WAIT);
    // The server's answer for a wrong current password: in words, and the account is unchanged.
    await fill('not-the-password', 'a-new-password-1', 'a-new-password-1');
    await form.getByRole('alert').filter({ hasText: 'The current password is wrong.' }).waitFor(UI_WAIT);
    expect(await tokenOf(base, 'changes-own@example.com', 'password-123')).toBeTruthy();
    expect(await me(user.token)).toBe(200);
    expect(await seriousViolations(page)).toEqual([]);

    await fill('password-123', 'a-new-password-1', 'a-new-password-1');
    await page.getByRole('status').filter({ hasText: 'Password changed.' }).waitFor(UI_WAIT);
    expect(await form.getByLabel('Current password').inputValue()).toBe('');
    // The session of another login (the API token) ended; the page's own goes on.
    expect(await me(user.token)).toBe(401);
    const fromPage = await page.evaluate(async () => (await fetch('/api/v1/auth/me')).status);
    expect(fromPage).toBe(200);
    await page.getByRole('link', { name: 'Workspaces' }).click();
    await page.getByRole('heading', { name: 'My workspaces' }).waitFor(UI_WAIT);
    const oldLogin = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'changes-own@example.com', password: 'password-123' }),
    });
    expect(oldLogin.status).toBe(401);
    expect(await tokenOf(base, 'changes-own@example.com', 'a-new-password-1')).toBeTruthy();
  }, 60_000);

  it('the admin makes a user a system administrator and back, and deletes users; the last admin of a workspace stays, said in words', async () => {
    const promoted = await createAndLogin(b, 'promoted@example.com');
    const keeper = await createAndLogin(b, 'keeper@example.com');
    // A workspace whose last admin is keeper: made by another system admin, who then leaves it
    // (removed by the bootstrap admin: nobody removes themselves).
    const founder = await createAndLogin(b, 'founder@example.com', 'admin');
    const made = await fetch(`${base}/api/v1/platform/workspaces`, {
      method: 'POST',
      headers: { ...bearer(founder.token), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Solo' }),
    });
    const solo = ((await made.json()) as { id: string }).id;
    await addMembers(b, solo, [[keeper, 'admin']]);
    expect((await fetch(`${base}/api/v1/platform/workspaces/${solo}/members/${founder.id}`, { method: 'DELETE', headers: bearer(b.adminToken) })).status).toBe(
      204,
    );
    const isAdmin = async (token: string) =>
      ((await (await fetch(`${base}/api/v1/auth/me`, { headers: bearer(token) })).json()) as { is_system_admin: boolean }).is_system_admin;
    const page = await newPage();
    await logIn(page, base, ADMIN_EMAIL, ADMIN_PASSWORD, '/login?next=%2Fmanage');
    await page.getByRole('heading', { name: 'Administration' }).waitFor(UI_WAIT);
    const row = (email: string) => page.getByRole('table', { name: 'Users' }).getByRole('row').filter({ hasText: email });

    // Asked first; dismissing changes nothing.
    page.once('dialog', (d) => void d.dismiss());
    await page.getByRole('button', { name: 'Make system admin: promoted@example.com' }).click();
    expect(await isAdmin(promoted.token)).toBe(false);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Make system admin: promoted@example.com' }).click();
    await row('promoted@example.com').getByRole('cell', { name: 'system admin', exact: true }).waitFor(UI_WAIT);
    expect(await isAdmin(promoted.token)).toBe(true);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Make user: promoted@example.com' }).click();
    await row('promoted@example.com').getByRole('cell', { name: 'user', exact: true }).waitFor(UI_WAIT);
    expect(await isAdmin(promoted.token)).toBe(false);

    // The last admin of a workspace is not deleted: the refusal on its row, the user still there.
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete keeper@example.com' }).click();
    await row('keeper@example.com').getByRole('alert').filter({ hasText: 'last admin of the workspace' }).waitFor(UI_WAIT);
    expect(await tokenOf(base, 'keeper@example.com', 'password-123')).toBeTruthy();
    expect(await seriousViolations(page)).toEqual([]);

    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete promoted@example.com' }).click();
    await page.getByRole('status').filter({ hasText: 'Deleted promoted@example.com.' }).waitFor(UI_WAIT);
    await expect.poll(() => row('promoted@example.com').count(), UI_WAIT).toBe(0);
    expect((await fetch(`${base}/api/v1/auth/me`, { headers: bearer(promoted.token) })).status).toBe(401);
    // Nothing of the kind is offered on the admin's own row.
    expect(await page.getByRole('button', { name: `Delete ${ADMIN_EMAIL}` }).count()).toBe(0);
    expect(await page.getByRole('button', { name: `Make user: ${ADMIN_EMAIL}` }).count()).toBe(0);
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

  it('the run form offers a notebook that sorts after a thousand other files (decision 0203)', async () => {
    const owner = await createAndLogin(b, 'many-files@example.com');
    const many = await createWorkspace(b, 'Many files');
    await addMembers(b, many, [[owner, 'editor']]);
    const row = (path: string) => ({ workspace_id: many, path, version_id: randomUUID(), size: 1, sha256: '0'.repeat(64), content_type: 'text/csv' });
    // Rows only: the form lists paths. The form read the first 1 000 objects and found none here.
    await b.t.database.db
      .insertInto('objects')
      .values([
        ...Array.from({ length: 1500 }, (_, i) => row(`data/${String(i).padStart(4, '0')}.csv`)),
        row('reports/weekly.ipynb'),
        row('reports/weekly.runs/1.ipynb'),
      ])
      .execute();
    const page = await newPage();
    await logIn(page, base, 'many-files@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${many}/runs`)}`);
    await page.getByLabel('Notebook').waitFor(UI_WAIT);
    expect(await page.getByLabel('Notebook').inputValue()).toBe('reports/weekly.ipynb');
    // The executed copy a run keeps is not offered.
    expect(await page.getByLabel('Notebook').locator('option').allTextContents()).toEqual(['reports/weekly.ipynb']);
  }, 60_000);

  it('a folder of 2 500 files shows its first page of 1 000 while the rest arrives, then all of them', async () => {
    const owner = await createAndLogin(b, 'long@example.com');
    const long = await createWorkspace(b, 'Long folder');
    await addMembers(b, long, [[owner, 'viewer']]);
    const name = (i: number) => `g-${String(i).padStart(4, '0')}.csv`;
    // Rows only: the listing reads no content.
    await b.t.database.db
      .insertInto('objects')
      .values(
        Array.from({ length: 2500 }, (_, i) => ({
          workspace_id: long,
          path: name(i),
          version_id: randomUUID(),
          size: 1,
          sha256: '0'.repeat(64),
          content_type: 'text/csv',
        })),
      )
      .execute();
    const page = await newPage();
    // The pages after the first wait until the test lets them through.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route(/\/objects\?.*cursor=/, async (route) => {
      await held;
      await route.continue();
    });
    await logIn(page, base, 'long@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${long}/files/`)}`);
    const table = page.locator('table.files-table');
    await page.getByRole('link', { name: name(0), exact: true }).waitFor(UI_WAIT);
    expect(await table.getAttribute('aria-rowcount')).toBe('1001');
    await page.getByText('Loading the rest of this folder… 1,000 files and folders so far.').waitFor(UI_WAIT);
    release();
    await expect.poll(() => table.getAttribute('aria-rowcount'), UI_WAIT).toBe('2501');
    expect(await page.getByText(/Loading the rest of this folder/).count()).toBe(0);
    expect(await page.getByText(/only those are listed here/).count()).toBe(0);
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.getByRole('link', { name: name(2499), exact: true }).waitFor(UI_WAIT);
  }, 120_000);

  it('a folder of 400 files shows its first screen at once and every file on scrolling; search, sort and delete reach rows far down', async () => {
    const owner = await createAndLogin(b, 'many@example.com');
    const many = await createWorkspace(b, 'Many files');
    await addMembers(b, many, [[owner, 'editor']]);
    const name = (i: number) => `f-${String(i).padStart(3, '0')}.csv`;
    for (let i = 0; i < 400; i += 20) {
      const puts = await Promise.all(
        Array.from({ length: 20 }, (_, k) =>
          b.app.inject({
            method: 'PUT',
            url: `/api/v1/data-resources/${many}/objects/${name(i + k)}`,
            headers: { ...bearer(owner.token), 'content-type': 'text/csv' },
            payload: `n\n${i + k}\n`,
          }),
        ),
      );
      expect(puts.map((r) => r.statusCode).filter((s) => s !== 201)).toEqual([]);
    }
    const page = await newPage();
    await logIn(page, base, 'many@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${many}/files/`)}`);
    const table = page.locator('table.files-table');
    await page.getByRole('link', { name: name(0), exact: true }).waitFor(UI_WAIT);
    // The whole listing is announced (header + 400 rows), but only the rows near the window are built.
    expect(await table.getAttribute('aria-rowcount')).toBe('401');
    const built = await table.locator('tbody tr:not(.spacer)').count();
    expect(built).toBeGreaterThan(15);
    expect(built).toBeLessThan(120);
    expect(await page.getByRole('link', { name: name(399), exact: true }).count()).toBe(0);
    // The page is as tall as the whole listing, and scrolling to its end shows the last file.
    expect(await page.evaluate(() => document.documentElement.scrollHeight)).toBeGreaterThan(400 * 30);
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.getByRole('link', { name: name(399), exact: true }).waitFor(UI_WAIT);
    expect(await page.getByRole('link', { name: name(0), exact: true }).count()).toBe(0);
    expect(
      await page
        .getByRole('link', { name: name(399), exact: true })
        .locator('xpath=ancestor::tr')
        .getAttribute('aria-rowindex'),
    ).toBe('401');
    expect(await seriousViolations(page)).toEqual([]);
    // A row built on scrolling works like any other: delete the last file.
    await page.getByRole('button', { name: `Delete ${name(399)}` }).click();
    await expect.poll(() => table.getAttribute('aria-rowcount'), UI_WAIT).toBe('400');
    expect(await page.getByRole('link', { name: name(399), exact: true }).count()).toBe(0);
    // Search and sort work on every file, built or not.
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.getByRole('searchbox').fill('f-25');
    await page.getByRole('link', { name: name(250), exact: true }).waitFor(UI_WAIT);
    expect(await table.locator('tbody tr:not(.spacer)').count()).toBe(10);
    await page.getByRole('searchbox').fill('');
    await page.getByRole('button', { name: /^Name/ }).click();
    await expect.poll(() => table.locator('tbody tr:not(.spacer)').first().textContent(), UI_WAIT).toContain(name(398));
    const list = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${many}/objects?limit=1000`, headers: bearer(owner.token) });
    expect(list.json<{ items: { path: string }[] }>().items).toHaveLength(399);
  }, 120_000);

  it('coming back to the page after a while shows what changed meanwhile: a notebook made elsewhere in the run form, a file in the folder', async () => {
    const owner = await createAndLogin(b, 'returns@example.com');
    const space = await createWorkspace(b, 'Elsewhere');
    await addMembers(b, space, [[owner, 'editor']]);
    const put = async (path: string, body: string) =>
      (await fetch(`${base}/api/v1/data-resources/${space}/objects/${path}`, { method: 'PUT', headers: bearer(owner.token), body })).status;
    expect(await put('first.ipynb', notebookOf([{ source: '1+1' }]))).toBe(201);
    const page = await newPage();
    let notebookLists = 0;
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname === `/api/v1/data-resources/${space}/objects` && url.searchParams.get('kind') === 'notebook') notebookLists++;
    });
    /** The reader goes to another window for `ms`, then comes back. */
    const awayFor = async (ms: number) => {
      await page.evaluate(() => window.dispatchEvent(new Event('blur')));
      await page.waitForTimeout(ms);
      await page.evaluate(() => window.dispatchEvent(new Event('focus')));
    };
    await logIn(page, base, 'returns@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/runs`)}`);
    await page.getByRole('button', { name: 'Run now' }).waitFor(UI_WAIT);
    const offered = () => page.getByLabel('Notebook').locator('option', { hasText: 'made-in-jupyterlab.ipynb' }).count();
    expect(await put('made-in-jupyterlab.ipynb', notebookOf([{ source: '2+2' }]))).toBe(201);
    // A glance away (a dialog, a click elsewhere) reloads nothing.
    const before = notebookLists;
    await awayFor(50);
    await page.waitForTimeout(300);
    expect(notebookLists).toBe(before);
    expect(await offered()).toBe(0);
    await awayFor(1200);
    await expect.poll(offered, UI_WAIT).toBe(1);
    expect(notebookLists).toBe(before + 1);

    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Files' }).click();
    await page.getByRole('link', { name: 'first.ipynb' }).first().waitFor(UI_WAIT);
    expect(await put('written-by-a-run.csv', 'a,b\n1,2\n')).toBe(201);
    await awayFor(1200);
    await page.getByRole('link', { name: 'written-by-a-run.csv' }).first().waitFor(UI_WAIT);
  }, 60_000);

  it('the runs page shows the newest 100 runs, older ones on demand, and the runs of one status', async () => {
    const owner = await createAndLogin(b, 'history@example.com');
    const space = await createWorkspace(b, 'History');
    await addMembers(b, space, [[owner, 'viewer']]);
    // A schedule's history, written as the worker would: 230 finished runs, every tenth failed.
    const start = Date.parse('2026-01-01T00:00:00Z');
    await b.t.database.db
      .insertInto('runs')
      .values(
        Array.from({ length: 230 }, (_, i) => ({
          workspace_id: space,
          notebook_path: `daily/report-${String(i).padStart(3, '0')}.ipynb`,
          status: i % 10 === 0 ? ('failed' as const) : ('succeeded' as const),
          error: i % 10 === 0 ? 'NameError' : null,
          created_at: new Date(start + i * 60_000),
          started_at: new Date(start + i * 60_000),
          finished_at: new Date(start + i * 60_000 + 1000),
        })),
      )
      .execute();
    const page = await newPage();
    await logIn(page, base, 'history@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/runs`)}`);
    const rows = page.getByRole('table', { name: 'Runs, newest first' }).getByRole('row').filter({ hasText: 'daily/report-' });
    await expect.poll(() => rows.count(), UI_WAIT).toBe(100);
    expect(await rows.first().textContent()).toContain('report-229');
    await page.getByText('The newest 100 are shown.').waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'Show older runs' }).click();
    await expect.poll(() => rows.count(), UI_WAIT).toBe(200);
    await page.getByRole('button', { name: 'Show older runs' }).click();
    await expect.poll(() => rows.count(), UI_WAIT).toBe(230);
    expect(await rows.last().textContent()).toContain('report-000');
    expect(await page.getByRole('button', { name: 'Show older runs' }).count()).toBe(0);
    // Only the failed ones: 23, newest first.
    await page.getByLabel('Status').selectOption('failed');
    await expect.poll(() => rows.count(), UI_WAIT).toBe(23);
    expect(await rows.locator('.status-succeeded').count()).toBe(0);
    expect(await rows.first().textContent()).toContain('report-220');
    await page.getByLabel('Status').selectOption('running');
    await page.getByText('No running runs.').waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);

  it('an editor makes a new folder and lands in it, ready to upload; a taken name and a slash are said in words; a viewer has no such button', async () => {
    const editor = await createAndLogin(b, 'folders@example.com');
    const reader = await createAndLogin(b, 'folder-reader@example.com');
    const space = await createWorkspace(b, 'Folders');
    await addMembers(b, space, [
      [editor, 'editor'],
      [reader, 'viewer'],
    ]);
    const page = await newPage();
    await logIn(page, base, 'folders@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/`)}`);
    await page.getByRole('button', { name: 'Upload files' }).waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'New folder' }).click();
    const form = page.getByRole('form', { name: 'New folder' });
    await form.getByLabel('Folder name').fill('a/b');
    await form.getByRole('button', { name: 'Create folder' }).click();
    await form.getByRole('alert').filter({ hasText: 'a name without /' }).waitFor(UI_WAIT);
    await form.getByLabel('Folder name').fill('reports 2026');
    await form.getByRole('button', { name: 'Create folder' }).click();
    await expect.poll(() => new URL(page.url()).pathname, UI_WAIT).toBe(`/workspaces/${space}/files/reports%202026/`);
    await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByText('reports 2026').waitFor(UI_WAIT);
    // Empty, ready for uploads: the object that keeps the folder is not shown as a file.
    await page.getByText('No files here yet.').waitFor(UI_WAIT);
    expect(await page.getByText('.codeagent-folder').count()).toBe(0);
    // Back at the top the folder is listed; the same name again is refused in words.
    await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByRole('link').first().click();
    await page.getByRole('link', { name: 'reports 2026' }).first().waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'New folder' }).click();
    await form.getByLabel('Folder name').fill('reports 2026');
    await form.getByRole('button', { name: 'Create folder' }).click();
    await form.getByRole('alert').filter({ hasText: 'reports 2026 exists already here' }).waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);

    const viewer = await newPage();
    await logIn(viewer, base, 'folder-reader@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/`)}`);
    await viewer.getByRole('link', { name: 'reports 2026' }).first().waitFor(UI_WAIT);
    expect(await viewer.getByRole('button', { name: 'New folder' }).count()).toBe(0);
  }, 60_000);

  it('an editor renames a folder with everything in it, and deletes one (after confirming) to the trash, which lists its files and the folder itself', async () => {
    const editor = await createAndLogin(b, 'folder-mover@example.com');
    const space = await createWorkspace(b, 'Folder moves');
    await addMembers(b, space, [[editor, 'editor']]);
    const dav = (method: string, path: string, headers: Record<string, string> = {}) =>
      fetch(`${base}/api/v1/dav/${space}/${path}`, { method, headers: { ...bearer(editor.token), ...headers } });
    for (const [path, body] of [
      ['data/a.csv', 'x,y\n1,2\n'],
      ['data/deep/b.txt', 'b'],
      ['taken/c.txt', 'c'],
    ] as const) {
      const res = await fetch(`${base}/api/v1/data-resources/${space}/objects/${path}`, { method: 'PUT', headers: bearer(editor.token), body });
      expect(res.status).toBe(201);
    }
    expect((await dav('MKCOL', 'empty')).status).toBe(201);
    const paths = () => objectPaths(space, editor.token);
    const page = await newPage();
    const dialogs: string[] = [];
    let accept = false;
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void (accept ? d.accept() : d.dismiss());
    });
    await logIn(page, base, 'folder-mover@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/`)}`);
    await page.getByRole('button', { name: 'Rename folder data' }).click();
    const rename = page.getByRole('form', { name: 'Rename data' });
    // Onto a folder that exists: refused in words, nothing moved.
    await rename.getByLabel('New path').fill('taken/');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await rename.getByText('taken already exists').waitFor(UI_WAIT);
    await rename.getByLabel('New path').fill('archive/data-2025/');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await rename.waitFor({ state: 'detached', ...UI_WAIT });
    await page.getByRole('link', { name: 'archive/' }).waitFor(UI_WAIT);
    expect(await page.getByRole('link', { name: 'data/' }).count()).toBe(0);
    expect(await paths()).toEqual(['archive/data-2025/a.csv', 'archive/data-2025/deep/b.txt', 'empty/.codeagent-folder', 'taken/c.txt']);

    // A folder, and the whole workspace, download as one zip (decision 0226).
    const [zipped] = await Promise.all([page.waitForEvent('download', UI_WAIT), page.getByRole('link', { name: 'Download folder archive as zip' }).click()]);
    expect(zipped.suggestedFilename()).toBe('archive.zip');
    const zipPath = await zipped.path();
    const listed = spawnSync('python3', ['-c', 'import sys, zipfile; print("\\n".join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))', zipPath], {
      encoding: 'utf8',
    });
    expect(listed.stdout.trim().split('\n')).toEqual(['data-2025/a.csv', 'data-2025/deep/b.txt']);
    const [all] = await Promise.all([page.waitForEvent('download', UI_WAIT), page.getByRole('link', { name: 'Download all as zip' }).click()]);
    expect(all.suggestedFilename()).toBe('Folder moves.zip');
    // A folder emptied since the page listed it: the refusal is said on its row (asked with HEAD,
    // decision 0229), and nothing is downloaded.
    expect((await objectCall(space, editor.token, 'PUT', 'gone/d.txt', 'd')).status).toBe(201);
    await page.reload();
    await page.getByRole('link', { name: 'gone/' }).waitFor(UI_WAIT);
    expect((await objectCall(space, editor.token, 'DELETE', 'gone/d.txt')).status).toBe(204);
    let downloads = 0;
    page.on('download', () => downloads++);
    await page.getByRole('link', { name: 'Download folder gone as zip' }).click();
    await page.getByRole('alert').filter({ hasText: 'gone/ holds no files any more' }).waitFor(UI_WAIT);
    expect(downloads).toBe(0);

    // Delete: nothing happens until the user confirms.
    await page.getByRole('button', { name: 'Delete folder taken' }).click();
    await expect.poll(() => dialogs.length, UI_WAIT).toBe(1);
    expect(dialogs[0]).toContain('Move the folder taken and everything in it to the trash?');
    expect(await paths()).toContain('taken/c.txt');
    accept = true;
    await page.getByRole('button', { name: 'Delete folder taken' }).click();
    await page.getByRole('button', { name: 'Delete folder empty' }).click();
    await expect.poll(() => paths(), UI_WAIT).toEqual(['archive/data-2025/a.csv', 'archive/data-2025/deep/b.txt']);
    await expect.poll(() => page.getByRole('link', { name: 'taken/' }).count(), UI_WAIT).toBe(0);
    await expect.poll(() => page.getByRole('link', { name: 'empty/' }).count(), UI_WAIT).toBe(0);

    // The trash lists the file and the empty folder as the folder (not its marker); restoring it brings the folder back.
    await page.getByRole('navigation', { name: 'Workspace' }).getByRole('link', { name: 'Trash' }).click();
    await page.getByRole('button', { name: 'Restore taken/c.txt' }).waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'Restore empty/' }).click();
    await expect.poll(() => paths(), UI_WAIT).toContain('empty/.codeagent-folder');
    expect(await page.getByText('.codeagent-folder').count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);

  it('members see who is in the workspace, and who changed a file, deleted one and started a run; someone who left is a former member', async () => {
    const ada = await createAndLogin(b, 'who-ada@example.com');
    const bob = await createAndLogin(b, 'who-bob@example.com');
    const space = await createWorkspace(b, 'Who did it');
    await addMembers(b, space, [
      [ada, 'editor'],
      [bob, 'viewer'],
    ]);
    const object = (method: string, path: string, body?: string) => objectCall(space, ada.token, method, path, body);
    expect((await object('PUT', 'report.csv', 'a,b\n1,2\n')).status).toBe(201);
    expect((await object('PUT', 'report.csv', 'a,b\n3,4\n')).status).toBe(200);
    expect((await object('PUT', 'gone.txt', 'bye')).status).toBe(201);
    expect((await object('DELETE', 'gone.txt')).status).toBe(204);
    expect((await object('PUT', 'daily.ipynb', notebookOf([{ source: '1+1' }]))).status).toBe(201);
    const run = await fetch(`${base}/api/v1/workspaces/${space}/runs`, {
      method: 'POST',
      headers: { ...bearer(ada.token), 'content-type': 'application/json' },
      body: JSON.stringify({ notebook_path: 'daily.ipynb' }),
    });
    expect(run.status).toBe(202);
    const schedule = await fetch(`${base}/api/v1/workspaces/${space}/schedules`, {
      method: 'POST',
      headers: { ...bearer(ada.token), 'content-type': 'application/json' },
      body: JSON.stringify({ notebook_path: 'daily.ipynb', cron: '0 6 * * *' }),
    });
    expect(schedule.status).toBe(201);

    const page = await newPage();
    await logIn(page, base, 'who-bob@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/`)}`);
    const row = page.getByRole('row').filter({ hasText: 'report.csv' });
    await expect.poll(() => row.textContent(), UI_WAIT).toContain('by who-ada');
    expect(await row.getByTitle('who-ada@example.com').count()).toBe(1);
    await row.getByRole('button', { name: 'Versions of report.csv' }).click();
    await expect.poll(async () => (await page.getByRole('listitem').filter({ hasText: 'by who-ada' }).count()) >= 2, UI_WAIT).toBe(true);

    const tabs = page.getByRole('navigation', { name: 'Workspace' });
    await tabs.getByRole('link', { name: 'Trash' }).click();
    await expect.poll(() => page.getByRole('row').filter({ hasText: 'gone.txt' }).textContent(), UI_WAIT).toContain('by who-ada');
    await tabs.getByRole('link', { name: 'Runs' }).click();
    const runRow = page.getByRole('table', { name: 'Runs, newest first' }).getByRole('row').filter({ hasText: 'daily.ipynb' });
    await expect.poll(() => runRow.textContent(), UI_WAIT).toContain('run now by who-ada');
    const scheduleRow = page.getByRole('table', { name: 'Schedules' }).getByRole('row').filter({ hasText: 'daily.ipynb' });
    await expect.poll(() => scheduleRow.textContent(), UI_WAIT).toContain('made by who-ada');

    await tabs.getByRole('link', { name: 'Members' }).click();
    const members = page.getByRole('table');
    await members.getByRole('row').filter({ hasText: 'who-ada@example.com' }).getByText('editor').waitFor(UI_WAIT);
    expect(await members.getByRole('row').filter({ hasText: 'who-bob@example.com' }).textContent()).toContain('(you)');
    expect(await members.getByRole('row').filter({ hasText: 'admin@localhost' }).textContent()).toContain('admin');
    // Members are changed by system administrators only: a viewer is told whom to ask.
    await page.getByText('ask a system administrator').waitFor(UI_WAIT);
    expect(await seriousViolations(page)).toEqual([]);

    // Ada leaves the workspace: what she did is still shown, as a former member's.
    const removed = await fetch(`${base}/api/v1/platform/workspaces/${space}/members/${ada.id}`, { method: 'DELETE', headers: bearer(b.adminToken) });
    expect(removed.status).toBe(204);
    await tabs.getByRole('link', { name: 'Files' }).click();
    await expect.poll(() => page.getByRole('row').filter({ hasText: 'report.csv' }).textContent(), UI_WAIT).toContain('by a former member');
  }, 60_000);

  it('the trash restores the files of a deleted folder at once (filter, select all); a path taken again stays, said on its row; bulk delete for good after confirming', async () => {
    const editor = await createAndLogin(b, 'bulk-trash@example.com');
    const space = await createWorkspace(b, 'Bulk trash');
    await addMembers(b, space, [[editor, 'editor']]);
    const object = (method: string, path: string, body?: string) => objectCall(space, editor.token, method, path, body);
    for (const path of ['batch/1.txt', 'batch/2.txt', 'batch/3.txt', 'other.txt']) expect((await object('PUT', path, path)).status).toBe(201);
    const dav = await fetch(`${base}/api/v1/dav/${space}/batch`, { method: 'DELETE', headers: bearer(editor.token) });
    expect(dav.status).toBe(204);
    expect((await object('DELETE', 'other.txt')).status).toBe(204);
    // batch/2.txt is written again meanwhile: its deleted copy cannot come back over it.
    expect((await object('PUT', 'batch/2.txt', 'new')).status).toBe(201);
    const paths = () => objectPaths(space, editor.token);

    const page = await newPage();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await logIn(page, base, 'bulk-trash@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/trash`)}`);
    await page.getByRole('checkbox', { name: 'Select other.txt' }).waitFor(UI_WAIT);
    await page.getByRole('searchbox', { name: 'Filter' }).fill('batch/');
    await expect.poll(() => page.getByRole('checkbox', { name: 'Select other.txt' }).count(), UI_WAIT).toBe(0);
    await page.getByRole('checkbox', { name: 'Select all that match the filter' }).check();
    await page.getByRole('button', { name: 'Restore selected (3)' }).click();
    await expect.poll(() => paths(), UI_WAIT).toEqual(['batch/1.txt', 'batch/2.txt', 'batch/3.txt']);
    const refused = page.getByRole('row').filter({ hasText: 'batch/2.txt' });
    await refused.getByText('A file already exists at this path').waitFor(UI_WAIT);
    // The refused one stays, still selected; the others left the trash.
    await page.getByRole('button', { name: 'Restore selected (1)' }).waitFor(UI_WAIT);
    expect(await page.getByRole('checkbox', { name: 'Select batch/1.txt' }).count()).toBe(0);
    expect(await (await object('GET', 'batch/2.txt')).text()).toBe('new');

    await page.getByRole('searchbox', { name: 'Filter' }).fill('');
    await page.getByRole('checkbox', { name: 'Select all' }).check();
    await page.getByRole('button', { name: 'Delete selected for good' }).click();
    await page.getByText('The trash is empty.').waitFor(UI_WAIT);
    expect(dialogs).toEqual(['Delete 2 files for good? This cannot be undone.']);
    expect(await seriousViolations(page)).toEqual([]);
  }, 60_000);

  it('an editor selects files to move into a folder (one already there stays, said on its row) and deletes others after confirming; a viewer selects nothing', async () => {
    const editor = await createAndLogin(b, 'bulk-files@example.com');
    const reader = await createAndLogin(b, 'bulk-reader@example.com');
    const space = await createWorkspace(b, 'Bulk files');
    await addMembers(b, space, [
      [editor, 'editor'],
      [reader, 'viewer'],
    ]);
    for (const path of ['a.csv', 'b.csv', 'c.csv', 'keep.txt', 'old/b.csv']) {
      const res = await fetch(`${base}/api/v1/data-resources/${space}/objects/${path}`, { method: 'PUT', headers: bearer(editor.token), body: path });
      expect(res.status).toBe(201);
    }
    const paths = () => objectPaths(space, editor.token);
    const page = await newPage();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await logIn(page, base, 'bulk-files@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/`)}`);
    // The search narrows what "select all" takes.
    await page.getByRole('searchbox', { name: 'Search' }).fill('.csv');
    const selection = page.getByRole('group', { name: 'Selected files' });
    await selection.getByRole('checkbox', { name: 'Select all files that match' }).check();
    await selection.getByText('3 selected').waitFor(UI_WAIT);
    await selection.getByRole('button', { name: 'Move selected…' }).click();
    const move = page.getByRole('form', { name: 'Move selected files' });
    await move.getByLabel('Into the folder').fill('/old/');
    await move.getByRole('button', { name: 'Move 3 files' }).click();
    await expect.poll(() => paths(), UI_WAIT).toEqual(['b.csv', 'keep.txt', 'old/a.csv', 'old/b.csv', 'old/c.csv']);
    // old/b.csv was there already: b.csv stays, selected, with the reason on its row.
    await page.getByRole('row').filter({ hasText: 'b.csv' }).getByText('old/b.csv already exists').waitFor(UI_WAIT);
    await selection.getByText('1 selected').waitFor(UI_WAIT);
    expect(await page.getByRole('checkbox', { name: 'Select b.csv' }).isChecked()).toBe(true);

    await page.getByRole('searchbox', { name: 'Search' }).fill('');
    await page.getByRole('checkbox', { name: 'Select keep.txt' }).check();
    await selection.getByRole('button', { name: 'Delete selected' }).click();
    await expect.poll(() => paths(), UI_WAIT).toEqual(['old/a.csv', 'old/b.csv', 'old/c.csv']);
    expect(dialogs).toEqual(['Move 2 files to the trash?']);
    expect(await seriousViolations(page)).toEqual([]);

    const viewer = await newPage();
    await logIn(viewer, base, 'bulk-reader@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${space}/files/old/`)}`);
    await viewer.getByRole('link', { name: 'a.csv' }).first().waitFor(UI_WAIT);
    expect(await viewer.getByRole('checkbox').count()).toBe(0);
  }, 60_000);

  it('the runs page looks again 250 ms after a run is started, then half a second, a second and every two seconds', async () => {
    const owner = await createAndLogin(b, 'poller@example.com');
    const lab = await createWorkspace(b, 'Polling');
    await addMembers(b, lab, [[owner, 'editor']]);
    const put = await fetch(`${base}/api/v1/data-resources/${lab}/objects/quick.ipynb`, {
      method: 'PUT',
      headers: { ...bearer(owner.token), 'content-type': 'application/x-ipynb+json' },
      body: notebookOf([{ source: '1+1' }]),
    });
    expect(put.status).toBe(201);
    const page = await newPage();
    // The page's clock is the test's: time moves only when the test says, and only while no
    // request of the page is under way (so that each answer is in before the next wait begins).
    await page.clock.install();
    let inFlight = 0;
    const looks: number[] = [];
    let now = 0;
    const listRequest = (url: string) => new URL(url).pathname === `/api/v1/workspaces/${lab}/runs`;
    page.on('request', (r) => {
      inFlight++;
      if (r.method() === 'GET' && listRequest(r.url())) looks.push(now);
    });
    const settle = () => void inFlight--;
    page.on('requestfinished', settle);
    page.on('requestfailed', settle);
    await logIn(page, base, 'poller@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${lab}/runs`)}`);
    await page.getByRole('button', { name: 'Run now' }).waitFor(UI_WAIT);
    await page.clock.pauseAt(Date.now() + 60_000);
    // No worker runs here: the run stays queued, and the page keeps looking at it.
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.getByRole('row').filter({ hasText: 'quick.ipynb' }).locator('.status-queued').waitFor(UI_WAIT);
    const idle = async () => {
      await expect.poll(() => inFlight, UI_WAIT).toBe(0);
      await new Promise((r) => setTimeout(r, 20));
      await expect.poll(() => inFlight, UI_WAIT).toBe(0);
    };
    await idle();
    looks.length = 0;
    for (now = 50; now <= 6000; now += 50) {
      await page.clock.runFor(50);
      await idle();
    }
    // A fixed two-second period looked first at 2 000 ms (a warm run has ended long before).
    expect(looks).toEqual([250, 750, 1750, 3750, 5750]);
  }, 90_000);

  it('the trash lists what lies past its first page of 1 000, newest first (decision 0204)', async () => {
    const owner = await createAndLogin(b, 'deleter@example.com');
    const bin = await createWorkspace(b, 'Full trash');
    await addMembers(b, bin, [[owner, 'editor']]);
    // Rows only: the list reads no content. gone/0000.csv was deleted first, so it is listed last.
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    await b.t.database.db
      .insertInto('trash_items')
      .values(
        Array.from({ length: 1200 }, (_, i) => ({
          workspace_id: bin,
          path: `gone/${String(i).padStart(4, '0')}.csv`,
          version_id: randomUUID(),
          size: 1,
          sha256: '0'.repeat(64),
          content_type: 'text/csv',
          updated_at: new Date(t0),
          deleted_at: new Date(t0 + i * 1000),
        })),
      )
      .execute();
    const page = await newPage();
    await logIn(page, base, 'deleter@example.com', 'password-123', `/login?next=${encodeURIComponent(`/workspaces/${bin}/trash`)}`);
    // The page read only the first 1 000 (newest): the oldest 200 could be neither seen nor restored.
    await page.getByRole('button', { name: 'Restore gone/0000.csv' }).waitFor(UI_WAIT);
    expect(await page.getByRole('button', { name: /^Restore (?!selected)/ }).count()).toBe(1200);
    expect(await page.locator('tbody tr').first().textContent()).toContain('gone/1199.csv');
    expect(await page.getByRole('note').count()).toBe(0);
  }, 60_000);

  it('the administration lists users past the first 1 000 and makes one a member (decision 0204)', async () => {
    // 1 100 users created before everyone else: the users created by this file's tests come after
    // the first page of 1 000, where the page read them before.
    const hash = (await b.t.database.db.selectFrom('users').select('password_hash').where('email', '=', ADMIN_EMAIL).executeTakeFirstOrThrow()).password_hash;
    await b.t.database.db
      .insertInto('users')
      .values(
        Array.from({ length: 1100 }, (_, i) => ({
          email: `early-${String(i).padStart(4, '0')}@example.com`,
          name: `Early ${i}`,
          password_hash: hash,
          platform_role_id: 'user',
          created_at: new Date(Date.parse('2020-01-01T00:00:00Z') + i * 1000),
        })),
      )
      .execute();
    await createAndLogin(b, 'late-joiner@example.com');
    await createWorkspace(b, 'Late team');
    const page = await newPage();
    await logIn(page, base, ADMIN_EMAIL, ADMIN_PASSWORD, '/login?next=%2Fmanage');
    await page.getByRole('heading', { name: 'Administration' }).waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'Disable late-joiner@example.com' }).waitFor(UI_WAIT);
    await page.getByRole('button', { name: 'Late team', exact: true }).click();
    await page.getByRole('heading', { name: 'Members of Late team' }).waitFor(UI_WAIT);
    const addForm = page.getByRole('form', { name: 'Add member' });
    await addForm.getByLabel('User').selectOption({ label: 'late-joiner@example.com' });
    await addForm.getByRole('button', { name: 'Add member' }).click();
    await page.getByLabel('Role of late-joiner@example.com').waitFor(UI_WAIT);
    expect(await page.getByRole('note').count()).toBe(0);
  }, 60_000);
});
