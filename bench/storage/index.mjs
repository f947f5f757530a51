// bench/storage: a 1 GiB upload and download through the gateway (local backend), beside
// `cp` of the same file on the same disk (the physical limit) and a bare Node http server that
// streams the request body to a file (the runtime's limit), all in one run; plus the platform's
// peak RSS (VmHWM of the backend and gateway processes). BENCH_SIZE_MB changes the size;
// BENCH_S3=0 skips the s3rver part.
import { execFileSync } from 'node:child_process';
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import {
  BENCH_ADMIN_PASSWORD,
  adminToken,
  createWorkspace,
  platformEnv,
  freePort,
  freshDatabase,
  root,
  startPlatform,
  stopProcess,
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

// Anchor 2: a bare Node server streaming the body to a file, and streaming a file back; with
// `?fsync` it also fsyncs the file before answering, as the platform does (the same durability).
const bare = createServer(async (req, res) => {
  if (req.method === 'PUT') {
    await pipeline(req, createWriteStream(join(dir, 'bare.bin')));
    if (req.url.endsWith('?fsync')) {
      const handle = await open(join(dir, 'bare.bin'), 'r');
      await handle.sync();
      await handle.close();
    }
    res.end('{}');
  } else {
    res.writeHead(200, { 'content-length': statSync(join(dir, 'bare.bin')).size });
    await pipeline(createReadStream(join(dir, 'bare.bin')), res);
  }
});
const barePort = await freePort();
await new Promise((r) => bare.listen(barePort, '127.0.0.1', r));

const upload = (url, headers = {}) => streamUpload(url, source, size, headers);
const download = (url, headers = {}) => streamDownload(url, size, headers);

t = process.hrtime.bigint();
await upload(`http://127.0.0.1:${barePort}/f`);
const bareUp = seconds(t);
t = process.hrtime.bigint();
await download(`http://127.0.0.1:${barePort}/f`);
const bareDown = seconds(t);
t = process.hrtime.bigint();
await upload(`http://127.0.0.1:${barePort}/f?fsync`);
const bareFsyncUp = seconds(t);
bare.close();
rmSync(join(dir, 'bare.bin'));

// The platform: backend (local storage) behind the gateway.
// The backend alone needs a PostgreSQL server (only `codeagent start` runs the embedded one).
const databaseUrl = await freshDatabase('codeagent_bench_storage', { who: 'bench/storage' });
const [backendPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
const env = platformEnv({ dataDir: join(dir, 'data'), backendPort, gatewayPort, databaseUrl }, { MAX_UPLOAD_BYTES: String(2 * size) });
const { backend, gateway } = await startPlatform(env);
const base = `http://127.0.0.1:${gatewayPort}/api/v1`;
const auth = { authorization: `Bearer ${await adminToken(base, BENCH_ADMIN_PASSWORD)}` };
const ws = await createWorkspace(base, auth, 'bench');

t = process.hrtime.bigint();
await upload(`${base}/data-resources/${ws}/objects/big.bin`, auth);
execFileSync('sync');
const platformUp = seconds(t);
t = process.hrtime.bigint();
await download(`${base}/data-resources/${ws}/objects/big.bin`, auth);
const platformDown = seconds(t);
// Hop by hop: the same upload and download straight to the backend (no gateway).
const direct = `http://127.0.0.1:${backendPort}/api/v1/data-resources/${ws}/objects/big-direct.bin`;
t = process.hrtime.bigint();
await upload(direct, auth);
execFileSync('sync');
const directUp = seconds(t);
t = process.hrtime.bigint();
await download(direct, auth);
const directDown = seconds(t);
const peak = (pid) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const rss = { backend: peak(backend.pid), gateway: peak(gateway.pid) };
await stopProcess(gateway);
await stopProcess(backend);

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

const rows = [
  { path: 'cp (same disk)', 'upload MB/s': mbps(cpSeconds).toFixed(0), 'download MB/s': '–' },
  { path: 'bare Node http server', 'upload MB/s': mbps(bareUp).toFixed(0), 'download MB/s': mbps(bareDown).toFixed(0) },
  { path: 'bare Node http server + fsync', 'upload MB/s': mbps(bareFsyncUp).toFixed(0), 'download MB/s': '–' },
  { path: 'backend direct (no gateway) → local', 'upload MB/s': mbps(directUp).toFixed(0), 'download MB/s': mbps(directDown).toFixed(0) },
  { path: 'platform (gateway → backend → local)', 'upload MB/s': mbps(platformUp).toFixed(0), 'download MB/s': mbps(platformDown).toFixed(0) },
  { path: 'platform with s3 → s3rver (information)', 'upload MB/s': mbps(s3Up).toFixed(0), 'download MB/s': mbps(s3Down).toFixed(0) },
];
console.log(`\nbench/storage: ${SIZE_MB} MiB, local backend, database PostgreSQL\n`);
console.log(table(rows));
console.log(`\nplatform ÷ bare Node: upload ${(bareUp / platformUp).toFixed(2)}×, download ${(bareDown / platformDown).toFixed(2)}× (target ≥ 0.5×)`);
console.log(
  `platform ÷ bare Node + fsync: upload ${(bareFsyncUp / platformUp).toFixed(2)}×; backend direct ÷ bare Node: upload ${(bareUp / directUp).toFixed(2)}×, download ${(bareDown / directDown).toFixed(2)}×`,
);
console.log(`platform ÷ cp: upload ${(cpSeconds / platformUp).toFixed(2)}×`);
console.log(
  `peak RSS: backend ${rss.backend.toFixed(0)} MB, gateway ${rss.gateway.toFixed(0)} MB (target < 200 MB each); backend with s3: ${rssS3.toFixed(0)} MB`,
);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/storage.json'),
  JSON.stringify(
    {
      when: new Date().toISOString(),
      SIZE_MB,
      cpSeconds,
      bareUp,
      bareDown,
      bareFsyncUp,
      directUp,
      directDown,
      platformUp,
      platformDown,
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
