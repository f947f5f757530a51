#!/usr/bin/env node
// Builds the JupyterLab extension and its host when their inputs changed (Node built-ins only).
// Each is its own npm project (≈ 400 MB of JupyterLab packages stay out of the root install):
// `npm ci` runs when package-lock.json changed or node_modules is missing, the build when any
// input changed. Hashes of the inputs are kept in extensions/.build-stamps/, so CI with a cached
// workspace rebuilds nothing. Prints the build times; exits non-zero on failure.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const stamps = join(here, '.build-stamps');
const say = (msg) => console.error(`[extensions] ${msg}`);

/** The projects, in build order: the host needs nothing from the extension at build time. */
export const projects = [
  {
    name: 'jupyterlab-codeagent-bridge',
    inputs: ['package.json', 'package-lock.json', 'tsconfig.json', 'src', 'schema', 'style', 'core/package.json'],
    output: 'labextension/jupyterlab-codeagent-bridge/package.json',
    build: ['run', 'build'],
  },
  {
    name: 'lab-host',
    inputs: ['package.json', 'package-lock.json', 'webpack.config.cjs', 'src', 'templates'],
    output: 'build/static/index.html',
    build: ['run', 'build'],
  },
];

function files(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((n) => !n.endsWith('.test.ts'))
    .sort()
    .flatMap((n) => files(join(path, n)));
}

function hashOf(dir, inputs) {
  const h = createHash('sha256');
  for (const f of inputs.flatMap((i) => files(join(dir, i)))) {
    h.update(relative(dir, f)).update('\0').update(readFileSync(f)).update('\0');
  }
  return h.digest('hex');
}

function stamp(key) {
  try {
    return readFileSync(join(stamps, key), 'utf8');
  } catch {
    return '';
  }
}

function npm(dir, args) {
  const t0 = Date.now();
  const res = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', [...args, '--no-audit', '--no-fund'], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (res.status !== 0) throw new Error(`npm ${args.join(' ')} failed in ${relative(here, dir)}`);
  return Date.now() - t0;
}

/** Brings every project up to date; returns what was done, with durations in ms. */
export function buildAll({ force = false } = {}) {
  mkdirSync(stamps, { recursive: true });
  const report = [];
  for (const [i, p] of projects.entries()) {
    // "(1/2) name: …": the stage lines that the bootstrap's progress line shows (scripts/progress.mjs).
    const stage = `(${i + 1}/${projects.length}) ${p.name}`;
    const dir = join(here, p.name);
    const lockHash = hashOf(dir, ['package-lock.json']);
    let installMs = 0;
    if (force || !existsSync(join(dir, 'node_modules')) || stamp(`${p.name}.install`) !== lockHash) {
      say(`${stage}: npm ci`);
      installMs = npm(dir, ['ci']);
      writeFileSync(join(stamps, `${p.name}.install`), lockHash);
    }
    const inputHash = hashOf(dir, p.inputs);
    let buildMs = 0;
    if (force || installMs > 0 || !existsSync(join(dir, p.output)) || stamp(`${p.name}.build`) !== inputHash) {
      say(`${stage}: build`);
      buildMs = npm(dir, p.build);
      writeFileSync(join(stamps, `${p.name}.build`), inputHash);
    }
    say(`${stage}: ${installMs || buildMs ? `npm ci ${(installMs / 1000).toFixed(1)} s, build ${(buildMs / 1000).toFixed(1)} s` : 'up to date'}`);
    report.push({ name: p.name, installMs, buildMs });
  }
  return report;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const report = buildAll({ force: process.argv.includes('--force') });
    if (process.argv.includes('--json')) console.log(JSON.stringify(report));
  } catch (err) {
    say(err.message);
    process.exit(1);
  }
}
