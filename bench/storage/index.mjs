// bench/storage: a 1 GiB upload and download through the gateway (local backend), beside
// `cp` of the same file on the same disk (the physical limit) and a bare Node http server that
// streams the request body to a file (the runtime's limit), all in one run; plus the platform's
// peak RSS (VmHWM of the backend and gateway processes). BENCH_SIZE_MB changes the size;
// BENCH_S3=0 skips the s3rver part.
import { execFileSync } from 'node:child_process';
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
// before answering, as the platform does (the same durability).
const bareScript = `
const { createServer } = require('node:http');
const { createReadStream, createWriteStream, statSync } = require('node:fs');
const { open } = require('node:fs/promises');
const { pipeline } = require('node:stream/promises');
const { join } = require('node:path');
const dir = process.argv[1];
createServer(async (req, res) => {
  const file = join(dir, 'bare-' + req.url.split('?')[0].replace(/[^a-z0-9]/gi, ''));
  if (req.method === 'PUT') {
    await pipeline(req, createWriteStream(file));
    if (req.url.endsWith('?fsync')) { const h = await open(file, 'r'); await h.sync(); await h.close(); }
    res.end('{}');
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

// Rounds interleave the paths (each round in another order): the disk and what else the machine
// does weigh on all of them alike. Every upload creates a new file (no path pays for replacing
// or truncating an old one). Each is timed until its answer; `sync` runs after it, outside the
// timing, so that no path inherits another's dirty pages. Before the rounds each path takes one
// 64 MiB upload, so that every process is warm (its code compiled), as in steady use.
const paths = [
  ['bare Node http server', (n) => `http://127.0.0.1:${barePort}/${n}`, {}],
  ['bare Node http server + fsync', (n) => `http://127.0.0.1:${barePort}/${n}-fsync?fsync`, {}],
  ['backend direct (no gateway) → local', (n) => `http://127.0.0.1:${backendPort}/api/v1/data-resources/${ws}/objects/direct-${n}.bin`, auth],
  ['platform (gateway → backend → local)', (n) => `${base}/data-resources/${ws}/objects/platform-${n}.bin`, auth],
  [
    'platform, backend in the gateway (BACKEND_IN_GATEWAY)',
    (n) => `http://127.0.0.1:${inProcessGatewayPort}/api/v1/data-resources/${ws}/objects/in-process-${n}.bin`,
    auth,
  ],
];
const warm = join(dir, 'warm.bin');
execFileSync('dd', ['if=/dev/urandom', `of=${warm}`, 'bs=1M', 'count=64', 'status=none']);
for (const [, url, headers] of paths) await streamUpload(url('warm'), warm, 64 * 1024 * 1024, headers);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const measured = Object.fromEntries(paths.map(([name]) => [name, { up: [], down: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < paths.length; i++) {
    const [name, url, headers] = paths[(i + round) % paths.length];
    execFileSync('sync');
    t = process.hrtime.bigint();
    await upload(url(`r${round}`), headers);
    measured[name].up.push(mbps(seconds(t)));
    execFileSync('sync');
    if (name.endsWith('+ fsync')) continue; // the same kind of file as without fsync
    t = process.hrtime.bigint();
    await download(url(`r${round}`).replace('?fsync', ''), headers);
    measured[name].down.push(mbps(seconds(t)));
  }
}
const median = (xs) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const up = (name) => median(measured[name].up);
const down = (name) => median(measured[name].down);
const peak = (pid) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const rss = { backend: peak(backend.pid), gateway: peak(gateway.pid), inProcess: peak(inProcess.pid) };
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
const BARE = paths[0][0];
const FSYNC = paths[1][0];
const DIRECT = paths[2][0];
const PLATFORM = paths[3][0];
const IN_PROCESS = paths[4][0];
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
console.log(`platform ÷ cp: upload ${(up(PLATFORM) / mbps(cpSeconds)).toFixed(2)}×`);
console.log(
  `peak RSS: backend ${rss.backend.toFixed(0)} MB, gateway ${rss.gateway.toFixed(0)} MB (target < 200 MB each), gateway with the backend in it ${rss.inProcess.toFixed(0)} MB; backend with s3: ${rssS3.toFixed(0)} MB`,
);
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
