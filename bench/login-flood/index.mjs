// bench/login-flood: what a flood of wrong-password logins does to everyone else (issue 12,
// item 3). A backend (embedded database, local storage) runs in this process; 50 clients in a
// child process send wrong passwords, each with a fresh email and client address so that no
// throttling applies, for BENCH_DURATION seconds (default 5). Meanwhile this process samples,
// one request at a time, GET /api/v1/health and an authenticated 1 MiB file read (the file read
// needs libuv's thread pool, which scrypt used to share). Scenarios: no flood; the flood with
// unbounded hashing on libuv's pool (as before issue 12); with the admission gate on libuv's pool
// (1 and 2 at a time); and with the gate and a dedicated nice-10 hashing thread (the default).
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { configurePasswordHashing, defaultHashingLimits, passwordHashingStats } from '@codeagent/auth';
import { startTestBackend, createAndLogin } from '../../services/backend/dist/testing.js';
import { table } from '../lib.mjs';

const seconds = Number(process.env.BENCH_DURATION ?? 5);
const clients = 50;

const FLOOD = `
const [url, clients, ms] = process.argv.slice(1);
const counts = {};
let n = 0;
const until = Date.now() + Number(ms);
async function client(c) {
  while (Date.now() < until) {
    n++;
    try {
      const res = await fetch(url + '/api/v1/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.' + ((n >> 16) & 255) + '.' + ((n >> 8) & 255) + '.' + (n & 255) },
        body: JSON.stringify({ email: 'flood-' + c + '-' + n + '@example.com', password: 'wrong-password' }),
      });
      await res.arrayBuffer();
      counts[res.status] = (counts[res.status] || 0) + 1;
    } catch { counts.error = (counts.error || 0) + 1; }
  }
}
await Promise.all(Array.from({ length: Number(clients) }, (_, c) => client(c)));
process.stdout.write(JSON.stringify(counts));
`;

function flood(url, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', FLOOD, url, String(clients), String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`flood exited ${code}`))));
  });
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

async function timed(url, headers) {
  const start = performance.now();
  const res = await fetch(url, { headers });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return performance.now() - start;
}

const b = await startTestBackend({ maxUploadBytes: 2 * 1024 * 1024 });
const url = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
const user = await createAndLogin(b, 'reader@example.com');
const auth = { authorization: `Bearer ${user.token}` };
const ws = (
  await b.app.inject({
    method: 'POST',
    url: '/api/v1/platform/workspaces',
    headers: { authorization: `Bearer ${b.adminToken}` },
    payload: { name: 'bench', admin_user_id: user.id },
  })
).json().id;
await fetch(`${url}/api/v1/data-resources/${ws}/objects/data.bin`, {
  method: 'PUT',
  headers: { ...auth, 'content-type': 'application/octet-stream' },
  body: Buffer.alloc(1024 * 1024, 7),
});
const fileUrl = `${url}/api/v1/data-resources/${ws}/objects/data.bin`;

async function scenario(name, limits, withFlood) {
  if (limits) configurePasswordHashing(limits);
  const running = withFlood ? flood(url, seconds * 1000) : new Promise((r) => setTimeout(() => r({}), seconds * 1000));
  let done = false;
  running.finally(() => (done = true));
  await new Promise((r) => setTimeout(r, 300));
  const health = [];
  const file = [];
  while (!done) {
    health.push(await timed(`${url}/api/v1/health`));
    file.push(await timed(fileUrl, auth));
    await new Promise((r) => setTimeout(r, 10));
  }
  const counts = await running;
  // Hashes still queued after the flood (unbounded: thousands) would slow the next scenario.
  while (passwordHashingStats().running > 0) await new Promise((r) => setTimeout(r, 100));
  return {
    scenario: name,
    'health p50 ms': pct(health, 50).toFixed(1),
    'health p99 ms': pct(health, 99).toFixed(1),
    'read p50 ms': pct(file, 50).toFixed(1),
    'read p99 ms': pct(file, 99).toFixed(1),
    samples: health.length,
    'login 401': counts['401'] ?? 0,
    'login 429': counts['429'] ?? 0,
  };
}

const defaults = defaultHashingLimits();
const gate = `${defaults.concurrency} at a time, ${defaults.queue} queued`;
const rows = [];
rows.push(await scenario('no flood', { ...defaults, executor: 'workers' }, false));
rows.push(await scenario('flood, unbounded, libuv pool (before)', { concurrency: 1_000_000, queue: 1_000_000, executor: 'threadpool' }, true));
rows.push(await scenario(`flood, gate (${gate}), libuv pool`, { ...defaults, executor: 'threadpool' }, true));
rows.push(await scenario('flood, gate (2 at a time, 16 queued), libuv pool', { concurrency: 2, queue: 16, executor: 'threadpool' }, true));
rows.push(await scenario(`flood, gate (${gate}), nice-10 thread (default)`, { ...defaults, executor: 'workers' }, true));
configurePasswordHashing({ ...defaults, executor: 'workers' });
console.log(`${availableParallelism()} cores, ${clients} flooding clients, ${seconds} s per scenario`);
console.log(table(rows));
await b.close();
