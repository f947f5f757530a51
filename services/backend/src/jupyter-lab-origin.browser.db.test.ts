// Decision 0263: with LAB_ORIGIN, a workspace's JupyterLab opens at a host of its own in Debian's
// Chromium (`<id>.lab.localhost`, which Chromium resolves to loopback), through the real gateway,
// backend (real PostgreSQL) and runtime (the workspace's sandboxed JupyterLab): the platform's
// page sends the browser there, the lab's host through the platform's login and back with a
// pass; a cell's live output runs its script there (decision 0245 forbids it in the platform's
// origin), while the page reaches nothing of the platform, and a logout at the platform ends it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { defaultLabHost, labHostBuilt } from '@codeagent/runtime';
import { startLabStack, type LabStack } from './testing-lab.js';

const LAB_TOKEN = 'lab-token-for-the-origin-browser-test';

describe.runIf(labHostBuilt(defaultLabHost()))(`JupyterLab on a host of its own in Chromium (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let stack: LabStack;
  let page: Page;
  let base: string;
  let labBase: string;
  let ws: string;

  beforeAll(async () => {
    stack = await startLabStack({
      token: LAB_TOKEN,
      editor: 'origin-editor@example.com',
      labOrigins: (platform, port) => ({ protocol: 'http:', suffix: `lab.localhost:${port}`, platform }),
    });
    ({ base, ws, page } = stack);
    labBase = `http://${ws}.lab.localhost:${new URL(base).port}`;
  }, 120_000);

  afterAll(async () => {
    await stack?.close();
  }, 120_000);

  it("opens the lab at its own host through the platform's login, and a cell's live output runs its script there", async () => {
    await page.goto(`${base}/jupyter/${ws}/lab`);
    // Sent to the lab's host, from there to the platform for a ticket, and so to the login page.
    expect(new URL(page.url()).origin).toBe(base);
    expect(new URL(page.url()).pathname).toBe('/login');
    expect(new URL(page.url()).searchParams.get('next')).toMatch(new RegExp(`^/jupyter/${ws}/codeagent-lab-ticket\\?lab_state=`));
    await page.locator('input[name=email]').fill('origin-editor@example.com');
    await page.locator('input[name=password]').fill('password-123');
    await page.locator('button[type=submit]').click();
    await page.waitForURL(`${labBase}/jupyter/${ws}/lab`, { timeout: 30_000 });
    await page.locator('#jp-main-dock-panel').waitFor({ timeout: 90_000 });
    // The ticket came in a posted form: no address the lab's page can see holds it.
    const seen = await page.evaluate(() => {
      const w = globalThis as unknown as { location: { href: string }; document: { referrer: string }; performance: { getEntries(): { name: string }[] } };
      return [w.location.href, w.document.referrer, ...w.performance.getEntries().map((e) => e.name)].join(' ');
    });
    expect(seen).not.toContain('labt.');
    expect(seen).not.toContain('ticket');

    await page.evaluate(
      async (id) =>
        (globalThis as unknown as { jupyterapp: { commands: { execute(id: string, args?: object): Promise<unknown> } } }).jupyterapp.commands.execute(id, {
          kernelName: 'python3',
        }),
      'notebook:create-new',
    );
    const cell = page.locator('.jp-NotebookPanel .jp-CodeCell .cm-content').first();
    await cell.waitFor({ timeout: 60_000 });
    // The kernel's websocket goes through the lab's host, the gateway and the runtime.
    await page.waitForFunction(
      () =>
        (globalThis as unknown as { jupyterapp: { shell: { currentWidget?: { sessionContext?: { session?: { kernel?: { status: string } } } } } } }).jupyterapp
          .shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle',
      undefined,
      { timeout: 90_000 },
    );
    const html = '<b id="origin-output">shown</b><script>document.getElementById("origin-output").dataset.ran = location.host</script>';
    await cell.click();
    await page.keyboard.type(`from IPython.display import HTML; HTML(${JSON.stringify(html)})`);
    await page.keyboard.press('Shift+Enter');
    await page.locator('#origin-output[data-ran]').waitFor({ timeout: 60_000 });
    expect(await page.locator('#origin-output').getAttribute('data-ran')).toBe(new URL(labBase).host);

    // What a script there can reach: not the pass (HttpOnly), no platform route at this host, and
    // nothing of the platform's origin it could read.
    const reach = await page.evaluate(async (platform) => {
      const me = await fetch('/api/v1/auth/me').then((r) => r.status);
      const platformMe = await fetch(`${platform}/api/v1/auth/me`, { credentials: 'include' }).then(
        (r) => `read ${r.status}`,
        () => 'refused',
      );
      return { cookie: (globalThis as unknown as { document: { cookie: string } }).document.cookie, me, platformMe };
    }, base);
    expect(reach).toEqual({ cookie: '', me: 404, platformMe: 'refused' });

    // Nor the address of the lab's login (which holds a ticket) in a frame or a window it opens:
    // the gateway's answers there are documents of no origin (a hostile review read it so).
    const login = `/jupyter/${ws}/codeagent-lab-login?ticket=labt.read-me`;
    const read = await page.evaluate(async (path) => {
      const w = globalThis as unknown as {
        document: {
          createElement(tag: 'iframe'): { src: string; onload: () => void; contentWindow: { location: { href: string } } };
          body: { append(e: unknown): void };
        };
        open(url: string): { location: { href: string }; close(): void } | null;
      };
      const href = (win: { location: { href: string } } | null | undefined) => {
        try {
          return win?.location.href ?? 'none';
        } catch {
          return 'blocked';
        }
      };
      const frame = w.document.createElement('iframe');
      const loaded = new Promise<void>((resolve) => (frame.onload = resolve));
      frame.src = path;
      w.document.body.append(frame);
      await Promise.race([loaded, new Promise((r) => setTimeout(r, 3000))]);
      const opened = w.open(path);
      await new Promise((r) => setTimeout(r, 1500));
      const result = { framed: href(frame.contentWindow), opened: href(opened) };
      opened?.close();
      return result;
    }, login);
    expect(read).toEqual({ framed: 'blocked', opened: 'blocked' });
  }, 300_000);

  it("a logout at the platform ends the lab's pass at once; the lab's page starts the way in again", async () => {
    const other = await page.context().newPage();
    await other.goto(`${base}/`);
    const status = await other.evaluate(async () => (await fetch('/api/v1/auth/logout', { method: 'POST' })).status);
    expect(status).toBe(204);
    await other.close();
    const api = await page.evaluate(async (path) => (await fetch(path)).status, `/jupyter/${ws}/api/contents`);
    expect(api).toBe(401);
    await page.goto(`${labBase}/jupyter/${ws}/lab`);
    expect(new URL(page.url()).origin).toBe(base);
    expect(new URL(page.url()).pathname).toBe('/login');
  }, 60_000);
});
