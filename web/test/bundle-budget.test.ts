// Budget (issue 16): the JavaScript the first page load fetches, gzipped, is at most 250 KB.
// It builds the app itself (Vite, into a temporary directory) so that it measures the sources
// as they are, not a stale dist.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';

const web = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const BUDGET = 250 * 1024;

describe('the initial JavaScript of the web app', () => {
  const out = mkdtempSync(join(tmpdir(), 'codeagent-web-budget-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('is at most 250 KB gzipped, and index.html has no inline script', () => {
    const vite = resolve(web, '../node_modules/vite/bin/vite.js');
    const res = spawnSync(process.execPath, [vite, 'build', '--outDir', out, '--emptyOutDir', '--logLevel', 'error'], {
      cwd: web,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(res.status, res.stderr).toBe(0);
    const html = readFileSync(join(out, 'index.html'), 'utf8');
    // Every <script> has a src (the CSP allows no inline script).
    expect(html.match(/<script\b[^>]*>/g)?.every((tag) => / src="/.test(tag))).toBe(true);
    // What the page loads at once: its module scripts and their static imports (modulepreload).
    const initial = [...html.matchAll(/<(?:script[^>]+src|link[^>]+rel="modulepreload"[^>]+href)="\/([^"]+\.js)"/g)].map((m) => m[1]!);
    expect(initial.length).toBeGreaterThan(0);
    const gzipped = initial.reduce((n, f) => n + gzipSync(readFileSync(join(out, f))).length, 0);
    expect(gzipped).toBeLessThanOrEqual(BUDGET);
  }, 150_000);
});
