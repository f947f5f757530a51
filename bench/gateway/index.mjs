// bench/gateway, part 1 (issue 18): capacity. 500 concurrent connections for 60 s through the
// gateway in front of two instances of a trivial upstream (the pool balances over both), then
// through nginx with the configuration `codeagent nginx-config` renders for the same settings, in
// the same run: requests, errors (must be 0) and the gateway's memory sampled every second
// (bounded: peak vs. the first 10 s). BENCH_CAPACITY_DURATION shortens it.
//
// Part 2: what the session check at /jupyter costs (issue 13 item 5). The gateway asks the
// backend (GET /api/v1/auth/session: JWT check + one query) on every /jupyter request; measured
// against the same gateway route family without a check (/jupyter/codeagent-bridge/*), both in
// front of the same trivial upstream standing in for JupyterLab and the bridge, and against the
// session route called directly. 50 connections, then 1; backend on PostgreSQL when one answers.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BENCH_ADMIN_PASSWORD,
  adminToken,
  platformEnv,
  cli,
  freePort,
  freshDatabase,
  load,
  root,
  startPlatform,
  startProcess,
  stopProcess,
  table,
  waitFor,
} from '../lib.mjs';

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = 50;

const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-bench-gateway-'));

// ---- Part 1: 500 connections, gateway and nginx, same upstreams ----
const capacityDuration = Number(process.env.BENCH_CAPACITY_DURATION ?? 60);
const capacityConnections = 500;
const rssKb = (pid) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  } catch {
    return 0;
  }
};
const childrenOf = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
async function capacity(name, url, pids) {
  const samples = [];
  const timer = setInterval(() => samples.push(pids().reduce((sum, p) => sum + rssKb(p), 0)), 1000);
  const r = await autocannon({ url, connections: capacityConnections, duration: capacityDuration, pipelining: 1, timeout: 30 });
  clearInterval(timer);
  const early = Math.max(...samples.slice(0, 10));
  return {
    target: name,
    'req/s': Math.round(r.requests.average),
    requests: r.requests.total,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    'p50 ms': r.latency.p50,
    'p99 ms': r.latency.p99,
    'RSS first 10 s MB': Math.round(early / 1024),
    'RSS peak MB': Math.round(Math.max(...samples) / 1024),
    'RSS end MB': Math.round(samples.at(-1) / 1024),
  };
}
const trivial = () =>
  createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
const capacityUpstreams = [trivial(), trivial()];
const upstreamPorts = await Promise.all(
  capacityUpstreams.map(async (server) => {
    const port = await freePort();
    await new Promise((r) => server.listen(port, '127.0.0.1', r));
    return port;
  }),
);
const pooled = upstreamPorts.map((p) => `http://127.0.0.1:${p}`).join(',');
const capacityGatewayPort = await freePort();
const capacityEnv = { DATA_DIR: dataDir, PORT: String(capacityGatewayPort), STORAGE_BACKEND: 'local', LOG_LEVEL: 'warn', BACKEND_URL: pooled };
const capacityGateway = startProcess(process.execPath, [cli, 'gateway'], capacityEnv);
await waitFor(`http://127.0.0.1:${capacityGatewayPort}/api/v1/ready`);
const capacityResults = [];
console.log(`bench/gateway capacity: ${capacityConnections} connections, ${capacityDuration} s per ingress, 2 upstream instances`);
capacityResults.push(await capacity('gateway', `http://127.0.0.1:${capacityGatewayPort}/api/v1/ready`, () => [capacityGateway.pid]));
await stopProcess(capacityGateway);
const nginxBin = '/usr/sbin/nginx';
if (existsSync(nginxBin)) {
  const runDir = mkdtempSync(join(tmpdir(), 'codeagent-bench-nginx-'));
  chmodSync(runDir, 0o755);
  const nginxPort = await freePort();
  const conf = execFileSync(process.execPath, [cli, 'nginx-config', '--run-dir', runDir, '--access-log', 'off'], {
    env: { ...process.env, ...capacityEnv, PORT: String(nginxPort) },
  }).toString();
  writeFileSync(join(runDir, 'nginx.conf'), conf);
  const nginx = spawn(nginxBin, ['-p', runDir, '-c', join(runDir, 'nginx.conf'), '-e', 'stderr', '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitFor(`http://127.0.0.1:${nginxPort}/api/v1/ready`);
  capacityResults.push(
    await capacity('nginx (rendered configuration)', `http://127.0.0.1:${nginxPort}/api/v1/ready`, () => [nginx.pid, ...childrenOf(nginx.pid)]),
  );
  nginx.kill('SIGTERM');
} else {
  console.log('nginx is not installed (scripts/system-deps.sh nginx): measured the gateway only');
}
for (const s of capacityUpstreams) s.close();
console.log(table(capacityResults));
const capacityErrors = capacityResults.reduce((n, r) => n + r.errors + r.non2xx, 0);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/gateway-capacity.json'),
  JSON.stringify({ when: new Date().toISOString(), connections: capacityConnections, duration: capacityDuration, results: capacityResults }, null, 2),
);
if (capacityErrors > 0) {
  console.error(`FAILED: ${capacityErrors} errors or non-2xx answers under ${capacityConnections} connections`);
  process.exitCode = 1;
}
if (process.env.BENCH_CAPACITY_ONLY === '1') process.exit(process.exitCode ?? 0);

// ---- Part 2: the session check at /jupyter ----
const [backendPort, gatewayPort, upstreamPort] = await Promise.all([freePort(), freePort(), freePort()]);
const upstream = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"started":"2026-01-01T00:00:00Z","kernels":0}');
});
await new Promise((r) => upstream.listen(upstreamPort, '127.0.0.1', r));
// No PostgreSQL: the backend uses its embedded database.
const databaseUrl = await freshDatabase('codeagent_bench_gateway', { optional: true });
const env = platformEnv(
  { dataDir, backendPort, gatewayPort, databaseUrl },
  { JUPYTERLAB_URL: `http://127.0.0.1:${upstreamPort}`, BRIDGE_URL: `http://127.0.0.1:${upstreamPort}` },
);
const { backend, gateway } = await startPlatform(env);

const token = await adminToken(`http://127.0.0.1:${backendPort}/api/v1`, BENCH_ADMIN_PASSWORD);
const headers = { authorization: `Bearer ${token}` };

const targets = [
  ['session route, backend direct', `http://127.0.0.1:${backendPort}/api/v1/auth/session`],
  ['gateway, no check (/jupyter/codeagent-bridge/*)', `http://127.0.0.1:${gatewayPort}/jupyter/codeagent-bridge/status`],
  ['gateway, session checked (/jupyter/*)', `http://127.0.0.1:${gatewayPort}/jupyter/api/status`],
];
console.log(
  `bench/gateway on ${execFileSync('nproc').toString().trim()} cores, node ${process.versions.node}; backend database: ${databaseUrl ? 'PostgreSQL' : 'embedded PGlite'}`,
);
const results = {};
// Under load (50 connections), then one request at a time (what one JupyterLab user feels).
for (const c of [connections, 1]) {
  results[c] = {};
  for (const [name, url] of targets) {
    await load(url, { connections: c, duration: 2, headers }); // warm-up
    results[c][name] = await load(url, { connections: c, duration, headers });
  }
  console.log(`\n/jupyter session check, ${c} connection(s), ${duration} s each`);
  console.log(table(Object.entries(results[c]).map(([target, r]) => ({ target, 'req/s': r.rps, 'p50 ms': r.p50, 'p99 ms': r.p99 }))));
}

mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(join(root, 'bench/results/gateway.json'), JSON.stringify({ when: new Date().toISOString(), connections, duration, results }, null, 2));
await stopProcess(gateway);
await stopProcess(backend);
upstream.close();
process.exit(process.exitCode ?? 0);
