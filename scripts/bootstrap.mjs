#!/usr/bin/env node
// The two commands of the README (`npm start`, `npm test`) come through here. Node built-ins
// only: on a fresh clone nothing else exists yet. Installs dependencies when missing or stale,
// builds (incrementally), then starts the platform or runs the tests.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { arch, platform } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { extensionsTracker, runStep, tscTracker } from './progress.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const say = (msg) => console.error(`[codeagent] ${msg}`);

/**
 * The platform runs on Node.js 22 or newer (24 preferred: the active LTS). On an older Node the
 * bootstrap fetches Node.js NODE_VERSION from the npm registry (the `node-<os>-<cpu>` package
 * carries the official binary), keeps it in .cache/node, and runs everything with it: `npm ci`,
 * the build, the tests and the platform. CODEAGENT_FETCH_NODE=0 turns that off (then it only
 * explains). See docs/decisions/0017-node-version.md.
 */
const MIN_MAJOR = 22;
const NODE_VERSION = '24.21.0';
const nodeCache = join(root, '.cache', 'node');

async function fetchedNodeBin() {
  const os = platform() === 'win32' ? 'win' : platform();
  const pkg = `node-${os}-${arch()}`;
  const bin = join(nodeCache, 'node_modules', pkg, 'bin');
  const exe = join(bin, platform() === 'win32' ? 'node.exe' : 'node');
  if (existsSync(exe)) return bin;
  say(`Node.js ${process.versions.node} is older than ${MIN_MAJOR}: fetching Node.js ${NODE_VERSION} from the npm registry (${pkg}) into .cache/node, once`);
  mkdirSync(nodeCache, { recursive: true });
  const npm = platform() === 'win32' ? 'npm.cmd' : 'npm';
  const res = await runStep(`fetching Node.js ${NODE_VERSION}`, npm, [
    'install',
    '--no-save',
    '--no-audit',
    '--no-fund',
    '--no-package-lock',
    '--prefix',
    nodeCache,
    `${pkg}@${NODE_VERSION}`,
  ]);
  if (res.code !== 0 || !existsSync(exe)) {
    say(`could not fetch Node.js ${NODE_VERSION}; install Node.js ${MIN_MAJOR} or newer yourself (e.g. \`nvm install 24\`) and run the command again`);
    process.exit(1);
  }
  return bin;
}

/** Runs this same command again under a Node.js that is new enough, when this one is not. */
async function ensureNodeVersion() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= MIN_MAJOR) return;
  if (process.env.CODEAGENT_FETCH_NODE === '0') {
    say(`Node.js ${process.versions.node} is too old: install Node.js ${MIN_MAJOR} or newer (24 recommended, e.g. \`nvm install 24\`)`);
    process.exit(1);
  }
  const bin = await fetchedNodeBin();
  // The newer node comes first on PATH, so that npm and every child process run on it too.
  const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` };
  const child = spawn(join(bin, 'node'), [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit', env });
  // Ctrl-C reaches both processes (same terminal); SIGTERM from a supervisor is passed on.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  const code = await new Promise((resolve) => child.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  process.exit(code);
}

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

export async function ensureInstalled() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const stale = !existsSync(marker) || mtime('package-lock.json') > mtime(marker) || mtime('package.json') > mtime(marker);
  // A node_modules installed by another Node major (before the switch to 24) is installed again.
  const installedWith = existsSync(marker + '.node') ? readFileSync(marker + '.node', 'utf8').trim() : '';
  if (!stale && installedWith === process.versions.node.split('.')[0]) return;
  const args = existsSync('package-lock.json') ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund'];
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  if ((await runStep(`installing dependencies (npm ${args[0]})`, npm, args)).code !== 0) {
    say('dependency installation failed (npm output above); check the network access to the npm registry and run the command again');
    process.exit(1);
  }
  writeFileSync(marker + '.node', process.versions.node.split('.')[0] + '\n');
}

export async function ensureBuilt() {
  const tsc = join('node_modules', 'typescript', 'bin', 'tsc');
  // --verbose names each project as tsc reaches it: the progress line counts them.
  if ((await runStep('building TypeScript (tsc -b)', process.execPath, [tsc, '-b', '--verbose'], { tracker: tscTracker() })).code !== 0) {
    say('the build failed; the TypeScript errors are above (`npx tsc -b` shows them again)');
    process.exit(1);
  }
  // The web app the gateway serves at `/` (Vite; skipped when its inputs did not change).
  if ((await runStep('building the web app (Vite)', process.execPath, [join('web', 'build.mjs')])).code !== 0) {
    say('building the web app failed (output above); `node web/build.mjs` shows it again');
    process.exit(1);
  }
}

/**
 * Debian packages (Jupyter kernels, Chromium, nginx, rclone) are installed on first use when this user may
 * (root or password-less sudo); otherwise the command names them and goes on: the platform
 * runs without kernels (the runtime answers 503 with the same hint).
 */
async function ensureSystemPackages(groups) {
  if (process.platform !== 'linux') return;
  if ((await runStep(`checking Debian packages (${groups.join(', ')})`, 'bash', [join('scripts', 'system-deps.sh'), ...groups])).code !== 0) {
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
    say(`database tests run twice: on the embedded PostgreSQL and on PostgreSQL at ${serverUrl.host}`);
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
  const built = await runStep('building the JupyterLab extension and host', process.execPath, [join('extensions', 'build.mjs')], {
    tracker: extensionsTracker(),
  });
  if (built.code !== 0) {
    say('building the JupyterLab extension or its host failed (output above); the browser test will fail');
  }
  mkdirSync('.test-results', { recursive: true });
  const vitest = join('node_modules', 'vitest', 'vitest.mjs');
  return run(process.execPath, [vitest, 'run', '--reporter=default', '--reporter=json', '--outputFile.json=.test-results/vitest.json', ...args], { env });
}

const [command = 'start', ...rest] = process.argv.slice(2);
await ensureNodeVersion();
// `.ci/run` asks where the node it should use lives (it runs tsc and eslint itself).
if (command === 'node-bin') {
  console.log(dirname(process.execPath));
  process.exit(0);
}
await ensureInstalled();
if (command === 'install') process.exit(0);
await ensureBuilt();
if (command === 'build') process.exit(0);
if (command === 'test') {
  await ensureSystemPackages(['kernels', 'browser', 'nginx', 'webdav']);
  process.exit(await test(rest));
} else if (command === 'bench') {
  process.exit(run(process.execPath, [join('bench', 'run.mjs'), ...rest]));
} else {
  if (command === 'start' || command === 'runtime') await ensureSystemPackages(['kernels']);
  // `npm start` and any component name: hand over to the CLI in this same process,
  // so that signals reach it directly.
  process.argv = [process.argv[0], join(root, 'cli', 'dist', 'index.js'), command, ...rest];
  await import('../cli/dist/index.js');
}
