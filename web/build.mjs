#!/usr/bin/env node
// Builds the web app (Vite) into web/dist/app when an input changed; the gateway serves that
// directory at `/`. A hash of the inputs is kept in web/dist/.build-stamp, so a second build
// with nothing changed does nothing. `--force` rebuilds anyway. Exits non-zero on failure.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const INPUTS = ['index.html', 'vite.config.mjs', 'package.json', 'src'];
const OUTPUT = join(here, 'dist', 'app', 'index.html');
const STAMP = join(here, 'dist', '.build-stamp');

function files(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((n) => !n.endsWith('.test.ts'))
    .sort()
    .flatMap((n) => files(join(path, n)));
}

function inputHash() {
  const h = createHash('sha256');
  for (const f of INPUTS.flatMap((i) => files(join(here, i)))) h.update(relative(here, f)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex');
}

const hash = inputHash();
const force = process.argv.includes('--force');
const stamp = existsSync(STAMP) ? readFileSync(STAMP, 'utf8') : '';
if (!force && existsSync(OUTPUT) && stamp === hash) {
  console.error('[web] up to date');
  process.exit(0);
}
const t0 = Date.now();
const vite = join(here, '..', 'node_modules', 'vite', 'bin', 'vite.js');
const res = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], { cwd: here, stdio: ['ignore', 'inherit', 'inherit'] });
if (res.status !== 0) {
  console.error('[web] the Vite build failed (output above)');
  process.exit(1);
}
mkdirSync(dirname(STAMP), { recursive: true });
writeFileSync(STAMP, hash);
console.error(`[web] built web/dist/app in ${Date.now() - t0} ms`);
