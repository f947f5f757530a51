// bench/archive: a folder downloaded as one zip (decision 0226) against two anchors measured in
// the same run: the same bytes read from disk by `cat` (the physical limit: the page cache and
// one pipe), and the same files downloaded one after another through the object GET (what a
// member did before). Two folders: 16 binary files of BENCH_FILE_MB (64) MiB, stored in the zip
// as they are, and 16 CSV files of the same size (varied rows of readings), deflated. Also the backend's peak RSS during the
// archives (VmHWM, reset once it has settled): an archive must not grow with the folder.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { SETTLE_DELAY_MS } from '../../cli/dist/settle.js';
import {
  BENCH_ADMIN_PASSWORD,
  adminToken,
  cli,
  createWorkspace,
  freePort,
  freshDatabase,
  platformEnv,
  startProcess,
  stopProcess,
  streamDownload,
  streamUpload,
  table,
  waitFor,
} from '../lib.mjs';

const FILE_MB = Number(process.env.BENCH_FILE_MB ?? 64);
const FILES = 16;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const size = FILE_MB * 1024 * 1024;

const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), 'codeagent-bench-archive-'));
const [backendPort, gatewayPort] = await Promise.all([freePort(), freePort()]);
const databaseUrl = await freshDatabase('codeagent_bench_archive', { who: 'bench/archive' });
const env = platformEnv({ dataDir: join(dir, 'data'), backendPort, gatewayPort, databaseUrl }, { MAX_UPLOAD_BYTES: String(size + 1024) });
const backend = startProcess(process.execPath, [cli, 'backend'], env);
await waitFor(`http://127.0.0.1:${backendPort}/api/v1/health`);
const startedAt = Date.now();
const api = `http://127.0.0.1:${backendPort}/api/v1`;
const token = await adminToken(api, BENCH_ADMIN_PASSWORD);
const auth = { authorization: `Bearer ${token}` };
const ws = await createWorkspace(api, auth, 'bench-archive');

/** A MiB of CSV rows as a sensor log has them: a time, a region, readings, a status (deflates to about a third). */
function csvBlock() {
  const rows = [];
  let time = Date.UTC(2026, 10, 28);
  let length = 0;
  while (length < 1 << 20) {
    time += Math.floor(Math.random() * 60_000);
    const row = `${new Date(time).toISOString()},region-${Math.floor(Math.random() * 40)},${(Math.random() * 100_000).toFixed(3)},${Math.random().toFixed(6)},sensor-${String(Math.floor(Math.random() * 1000)).padStart(5, '0')},${Math.random() < 0.98 ? 'ok' : 'late'}\n`;
    rows.push(row);
    length += row.length;
  }
  return Buffer.from(rows.join('')).subarray(0, 1 << 20);
}

/** Writes `FILES` source files of `size` bytes (binary: random; csv: sensor rows); returns their paths. */
async function sources(kind) {
  const files = [];
  for (let i = 0; i < FILES; i++) {
    const file = join(dir, `${kind}-${i}`);
    const out = createWriteStream(file);
    // (One MiB of rows repeated: farther apart than deflate's 32 KiB window, so it compresses as varied rows do.)
    const block = kind === 'csv' ? csvBlock() : undefined;
    for (let n = 0; n < size;) {
      const chunk = block ? block.subarray(0, Math.min(block.length, size - n)) : randomBytes(Math.min(1 << 20, size - n));
      if (!out.write(chunk)) await once(out, 'drain');
      n += chunk.length;
    }
    out.end();
    await once(out, 'finish');
    files.push(file);
  }
  return files;
}

const results = [];
const peak = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${backend.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
for (const kind of ['binary', 'csv']) {
  const files = await sources(kind);
  const type = kind === 'binary' ? 'application/octet-stream' : 'text/csv';
  for (const [i, file] of files.entries())
    await streamUpload(`${api}/data-resources/${ws}/objects/${kind}/f${i}`, file, size, { ...auth, 'content-type': type });
  const total = FILES * size;
  const settle = startedAt + SETTLE_DELAY_MS + 1000 - Date.now();
  if (settle > 0) await new Promise((r) => setTimeout(r, settle));
  writeFileSync(`/proc/${backend.pid}/clear_refs`, '5');
  const rounds = { cat: [], objects: [], archive: [] };
  let archiveBytes = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const order = ['cat', 'objects', 'archive'].map((_, j, all) => all[(j + round) % all.length]);
    for (const what of order) {
      const t = process.hrtime.bigint();
      if (what === 'cat') execFileSync('sh', ['-c', `cat ${files.map((f) => `'${f}'`).join(' ')} > /dev/null`]);
      else if (what === 'objects') for (let i = 0; i < FILES; i++) await streamDownload(`${api}/data-resources/${ws}/objects/${kind}/f${i}`, size, auth);
      else {
        archiveBytes = await new Promise((resolve, reject) => {
          fetch(`${api}/data-resources/${ws}/archive?prefix=${kind}/`, { headers: auth }).then(async (res) => {
            if (res.status !== 200) return reject(new Error(`archive: ${res.status} ${await res.text()}`));
            let n = 0;
            for await (const chunk of res.body) n += chunk.length;
            resolve(n);
          }, reject);
        });
      }
      const s = Number(process.hrtime.bigint() - t) / 1e9;
      rounds[what].push(total / 1024 / 1024 / s);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const cat = median(rounds.cat);
  const objects = median(rounds.objects);
  const archive = median(rounds.archive);
  results.push({
    folder: `${FILES} × ${FILE_MB} MiB ${kind}`,
    'cat MB/s': Math.round(cat),
    'objects one by one MB/s': Math.round(objects),
    'archive MB/s (of content)': Math.round(archive),
    'archive ÷ cat': (archive / cat).toFixed(2),
    'archive ÷ objects': (archive / objects).toFixed(2),
    'zip ÷ content': (archiveBytes / total).toFixed(3),
    'backend peak RSS MB': Math.round(peak()),
  });
}
console.log(`bench/archive on ${execFileSync('nproc').toString().trim()} cores, node ${process.versions.node}, ${ROUNDS} interleaved rounds, medians`);
console.log(table(results));
await stopProcess(backend);
execFileSync('rm', ['-rf', dir]);
process.exit(0);
