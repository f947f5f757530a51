// Helpers shared by the benchmarks: free ports, child processes, waiting, a fresh database, the
// platform's backend and gateway, autocannon runs, streamed transfers.
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { freePort } from '@codeagent/service-kit/http';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const cli = `${root}cli/dist/index.js`;

/** A free port for a component a benchmark starts (decision 0196: below the kernel's ephemeral range). */
export { freePort };

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export function startProcess(cmd, args, env = {}) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

export async function stopProcess(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

export async function waitFor(url, { timeoutMs = 60_000, accept = (s) => s < 500 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.body?.cancel();
      if (accept(res.status)) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not come up`);
}

const serverUrl = () => process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A new, empty database `name` (a fixed identifier of the benchmark, not user input) on the
 * PostgreSQL at TEST_DATABASE_URL, dropped first when an earlier run left it; returns its URL.
 * When no PostgreSQL answers: undefined with `optional` (the backend then uses its embedded
 * database), otherwise an error that says which benchmark needs it.
 */
export async function freshDatabase(name, { optional = false, who = 'this benchmark' } = {}) {
  const c = new pg.Client({ connectionString: serverUrl() });
  try {
    await c.connect();
  } catch (err) {
    if (optional) return undefined;
    throw new Error(`${who} needs PostgreSQL at ${serverUrl()} (TEST_DATABASE_URL): ${err.message}`, { cause: err });
  }
  try {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  } finally {
    await c.end();
  }
  const u = new URL(serverUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

/** The password of the admin that the benchmarks' platforms are bootstrapped with. */
export const BENCH_ADMIN_PASSWORD = 'bench-password-1';

/**
 * The environment of a benchmark's `codeagent backend` and `gateway`: data (local storage) in
 * `dataDir`, the given ports and database (none: the embedded one), warnings only, the bench
 * admin; `extra` adds to it or overrides.
 */
export function platformEnv({ dataDir, backendPort, gatewayPort, databaseUrl }, extra = {}) {
  return {
    DATA_DIR: dataDir,
    BACKEND_PORT: String(backendPort),
    PORT: String(gatewayPort),
    STORAGE_BACKEND: 'local',
    LOG_LEVEL: 'warn',
    BOOTSTRAP_ADMIN_PASSWORD: BENCH_ADMIN_PASSWORD,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...extra,
  };
}

/**
 * `codeagent backend`, then `codeagent gateway`, with `env` (BACKEND_PORT and PORT set), each
 * waited for at its /api/v1/health (`accept` as in waitFor). Returns both child processes.
 */
export async function startPlatform(env, { accept } = {}) {
  const wait = accept ? { accept } : {};
  const backend = startProcess(process.execPath, [cli, 'backend'], env);
  await waitFor(`http://127.0.0.1:${env.BACKEND_PORT}/api/v1/health`, wait);
  const gateway = startProcess(process.execPath, [cli, 'gateway'], env);
  await waitFor(`http://127.0.0.1:${env.PORT}/api/v1/health`, wait);
  return { backend, gateway };
}

/** Logs the bootstrap admin (admin@localhost) in at `api` (…/api/v1); returns the access token. */
export async function adminToken(api, password) {
  const res = await fetch(`${api}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'admin@localhost', password }),
  });
  if (!res.ok) throw new Error(`admin login at ${api} answered ${res.status}`);
  return (await res.json()).access_token;
}

/** Creates a workspace at `api` (…/api/v1) with the admin's `headers`; returns its id. */
export async function createWorkspace(api, headers, name) {
  const res = await fetch(`${api}/platform/workspaces`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (res.status !== 201) throw new Error(`creating workspace ${name} answered ${res.status}`);
  return (await res.json()).id;
}

/** One autocannon run; returns requests/s and latency percentiles in ms. */
export async function load(url, { connections = 50, duration = 10, headers = {}, method = 'GET', body } = {}) {
  const result = await autocannon({ url, connections, duration, headers, method, body, pipelining: 1 });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers and ${result.errors} errors during the run`);
  }
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
  };
}

export function table(rows) {
  const cols = Object.keys(rows[0]);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (vals) => vals.map((v, i) => String(v).padEnd(width[i])).join('  ');
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(cols.map((c) => r[c])))].join('\n');
}

/** PUT of `file` (`size` bytes) streamed from disk to `url`; resolves with the answer's body, rejects on an error status. */
export function streamUpload(url, file, size, headers = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: 'PUT',
        headers: { 'content-length': size, 'content-type': 'application/octet-stream', ...headers },
      },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => (res.statusCode < 300 ? resolve(body) : reject(new Error(`${url}: ${res.statusCode} ${body}`))));
      },
    );
    req.on('error', reject);
    createReadStream(file).pipe(req);
  });
}

/** GET of `url`, counting the bytes without keeping them; rejects unless exactly `size` arrive. */
export function streamDownload(url, size, headers = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers }, (res) => {
      let n = 0;
      res.on('data', (c) => (n += c.length));
      res.on('end', () => (n === size ? resolve(n) : reject(new Error(`${url}: got ${n} bytes`))));
    })
      .on('error', reject)
      .end();
  });
}
