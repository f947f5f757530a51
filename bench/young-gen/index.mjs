// bench/young-gen: what a small V8 young generation (`--max-semi-space-size=1`, the flag the
// supervisor gives the components it starts, decision 0085) costs a busy service, beside the
// same server with V8's default (16 MiB semi-spaces), in the same run. The server is Fastify
// with allocation-heavy answers: a listing of 500 objects as JSON (≈ 100 KiB) and a 256 KiB JSON
// body parsed per request. Rounds alternate A/B so that the machine's other load hits both.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort, load, table, waitFor } from '../lib.mjs';

const duration = Number(process.env.BENCH_DURATION ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);

const SERVER = `
const Fastify = require('fastify');
const app = Fastify({ bodyLimit: 1 << 20 });
const rows = (n) => Array.from({ length: n }, (_, i) => ({ id: 'obj-' + i + '-' + Math.random().toString(36).slice(2), path: 'folder/sub/file-' + i + '.ipynb', size: i * 1024, content_type: 'application/x-ipynb+json', created_at: new Date().toISOString(), tags: ['a', 'b', String(i)] }));
app.get('/list', async () => ({ items: rows(500), next: null }));
app.post('/parse', async (req) => ({ cells: req.body.cells.length }));
app.listen({ port: Number(process.argv[1]), host: '127.0.0.1' });
`;

function start(flags) {
  return freePort().then(async (port) => {
    const child = spawn(process.execPath, [...flags, '-e', SERVER, String(port)], {
      stdio: ['ignore', 'ignore', 'inherit'],
      cwd: new URL('../..', import.meta.url).pathname,
    });
    await waitFor(`http://127.0.0.1:${port}/list`);
    return { child, port };
  });
}

const body = JSON.stringify({
  cells: Array.from({ length: 400 }, (_, i) => ({ cell_type: 'code', source: `x = ${i}\n`.repeat(40), outputs: [{ text: 'ok '.repeat(30) }] })),
});
const variants = [
  { name: 'V8 default', flags: [] },
  { name: '--max-semi-space-size=2', flags: ['--max-semi-space-size=2'] },
  { name: '--max-semi-space-size=1', flags: ['--max-semi-space-size=1'] },
];
for (const v of variants) Object.assign(v, await start(v.flags), { list: [], parse: [] });

for (let r = 0; r < rounds; r++) {
  for (const v of variants) {
    v.list.push(await load(`http://127.0.0.1:${v.port}/list`, { duration, connections: 20 }));
    v.parse.push(
      await load(`http://127.0.0.1:${v.port}/parse`, { duration, connections: 20, method: 'POST', body, headers: { 'content-type': 'application/json' } }),
    );
  }
}
const best = (runs) => runs.reduce((a, b) => (b.rps > a.rps ? b : a));
const rows = variants.map((v) => {
  const status = readFileSync(`/proc/${v.child.pid}/status`, 'utf8');
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  return {
    server: v.name,
    'list req/s': best(v.list).rps,
    'list p99 ms': best(v.list).p99,
    'parse req/s': best(v.parse).rps,
    'parse p99 ms': best(v.parse).p99,
    'peak RSS MB': hwm.toFixed(0),
  };
});
for (const v of variants) v.child.kill();
console.log(`bench/young-gen: ${rounds} alternating rounds of ${duration} s, 20 connections, best round each\n`);
console.log(table(rows) + '\n');
const [a, ...small] = rows;
for (const b of small)
  console.log(`${b.server} ÷ default: list ${(b['list req/s'] / a['list req/s']).toFixed(2)}×, parse ${(b['parse req/s'] / a['parse req/s']).toFixed(2)}×`);
