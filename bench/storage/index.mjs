// bench/storage: a 1 GiB upload and download through the gateway (local backend), beside
// `cp` of the same file on the same disk (the physical limit) and a bare Node http server that
// streams the request body to a file (the runtime's limit), all in one run; plus the platform's
// peak RSS (VmHWM of the backend and gateway processes: since their start, and during the
// measured transfers alone). BENCH_SIZE_MB changes the size; BENCH_ROUNDS the rounds (default:
// one per path); BENCH_S3=0 skips the s3rver part; BENCH_DIR puts every file (the source, the
// bare server's, the platform's DATA_DIR) elsewhere, e.g. on a tmpfs (/dev/shm) to compare the
// software without the disk.
import { execFileSync } from 'node:child_process';
import { SETTLE_DELAY_MS } from '../../cli/dist/settle.js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BENCH_ADMIN_PASSWORD,
  adminToken,
  createWorkspace,
  platformEnv,
  freePort,
  freshDatabase,
  root,
  startPlatform,
  startProcess,
  stopProcess,
  waitFor,
  cli,
  streamDownload,
  streamUpload,
  table,
} from '../lib.mjs';

const SIZE_MB = Number(process.env.BENCH_SIZE_MB ?? 1024);
const size = SIZE_MB * 1024 * 1024;
const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'codeagent-bench-storage-'));
const source = join(dir, 'source.bin');
console.log(`bench/storage: writing a ${SIZE_MB} MiB test file…`);
execFileSync('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${SIZE_MB}`, 'status=none']);
execFileSync('sync');

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const mbps = (s) => SIZE_MB / s;

// Anchor 1: cp on the same disk.
let t = process.hrtime.bigint();
execFileSync('cp', [source, join(dir, 'cp-copy.bin')]);
execFileSync('sync');
const cpSeconds = seconds(t);
rmSync(join(dir, 'cp-copy.bin'));

// Anchor 2: a bare Node server in a process of its own (as the platform's are) streaming the
// body to a new file named by the path, and a file back; with `?fsync` it also fsyncs the file
// before answering, as the platform does (the same durability); with `?fsync&sha256` it also
// hashes the body (SHA-256) while it streams, which the contract asks of every upload (the
// object's `sha256`, docs/contract/spec.md §4.3): what a server that owes the same answer can do.
const bareScript = `
const { createServer } = require('node:http');
const { createHash } = require('node:crypto');
const { createReadStream, createWriteStream, statSync } = require('node:fs');
const { open } = require('node:fs/promises');
const { pipeline } = require('node:stream/promises');
const { join } = require('node:path');
const dir = process.argv[1];
createServer(async (req, res) => {
  const file = join(dir, 'bare-' + req.url.split('?')[0].replace(/[^a-z0-9]/gi, ''));
  if (req.method === 'PUT') {
    const query = new URLSearchParams(req.url.split('?')[1] ?? '');
    const hash = query.has('sha256') ? createHash('sha256') : undefined;
    if (hash) req.on('data', (c) => hash.update(c));
    await pipeline(req, createWriteStream(file));
    if (query.has('fsync')) { const h = await open(file, 'r'); await h.sync(); await h.close(); }
    res.end(JSON.stringify({ sha256: hash?.digest('hex') }));
  } else {
    res.writeHead(200, { 'content-length': statSync(file).size });
    await pipeline(createReadStream(file), res);
  }
}).listen(Number(process.argv[2]), '127.0.0.1');`;
const barePort = await freePort();
const bare = startProcess(process.execPath, ['-e', bareScript, dir, String(barePort)], {});
for (let i = 0; ; i++) {
  try {
    await fetch(`http://127.0.0.1:${barePort}/ready`, { method: 'PUT', body: '' });
    break;
  } catch (err) {
    if (i > 100) throw err;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const upload = (url, headers = {}) => streamUpload(url, source, size, headers);
const download = (url, headers = {}) => streamDownload(url, size, headers);

// The platform: backend (local storage) behind the gateway.
// The backend alone needs a PostgreSQL server (only `codeagent start` runs the embedded one).
const databaseUrl = await freshDatabase('codeagent_bench_storage', { who: 'bench/storage' });
const [backendPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
const env = platformEnv({ dataDir: join(dir, 'data'), backendPort, gatewayPort, databaseUrl }, { MAX_UPLOAD_BYTES: String(2 * size) });
const { backend, gateway } = await startPlatform(env);
const base = `http://127.0.0.1:${gatewayPort}/api/v1`;
const auth = { authorization: `Bearer ${await adminToken(base, BENCH_ADMIN_PASSWORD)}` };
const ws = await createWorkspace(base, auth, 'bench');
// The gateway with the backend in its process (BACKEND_IN_GATEWAY, decision 0194): the same
// database and storage directory, ports of its own.
const [inProcessBackendPort, inProcessGatewayPort] = await Promise.all([freePort(), freePort()]);
const inProcess = startProcess(process.execPath, [cli, 'gateway'], {
  ...env,
  BACKEND_PORT: String(inProcessBackendPort),
  BACKEND_URL: `http://127.0.0.1:${inProcessBackendPort}`,
  PORT: String(inProcessGatewayPort),
  BACKEND_IN_GATEWAY: 'true',
});
await waitFor(`http://127.0.0.1:${inProcessGatewayPort}/api/v1/health`);
const lastReady = Date.now();

// Rounds interleave the paths (each round in another order): the disk and what else the machine
// does weigh on all of them alike. Every upload creates a new file (no path pays for replacing
// or truncating an old one). Each is timed until its answer; `sync` runs after it, outside the
// timing, so that no path inherits another's dirty pages. Before the rounds each path takes one
// 64 MiB upload, so that every process is warm (its code compiled), as in steady use.
// Each path: its name, the URL of upload `n`, the headers, and how its file `n` is removed once
// measured (outside the timing), so that a run holds one uploaded file at a time.
const bareFile = async (n) => rmSync(join(dir, `bare-${n.replace(/[^a-z0-9]/gi, '')}`), { force: true });
const platformFile = async (object) => {
  const res = await fetch(`${base}/data-resources/${ws}/objects/${object}`, { method: 'DELETE', headers: auth });
  if (res.status !== 204) throw new Error(`deleting ${object} answered ${res.status}`);
  // (A list answer: `items`, docs/contract/spec.md §3; one bench run trashes a handful.)
  const { items } = await (await fetch(`${base}/data-resources/${ws}/trash?limit=100`, { headers: auth })).json();
  for (const item of items.filter((i) => i.path === object)) {
    const purged = await fetch(`${base}/data-resources/${ws}/trash/${item.id}`, { method: 'DELETE', headers: auth });
    if (purged.status !== 204) throw new Error(`purging ${object} answered ${purged.status}`);
  }
};
const paths = [
  ['bare Node http server', (n) => `http://127.0.0.1:${barePort}/${n}`, {}, bareFile],
  ['bare Node http server + fsync', (n) => `http://127.0.0.1:${barePort}/${n}-fsync?fsync`, {}, (n) => bareFile(`${n}-fsync`)],
  ['bare Node http server + fsync + SHA-256', (n) => `http://127.0.0.1:${barePort}/${n}-sha?fsync&sha256`, {}, (n) => bareFile(`${n}-sha`)],
  [
    'backend direct (no gateway) → local',
    (n) => `http://127.0.0.1:${backendPort}/api/v1/data-resources/${ws}/objects/direct-${n}.bin`,
    auth,
    (n) => platformFile(`direct-${n}.bin`),
  ],
  ['platform (gateway → backend → local)', (n) => `${base}/data-resources/${ws}/objects/platform-${n}.bin`, auth, (n) => platformFile(`platform-${n}.bin`)],
  [
    'platform, backend in the gateway (BACKEND_IN_GATEWAY)',
    (n) => `http://127.0.0.1:${inProcessGatewayPort}/api/v1/data-resources/${ws}/objects/in-process-${n}.bin`,
    auth,
    (n) => platformFile(`in-process-${n}.bin`),
  ],
];
const warm = join(dir, 'warm.bin');
execFileSync('dd', ['if=/dev/urandom', `of=${warm}`, 'bs=1M', 'count=64', 'status=none']);
for (const [, url, headers] of paths) await streamUpload(url('warm'), warm, 64 * 1024 * 1024, headers);
// One round per path by default: each path then takes each place in the order once (the first
// upload after the test file was written meets the emptiest page cache; on this machine's disk
// it can run at twice the speed of the next, whichever path it is).
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? paths.length);
// Peak RSS during the transfers alone: every component has given back its start-up heap by
// now (it settles SETTLE_DELAY_MS after it is ready, decision 0085), and the kernel's high-water
// mark is reset ("5" to clear_refs), so that what a start-up left is not counted as the upload's.
// The peak since the start is reported too.
const peak = (pid) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const settled = lastReady + SETTLE_DELAY_MS + 1000 - Date.now();
if (settled > 0) await new Promise((r) => setTimeout(r, settled));
const components = { backend, gateway, inProcess };
const rssSinceStart = Object.fromEntries(Object.entries(components).map(([name, child]) => [name, peak(child.pid)]));
for (const child of Object.values(components)) writeFileSync(`/proc/${child.pid}/clear_refs`, '5');
const measured = Object.fromEntries(paths.map(([name]) => [name, { up: [], down: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < paths.length; i++) {
    const [name, url, headers, remove] = paths[(i + round) % paths.length];
    execFileSync('sync');
    t = process.hrtime.bigint();
    await upload(url(`r${round}`), headers);
    measured[name].up.push(mbps(seconds(t)));
    execFileSync('sync');
    if (!name.startsWith('bare Node http server +')) {
      // (Not downloaded: the same kind of file as the bare server's first.)
      t = process.hrtime.bigint();
      await download(url(`r${round}`), headers);
      measured[name].down.push(mbps(seconds(t)));
    }
    await remove(`r${round}`);
  }
}
const median = (xs) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const up = (name) => median(measured[name].up);
const down = (name) => median(measured[name].down);
const rss = Object.fromEntries(Object.entries(components).map(([name, child]) => [name, peak(child.pid)]));
for (const name of Object.keys(rss)) rssSinceStart[name] = Math.max(rssSinceStart[name], rss[name]);
await stopProcess(inProcess);
await stopProcess(gateway);
await stopProcess(backend);
await stopProcess(bare);

// For information: the same through the s3 backend against s3rver (a JavaScript S3 emulator
// writing to the same disk; real S3 or MinIO behave differently).
// BENCH_S3=0 skips it; a failure there (s3rver on a loaded machine) does not lose the figures above.
let s3Up = NaN;
let s3Down = NaN;
let rssS3 = NaN;
async function s3Run() {
  const { default: S3rver } = await import('s3rver');
  const s3rver = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: join(dir, 's3rver') });
  const { port: s3Port } = await s3rver.run();
  const s3Env = {
    ...env,
    STORAGE_BACKEND: 's3',
    S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
    S3_REGION: 'us-east-1',
    S3_FORCE_PATH_STYLE: 'true',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
  };
  const { backend: backendS3, gateway: gatewayS3 } = await startPlatform(s3Env, { accept: (st) => st === 200 });
  let t = process.hrtime.bigint();
  await upload(`${base}/data-resources/${ws}/objects/big-s3.bin`, auth);
  s3Up = seconds(t);
  t = process.hrtime.bigint();
  await download(`${base}/data-resources/${ws}/objects/big-s3.bin`, auth);
  s3Down = seconds(t);
  rssS3 = peak(backendS3.pid);
  await stopProcess(gatewayS3);
  await stopProcess(backendS3);
  await s3rver.close();
}
if (process.env.BENCH_S3 !== '0') {
  await s3Run().catch((err) => console.error(`s3 part failed: ${err.message}`));
}

const fmt = (x) => (Number.isNaN(x) ? '–' : x.toFixed(0));
const rows = [
  { path: 'cp (same disk)', 'upload MB/s': mbps(cpSeconds).toFixed(0), 'download MB/s': '–', 'upload rounds': '', 'download rounds': '' },
  ...paths.map(([name]) => ({
    path: name,
    'upload MB/s': fmt(up(name)),
    'download MB/s': fmt(down(name)),
    'upload rounds': measured[name].up.map(fmt).join(' / '),
    'download rounds': measured[name].down.map(fmt).join(' / '),
  })),
  {
    path: 'platform with s3 → s3rver (information)',
    'upload MB/s': fmt(mbps(s3Up)),
    'download MB/s': fmt(mbps(s3Down)),
    'upload rounds': '',
    'download rounds': '',
  },
];
const [BARE, FSYNC, HASHED, DIRECT, PLATFORM, IN_PROCESS] = paths.map(([name]) => name);
console.log(
  `\nbench/storage: ${SIZE_MB} MiB, local backend, database PostgreSQL, ${ROUNDS} interleaved rounds, medians (load average ${os.loadavg()[0].toFixed(1)})\n`,
);
console.log(table(rows));
console.log(
  `\nplatform ÷ bare Node: upload ${(up(PLATFORM) / up(BARE)).toFixed(2)}×, download ${(down(PLATFORM) / down(BARE)).toFixed(2)}× (issue 17 target ≥ 0.9×)`,
);
console.log(
  `platform ÷ bare Node + fsync: upload ${(up(PLATFORM) / up(FSYNC)).toFixed(2)}×; backend direct ÷ bare Node: upload ${(up(DIRECT) / up(BARE)).toFixed(2)}×, download ${(down(DIRECT) / down(BARE)).toFixed(2)}×`,
);
console.log(`backend in the gateway ÷ bare Node: upload ${(up(IN_PROCESS) / up(BARE)).toFixed(2)}×, download ${(down(IN_PROCESS) / down(BARE)).toFixed(2)}×`);
console.log(
  `÷ bare Node + fsync + SHA-256 (the same work as the contract's upload): upload platform ${(up(PLATFORM) / up(HASHED)).toFixed(2)}×, backend in the gateway ${(up(IN_PROCESS) / up(HASHED)).toFixed(2)}×, backend direct ${(up(DIRECT) / up(HASHED)).toFixed(2)}×; the bare server with its SHA-256 ÷ without: ${(up(HASHED) / up(FSYNC)).toFixed(2)}×`,
);
console.log(`platform ÷ cp: upload ${(up(PLATFORM) / mbps(cpSeconds)).toFixed(2)}×`);
const mb = (r) => `backend ${r.backend.toFixed(0)} MB, gateway ${r.gateway.toFixed(0)} MB, gateway with the backend in it ${r.inProcess.toFixed(0)} MB`;
console.log(`peak RSS during the transfers: ${mb(rss)} (issue 3 target < 200 MB each)`);
console.log(`peak RSS since each process started: ${mb(rssSinceStart)}; backend with s3 (its upload right after its start): ${rssS3.toFixed(0)} MB`);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/storage.json'),
  JSON.stringify(
    {
      when: new Date().toISOString(),
      SIZE_MB,
      cpSeconds,
      measured,
      rss,
      rssSinceStart,
      s3Up,
      s3Down,
      rssS3,
    },
    null,
    2,
  ),
);
rmSync(dir, { recursive: true, force: true });
process.exit(0);
