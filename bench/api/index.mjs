// bench/api: the gateway beside configurable-http-proxy (JupyterHub's proxy, the named anchor),
// nginx when installed, and the upstream called directly, all in the same run, 50 connections:
//  1. proxy capacity: every proxy in front of the same trivial backend (a fixed JSON answer),
//     so that the proxies, not the backend, are measured;
//  2. end to end: GET /api/v1/auth/me of the real backend (JWT check; the token check and the
//     user's workspaces cached, decisions 0082 and 0193: no query once warm; two before issue 17).
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_ADMIN_PASSWORD, adminToken, platformEnv, cli, freePort, freshDatabase, load, root, startProcess, stopProcess, table, waitFor } from '../lib.mjs';

const duration = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const connections = 50;

import { createServer } from 'node:http';

const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-bench-api-'));
const [backendPort, gatewayPort, chpPort, chpApiPort, nginxPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
// The backend alone cannot use the embedded database (only `codeagent start` runs it).
const databaseUrl = await freshDatabase('codeagent_bench', { who: 'bench/api' });
const env = platformEnv({ dataDir, backendPort, gatewayPort, databaseUrl });
const backend = startProcess(process.execPath, [cli, 'backend'], env);
await waitFor(`http://127.0.0.1:${backendPort}/api/v1/health`);

/** Starts the gateway, configurable-http-proxy and nginx (if installed) in front of `upstreamPort`. */
async function startProxies(upstreamPort) {
  const gateway = startProcess(process.execPath, [cli, 'gateway'], { ...env, BACKEND_URL: `http://127.0.0.1:${upstreamPort}` });
  const chp = startProcess(process.execPath, [
    join(root, 'node_modules/configurable-http-proxy/bin/configurable-http-proxy'),
    '--ip',
    '127.0.0.1',
    '--port',
    String(chpPort),
    '--api-ip',
    '127.0.0.1',
    '--api-port',
    String(chpApiPort),
    '--default-target',
    `http://127.0.0.1:${upstreamPort}`,
    '--log-level',
    'error',
  ]);
  let nginx;
  if (existsSync('/usr/sbin/nginx')) {
    const dir = join(dataDir, 'nginx');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'nginx.conf'),
      `worker_processes 1; daemon off; pid ${dir}/nginx.pid; error_log ${dir}/error.log;
events { worker_connections 1024; }
http { access_log off; upstream b { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server { listen 127.0.0.1:${nginxPort}; keepalive_requests 1000000; location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; } } }`,
    );
    nginx = startProcess('/usr/sbin/nginx', ['-c', join(dir, 'nginx.conf'), '-p', dir]);
  }
  await waitFor(`http://127.0.0.1:${gatewayPort}/api/v1/health`);
  await waitFor(`http://127.0.0.1:${chpPort}/api/v1/health`);
  if (nginx) await waitFor(`http://127.0.0.1:${nginxPort}/api/v1/health`);
  return [gateway, chp, nginx].filter(Boolean);
}

/** CPU time (user + system, clock ticks) of the processes `match` picks, from /proc. */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
function ticks(match) {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!match(Number(entry), comm)) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return sum;
}

const token = await adminToken(`http://127.0.0.1:${backendPort}/api/v1`, BENCH_ADMIN_PASSWORD);
const headers = { authorization: `Bearer ${token}` };

/** A failed run names its target. */
const named = (name, run) =>
  run.catch((err) => {
    throw new Error(`${name}: ${err.message}`);
  });

/**
 * `extra`: more targets measured in the same rounds, as [name, port, pid]; their CPU per request
 * is their whole process's (the gateway with the backend in it: both).
 */
async function scenario(title, upstreamPort, path, headers, extra = []) {
  const proxies = await startProxies(upstreamPort);
  const targets = [
    ['upstream direct', upstreamPort],
    ['gateway', gatewayPort],
    ['configurable-http-proxy', chpPort],
    ...(proxies.length === 3 ? [['nginx', nginxPort]] : []),
    ...extra.map(([name, port]) => [name, port]),
  ];
  // Rounds interleave the targets (each round in another order), so that what else the machine
  // does at one moment weighs on all of them alike; the median of the rounds is reported.
  const rounds = {};
  for (const [name, port] of targets) {
    await named(name, load(`http://127.0.0.1:${port}${path}`, { connections, duration: 2, headers })); // warm-up
    rounds[name] = [];
  }
  // CPU per request of each process on the way, from /proc (user + system time): what a
  // proxy costs is what it takes from the backend and the database on the same cores.
  const [gatewayProcess, chpProcess] = proxies;
  const cpu = () => ({
    proxy: {
      'upstream direct': 0,
      gateway: ticks((p) => p === gatewayProcess.pid),
      'configurable-http-proxy': ticks((p) => p === chpProcess.pid),
      nginx: ticks((_p, comm) => comm === 'nginx'),
      ...Object.fromEntries(extra.map(([name, , pid]) => [name, ticks((p) => p === pid)])),
    },
    backend: ticks((p) => p === backend.pid),
    postgres: ticks((_p, comm) => comm === 'postgres'),
  });
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const [name, port] of order) {
      const before = cpu();
      const r = await named(name, load(`http://127.0.0.1:${port}${path}`, { connections, duration, headers }));
      const after = cpu();
      const perRequest = (a, b) => Math.round(((b - a) * 1e6) / CLOCK_TICKS / r.requests);
      rounds[name].push({
        ...r,
        proxyUs: perRequest(before.proxy[name], after.proxy[name]),
        backendUs: perRequest(before.backend, after.backend),
        postgresUs: perRequest(before.postgres, after.postgres),
      });
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const results = Object.fromEntries(
    Object.entries(rounds).map(([name, rs]) => [
      name,
      {
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        rounds: rs.map((r) => r.rps),
        proxyUs: median(rs.map((r) => r.proxyUs)),
        backendUs: median(rs.map((r) => r.backendUs)),
        postgresUs: median(rs.map((r) => r.postgresUs)),
      },
    ]),
  );
  for (const c of proxies) await stopProcess(c);
  const gw = results.gateway;
  console.log(
    `\n${title}: GET ${path}, ${connections} connections, ${ROUNDS} interleaved rounds of ${duration} s, medians (load average ${os.loadavg()[0].toFixed(1)})`,
  );
  console.log(
    table(
      Object.entries(results).map(([name, r]) => ({
        target: name,
        'req/s': r.rps,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        'gateway ÷ this': (gw.rps / r.rps).toFixed(2),
        rounds: r.rounds.join(' / '),
        'proxy CPU µs/req': r.proxyUs,
        ...(upstreamPort === backendPort ? { 'backend µs/req': r.backendUs, 'postgres µs/req': r.postgresUs } : {}),
      })),
    ),
  );
  const ratio = gw.rps / results['configurable-http-proxy'].rps;
  console.log(`gateway vs configurable-http-proxy: ${ratio.toFixed(2)}× throughput (target ≥ 1.5×); gateway p99 ${gw.p99} ms (target < 20 ms)`);
  const direct = results['upstream direct'].rps;
  for (const [name, r] of [['gateway', gw], ...extra.map(([name]) => [name, results[name]])]) {
    console.log(
      `${name} ÷ direct ${(r.rps / direct).toFixed(2)}× (issue 17 target ≥ 0.9× for /auth/me)` +
        (results.nginx ? `; ${name} ÷ nginx ${(r.rps / results.nginx.rps).toFixed(2)}× (target ≥ 1.0×)` : ''),
    );
  }
  if (results.nginx) console.log(`nginx ÷ direct ${(results.nginx.rps / direct).toFixed(2)}×`);
  return results;
}

console.log(`bench/api on ${execFileSync('nproc').toString().trim()} cores, node ${process.versions.node}; backend database: PostgreSQL`);
const trivial = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"status":"ok","checks":{"database":"ok","storage":"ok","runtime":"ok"}}');
});
const trivialPort = await freePort();
await new Promise((r) => trivial.listen(trivialPort, '127.0.0.1', r));
const proxyCapacity = await scenario('1. proxy capacity (trivial backend)', trivialPort, '/api/v1/health', {});
trivial.close();
// The gateway with the backend in its own process (BACKEND_IN_GATEWAY, decision 0194), on ports
// of its own and the same database: the API requests cross no network hop.
const [inProcessGatewayPort, inProcessBackendPort] = await Promise.all([freePort(), freePort()]);
const IN_PROCESS = 'gateway, backend in its process';
const inProcess = startProcess(process.execPath, [cli, 'gateway'], {
  ...env,
  PORT: String(inProcessGatewayPort),
  BACKEND_PORT: String(inProcessBackendPort),
  BACKEND_URL: `http://127.0.0.1:${inProcessBackendPort}`,
  BACKEND_IN_GATEWAY: 'true',
});
await waitFor(`http://127.0.0.1:${inProcessGatewayPort}/api/v1/health`);
const endToEnd = await scenario('2. end to end (real backend)', backendPort, '/api/v1/auth/me', headers, [[IN_PROCESS, inProcessGatewayPort, inProcess.pid]]);
await stopProcess(inProcess);

mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/api.json'),
  JSON.stringify({ when: new Date().toISOString(), connections, duration, proxyCapacity, endToEnd }, null, 2),
);
await stopProcess(backend);
process.exit(0);
