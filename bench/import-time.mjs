// Import time of each service entry, each in a fresh Node process, median of N runs (after one
// uncounted warm-up run each).
// Anchor: importing fastify alone in the same run (every service loads it).
// Usage: node bench/import-time.mjs [runs]
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const runs = Number(process.argv[2] ?? 7);
const targets = [['anchor: fastify', 'fastify'], ...['backend', 'bridge', 'cluster-admin', 'gateway', 'runtime', 'worker'].map((s) => [s, `@codeagent/${s}`])];
// Also counts the modules each import loads (a figure that does not depend on the machine's
// load) and says whether database code (kysely, pg) comes with it.
const probe = (spec) =>
  `import { registerHooks } from 'node:module'; const seen = new Set();
   registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.add(r.url); return r; } });
   const t = performance.now(); await import(${JSON.stringify(spec)}); const ms = performance.now() - t;
   const db = [...seen].some((u) => u.includes('/node_modules/kysely/') || u.includes('/node_modules/pg/'));
   console.log(JSON.stringify({ ms, modules: seen.size, db }))`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const [name, spec] of targets) {
  const xs = [];
  let last;
  for (let i = -1; i < runs; i++) {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', probe(spec)], { cwd: join(root, 'cli'), encoding: 'utf8' });
    last = JSON.parse(out.trim());
    if (i >= 0) xs.push(last.ms); // run -1 warms the file cache and is not counted
  }
  rows.push([name, median(xs), last.modules, last.db]);
}
const anchor = rows[0][1];
for (const [name, ms, modules, db] of rows) {
  console.log(
    `${name.padEnd(16)} ${ms.toFixed(0).padStart(5)} ms  ${(ms / anchor).toFixed(2)}× anchor  ${String(modules).padStart(5)} modules${db ? '  loads kysely/pg' : ''}`,
  );
}
