// bench/webdav: the WebDAV tree (/api/v1/dav) against the data-resources API it is built on (the
// anchor), in one run, both through the gateway to the backend (local storage, PostgreSQL):
//   1. a BENCH_SIZE_MB file (default 256 MiB) uploaded and downloaded each way;
//   2. listing a folder of BENCH_FILES files (default 1000) under load: PROPFIND Depth 1 beside
//      GET …/objects?prefix=folder/&limit=1000 (same rows, JSON instead of XML).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
  stopProcess,
  streamDownload,
  streamUpload,
  table,
} from '../lib.mjs';

const SIZE_MB = Number(process.env.BENCH_SIZE_MB ?? 256);
const FILES = Number(process.env.BENCH_FILES ?? 1000);
const size = SIZE_MB * 1024 * 1024;
const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'codeagent-bench-webdav-'));
const source = join(dir, 'source.bin');
console.log(`bench/webdav: writing a ${SIZE_MB} MiB test file…`);
execFileSync('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${SIZE_MB}`, 'status=none']);

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const mbps = (s) => SIZE_MB / s;

const upload = (url, headers = {}) => streamUpload(url, source, size, headers);
const download = (url, headers = {}) => streamDownload(url, size, headers);
/**
 * A closed loop of `connections` clients for `duration` s (autocannon knows no PROPFIND): the
 * same loop drives both listings, so the ratio compares the servers, not the load generators.
 */
async function loadOf(url, method, headers, { connections = 20, duration = 10 } = {}) {
  const latencies = [];
  const until = performance.now() + duration * 1000;
  const client = async () => {
    while (performance.now() < until) {
      const t0 = performance.now();
      const res = await fetch(url, { method, headers });
      await res.arrayBuffer();
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status}`);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: connections }, client));
  latencies.sort((a, b) => a - b);
  const at = (q) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]);
  return { rps: Math.round(latencies.length / duration), p50: at(0.5), p99: at(0.99) };
}

const databaseUrl = await freshDatabase('codeagent_bench_webdav', { who: 'bench/webdav' });
const [backendPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
const env = platformEnv({ dataDir: join(dir, 'data'), backendPort, gatewayPort, databaseUrl }, { MAX_UPLOAD_BYTES: String(2 * size) });
const { backend, gateway } = await startPlatform(env);
const base = `http://127.0.0.1:${gatewayPort}/api/v1`;
const token = await adminToken(base, BENCH_ADMIN_PASSWORD);
const auth = { authorization: `Bearer ${token}` };
const basic = { authorization: `Basic ${Buffer.from(`bench:${token}`).toString('base64')}` };
const ws = await createWorkspace(base, auth, 'bench');
const rest = `${base}/data-resources/${ws}/objects`;
const dav = `${base}/dav/${ws}`;

// 1. Throughput, alternating so that neither path gets a warmer disk cache.
let t = process.hrtime.bigint();
await upload(`${rest}/big-rest.bin`, auth);
const restUp = seconds(t);
t = process.hrtime.bigint();
await upload(`${dav}/big-dav.bin`, basic);
const davUp = seconds(t);
t = process.hrtime.bigint();
await download(`${rest}/big-rest.bin`, auth);
const restDown = seconds(t);
t = process.hrtime.bigint();
await download(`${dav}/big-dav.bin`, basic);
const davDown = seconds(t);

// 2. Listing a folder of FILES small files (plus a workspace around it of the same size).
console.log(`bench/webdav: storing ${2 * FILES} small files…`);
for (let i = 0; i < FILES; i += 20) {
  await Promise.all(
    Array.from({ length: Math.min(20, FILES - i) }, (_, k) =>
      Promise.all([
        fetch(`${rest}/folder/file-${String(i + k).padStart(5, '0')}.csv`, {
          method: 'PUT',
          headers: { ...auth, 'content-type': 'text/csv' },
          body: `a,b\n${i + k},1\n`,
        }).then((r) => r.arrayBuffer()),
        fetch(`${rest}/other/file-${String(i + k).padStart(5, '0')}.csv`, { method: 'PUT', headers: { ...auth, 'content-type': 'text/csv' }, body: 'x' }).then(
          (r) => r.arrayBuffer(),
        ),
      ]),
    ),
  );
}
const listRest = await loadOf(`${rest}?prefix=folder/&limit=1000`, 'GET', auth);
const listDav = await loadOf(`${dav}/folder/`, 'PROPFIND', { ...basic, depth: '1' });

const peak = (pid) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const rss = { backend: peak(backend.pid), gateway: peak(gateway.pid) };
await stopProcess(gateway);
await stopProcess(backend);

console.log(`\nbench/webdav: ${SIZE_MB} MiB file; folder of ${FILES} files; gateway → backend → local, PostgreSQL\n`);
console.log(
  table([
    { path: 'data-resources API (anchor)', 'upload MB/s': mbps(restUp).toFixed(0), 'download MB/s': mbps(restDown).toFixed(0) },
    { path: 'WebDAV tree', 'upload MB/s': mbps(davUp).toFixed(0), 'download MB/s': mbps(davDown).toFixed(0) },
  ]),
);
console.log('');
console.log(
  table([
    { listing: `GET objects?prefix (anchor)`, 'req/s': listRest.rps, 'p50 ms': listRest.p50, 'p99 ms': listRest.p99 },
    { listing: 'PROPFIND Depth 1', 'req/s': listDav.rps, 'p50 ms': listDav.p50, 'p99 ms': listDav.p99 },
  ]),
);
console.log(
  `\nWebDAV ÷ API: upload ${(restUp / davUp).toFixed(2)}×, download ${(restDown / davDown).toFixed(2)}× (target ≥ 0.9×); listing ${(listDav.rps / listRest.rps).toFixed(2)}×`,
);
console.log(`peak RSS: backend ${rss.backend.toFixed(0)} MB, gateway ${rss.gateway.toFixed(0)} MB`);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(
  join(root, 'bench/results/webdav.json'),
  JSON.stringify({ when: new Date().toISOString(), SIZE_MB, FILES, restUp, davUp, restDown, davDown, listRest, listDav, rss }, null, 2),
);
rmSync(dir, { recursive: true, force: true });
process.exit(0);
