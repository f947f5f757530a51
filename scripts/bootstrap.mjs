#!/usr/bin/env node
// The two commands of the README (`npm start`, `npm test`) come through here. Node built-ins
// only: on a fresh clone nothing else exists yet. Installs dependencies when missing or stale,
// builds (incrementally), then starts the platform or runs the tests.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const say = (msg) => console.error(`[codeagent] ${msg}`);

function run(cmd, args, opts = {}) {
  const res = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (res.error) throw res.error;
  return res.status ?? 1;
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

export function ensureInstalled() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const stale = !existsSync(marker) || mtime('package-lock.json') > mtime(marker) || mtime('package.json') > mtime(marker);
  if (!stale) return;
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    say(`Node.js ${process.versions.node} is too old: install Node.js 20.19 or newer`);
    process.exit(1);
  }
  say('installing dependencies (first run; this takes a minute)…');
  const args = existsSync('package-lock.json') ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund'];
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  if (run(npm, args) !== 0) {
    say('dependency installation failed; check the network access to the npm registry and run `npm ci` to see the details');
    process.exit(1);
  }
}

export function ensureBuilt() {
  say('building (incremental)…');
  if (run(process.execPath, [join('node_modules', 'typescript', 'bin', 'tsc'), '-b']) !== 0) {
    say('the build failed; the TypeScript errors are above');
    process.exit(1);
  }
}

/**
 * Debian packages (Jupyter kernels, Chromium) are installed on first use when this user may
 * (root or password-less sudo); otherwise the command names them and goes on: the platform
 * runs without kernels (the runtime answers 503 with the same hint).
 */
function ensureSystemPackages(groups) {
  if (process.platform !== 'linux') return;
  if (run('bash', [join('scripts', 'system-deps.sh'), ...groups]) !== 0) {
    say(`could not install the Debian packages for: ${groups.join(', ')} (see above); continuing without them`);
  }
}

function reachable(host, port, timeoutMs = 1500) {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function test(args) {
  const serverUrl = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const env = { ...process.env };
  if (await reachable(serverUrl.hostname, Number(serverUrl.port || 5432))) {
    say(`database tests run twice: on embedded PGlite and on PostgreSQL at ${serverUrl.host}`);
  } else if (process.env.CI) {
    say(`PostgreSQL is not reachable at ${serverUrl.host}; in CI that is a failure (start it, or set TEST_DATABASE_URL)`);
    process.exit(1);
  } else {
    say(`PostgreSQL is not reachable at ${serverUrl.host}: SKIPPING the PostgreSQL half of the database tests`);
    say('(start PostgreSQL or set TEST_DATABASE_URL=postgres://user@host:port/db to run it)');
    env.CODEAGENT_TEST_POSTGRES = '0';
  }
  // The JupyterLab extension and its host are separate npm projects (≈ 400 MB of JupyterLab
  // packages kept out of the root install); build them when their inputs changed, so that the
  // browser test has them. A failure here makes that test fail with the reason, never skip.
  if (run(process.execPath, [join('extensions', 'build.mjs')]) !== 0) {
    say('building the JupyterLab extension or its host failed (output above); the browser test will fail');
  }
  mkdirSync('.test-results', { recursive: true });
  const vitest = join('node_modules', 'vitest', 'vitest.mjs');
  return run(process.execPath, [vitest, 'run', '--reporter=default', '--reporter=json', '--outputFile.json=.test-results/vitest.json', ...args], { env });
}

const [command = 'start', ...rest] = process.argv.slice(2);
ensureInstalled();
if (command === 'install') process.exit(0);
ensureBuilt();
if (command === 'build') process.exit(0);
if (command === 'test') {
  ensureSystemPackages(['kernels', 'browser']);
  process.exit(await test(rest));
} else if (command === 'bench') {
  process.exit(run(process.execPath, [join('bench', 'run.mjs'), ...rest]));
} else {
  if (command === 'start' || command === 'runtime') ensureSystemPackages(['kernels']);
  // `npm start` and any component name: hand over to the CLI in this same process,
  // so that signals reach it directly.
  process.argv = [process.argv[0], join(root, 'cli', 'dist', 'index.js'), command, ...rest];
  await import('../cli/dist/index.js');
}
