// bench/web-files: the first load of the web app's file browser with BENCH_FILES files (default
// 1000) in one folder, in Debian's Chromium (playwright-core), against the bare API listing of
// the same objects (the anchor), in one run, both through the gateway to the backend (local
// storage, PostgreSQL). Issue 16's target: under 1 s on this machine.
//   - first load: a fresh browser context (cold cache, the session cookie set), navigation to
//     /workspaces/{ws}/files/ until the table announces every file and shows its first screen of
//     rows (it is windowed beyond 150 rows; the last file is then checked by scrolling, untimed); measured in the page
//     (performance.now() from the navigation's start), BENCH_RUNS times (default 10);
//   - anchor: in the same page, fetch(`…/objects?prefix=&delimiter=/&limit=1000`) and its JSON, the request
//     the page itself makes; also the HTML + initial JavaScript alone (the app's shell: the
//     login page, which lists nothing).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { cli, freePort, root, startProcess, stopProcess, table, waitFor } from '../lib.mjs';

const FILES = Number(process.env.BENCH_FILES ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'codeagent-bench-web-files-'));

const c = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' });
await c.connect();
await c.query('DROP DATABASE IF EXISTS codeagent_bench_web_files WITH (FORCE)');
await c.query('CREATE DATABASE codeagent_bench_web_files');
await c.end();
const [backendPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
const env = {
  DATA_DIR: join(dir, 'data'),
  STORAGE_BACKEND: 'local',
  BACKEND_PORT: String(backendPort),
  PORT: String(gatewayPort),
  LOG_LEVEL: 'warn',
  BOOTSTRAP_ADMIN_PASSWORD: 'bench-password-1',
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/codeagent_bench_web_files',
};
const backend = startProcess(process.execPath, [cli, 'backend'], env);
await waitFor(`http://127.0.0.1:${backendPort}/api/v1/health`);
const gateway = startProcess(process.execPath, [cli, 'gateway'], env);
const origin = `http://127.0.0.1:${gatewayPort}`;
const base = `${origin}/api/v1`;
await waitFor(`${base}/health`);
const index = await fetch(`${origin}/`);
if (!(await index.text()).includes('/assets/')) throw new Error('the gateway serves no built web app: run `node web/build.mjs` first');

const login = await (
  await fetch(`${base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'admin@localhost', password: 'bench-password-1' }),
  })
).json();
const auth = { authorization: `Bearer ${login.access_token}` };
const ws = (
  await (
    await fetch(`${base}/platform/workspaces`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench' }),
    })
  ).json()
).id;

console.log(`bench/web-files: storing ${FILES} files…`);
for (let i = 0; i < FILES; i += 20) {
  await Promise.all(
    Array.from({ length: Math.min(20, FILES - i) }, (_, k) =>
      fetch(`${base}/data-resources/${ws}/objects/measurement-${String(i + k).padStart(5, '0')}.csv`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'text/csv' },
        body: `a,b\n${i + k},1\n`,
      }).then(async (r) => {
        await r.arrayBuffer();
        if (r.status !== 201) throw new Error(`PUT: ${r.status}`);
      }),
    ),
  );
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
const cookie = { name: 'codeagent_session', value: login.access_token, url: origin, httpOnly: true, sameSite: 'Lax' };
const firstLoad = [];
const apiListing = [];
const shell = [];
// When, in the first load, the initial script, /auth/me and the listing had arrived (ms from the navigation's start).
const phases = { script: [], me: [], listing: [] };
// Main-thread time of the renderer during the first load, by kind (CPU time, less sensitive to a shared machine than wall time).
const work = { ScriptDuration: [], LayoutDuration: [], RecalcStyleDuration: [], TaskDuration: [] };
for (let run = 0; run < RUNS; run++) {
  // A fresh context each time: no HTTP cache, no service worker, a new renderer.
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addCookies([cookie]);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Performance.enable');
  await page.goto(`${origin}/workspaces/${ws}/files/`, { waitUntil: 'commit' });
  // Loaded: the table announces every file (aria-rowcount: header + FILES) and its first screen of
  // rows is built. Beyond 150 rows the table is windowed (decision 0153): the other rows are built
  // as they scroll into view, so "every row in the page" no longer marks the end of the load.
  await page.waitForFunction(
    (n) => {
      const t = globalThis.document.querySelector('table.listing');
      return t?.getAttribute('aria-rowcount') === String(n + 1) && t.querySelectorAll('tbody tr:not(.spacer)').length >= Math.min(n, 20);
    },
    FILES,
    { timeout: 30_000, polling: 'raf' },
  );
  const t = await page.evaluate(() => {
    const done = performance.now();
    const end = (part) => performance.getEntriesByType('resource').find((e) => e.name.includes(part))?.responseEnd ?? NaN;
    return { done, script: end('/assets/index-'), me: end('/auth/me'), listing: end('/objects?') };
  });
  firstLoad.push(t.done);
  // Where the renderer's main thread spent the load (Chromium's own counters, seconds → ms).
  const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
  for (const k of ['ScriptDuration', 'LayoutDuration', 'RecalcStyleDuration', 'TaskDuration']) work[k].push(metrics[k] * 1000);
  for (const k of ['script', 'me', 'listing']) phases[k].push(t[k]);
  // Not timed: the listing is whole. Scrolled to its end, the page shows the last file.
  const lastName = `measurement-${String(FILES - 1).padStart(5, '0')}.csv`;
  await page.evaluate(() => globalThis.window.scrollTo(0, globalThis.document.documentElement.scrollHeight));
  await page.getByRole('link', { name: lastName, exact: true }).waitFor({ timeout: 10_000 });
  // The anchor: the page's own listing request, alone, in the same (now warm) renderer.
  apiListing.push(
    await page.evaluate(async (w) => {
      const t0 = performance.now();
      const res = await fetch(`/api/v1/data-resources/${w}/objects?prefix=&delimiter=/&limit=1000`, { cache: 'no-store' });
      const body = await res.json();
      if (body.items.length === 0) throw new Error('empty listing');
      return performance.now() - t0;
    }, ws),
  );
  await context.close();
  // The app's shell alone: a fresh context, the login page (no listing), until its form shows.
  const bare = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const loginPage = await bare.newPage();
  await loginPage.goto(`${origin}/login`, { waitUntil: 'commit' });
  await loginPage.getByRole('button', { name: 'Log in' }).waitFor({ timeout: 30_000 });
  shell.push(await loginPage.evaluate(() => performance.now()));
  await bare.close();
}
await browser.close();
await stopProcess(gateway);
await stopProcess(backend);

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q) => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]);
  return { runs: s.length, 'p50 ms': at(0.5), 'p90 ms': at(0.9), 'max ms': Math.round(s.at(-1)) };
};
const result = { first: stats(firstLoad), api: stats(apiListing), shell: stats(shell) };
console.log(`\nbench/web-files: ${FILES} files in one folder; Chromium (headless) → gateway → backend → local, PostgreSQL\n`);
console.log(
  table([
    { what: `file browser, first load (target < 1000 ms)`, ...result.first },
    { what: 'app shell alone (login page, cold)', ...result.shell },
    { what: `API listing of the ${FILES} objects (anchor)`, ...result.api },
  ]),
);
console.log(
  `first load, p50 of when each part had arrived: initial script ${stats(phases.script)['p50 ms']} ms, /auth/me ${stats(phases.me)['p50 ms']} ms, listing ${stats(phases.listing)['p50 ms']} ms; the rest is rendering the first screen of rows`,
);
console.log(
  `first load, p50 main-thread time: all tasks ${stats(work.TaskDuration)['p50 ms']} ms, of which script ${stats(work.ScriptDuration)['p50 ms']} ms, style ${stats(work.RecalcStyleDuration)['p50 ms']} ms, layout ${stats(work.LayoutDuration)['p50 ms']} ms`,
);
console.log(
  `load average during the run: ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} (2 cores; other work shares them)`,
);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/web-files.json'),
  JSON.stringify({ when: new Date().toISOString(), FILES, RUNS, firstLoad, apiListing, shell, phases, work, result }, null, 2),
);
rmSync(dir, { recursive: true, force: true });
process.exit(result.first['p50 ms'] < 1000 ? 0 : 1);
