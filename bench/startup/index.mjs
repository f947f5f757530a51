// bench/startup: `codeagent start` as a newcomer runs it (embedded PostgreSQL, local storage).
//  1. cold start to healthy (a fresh DATA_DIR: initdb, migrations, every component) and warm start
//     (the same DATA_DIR again), from spawning the command to its "running" banner;
//  2. idle memory of the whole process tree after the start settled: RSS and PSS (PSS shares the
//     pages that several processes map, so the sum is what the tree really costs), per process,
//     and PSS of anonymous memory (heaps: the part a component's code decides; the file-backed
//     part, mostly the Node binary shared by all, moves with how many Node processes run).
// Anchor: the PGlite version measured 1.5 GB RSS / 1.18 GB PSS for the same idle tree.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, freePort, table } from '../lib.mjs';

const settleSeconds = Number(process.env.BENCH_SETTLE_SECONDS ?? 20);

async function start(dataDir) {
  const ports = {};
  for (const n of ['PORT', 'BACKEND_PORT', 'RUNTIME_PORT', 'CLUSTER_ADMIN_PORT', 'BRIDGE_PORT']) ports[n] = String(await freePort());
  const started = performance.now();
  const child = spawn(process.execPath, [cli, 'start'], {
    env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn', DATABASE_URL: '', STORAGE_BACKEND: '', ...ports },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (out += c));
  while (!out.includes('codeagent is running at')) {
    if (child.exitCode !== null) throw new Error(`codeagent start failed:\n${out}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { child, seconds: (performance.now() - started) / 1000 };
}

async function stop(child) {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** Every process below `root` (by parent pid), with its name, RSS and PSS in kB. */
function tree(root) {
  const procs = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const rollup = readFileSync(`/proc/${entry}/smaps_rollup`, 'utf8');
      const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0);
      procs.push({ pid: Number(entry), ppid, cmd, rss: kb('Rss'), pss: kb('Pss'), anon: kb('Pss_Anon') });
    } catch {
      // gone or unreadable
    }
  }
  const inTree = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) {
      if (!inTree.has(p.pid) && inTree.has(p.ppid)) {
        inTree.add(p.pid);
        grew = true;
      }
    }
  }
  return procs.filter((p) => inTree.has(p.pid));
}

function label(p) {
  const c = p.cmd.join(' ');
  if (/cli\/dist\/index\.js start/.test(c)) return 'supervisor';
  const component = /cli\/dist\/index\.js (\S+)/.exec(c)?.[1];
  if (component) return component;
  if (/postgres/.test(c)) return 'postgresql (all its processes)';
  if (/jupyter_server|ipykernel/.test(c)) return 'jupyter (runtime)';
  return p.cmd[0] ?? '?';
}

const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-bench-startup-'));
const cold = await start(dataDir);
await stop(cold.child);
const warmRuns = [];
let running;
for (let i = 0; i < 3; i++) {
  running = await start(dataDir);
  warmRuns.push(running.seconds);
  if (i < 2) await stop(running.child);
}
warmRuns.sort((a, b) => a - b);
await new Promise((r) => setTimeout(r, settleSeconds * 1000));
const procs = tree(running.child.pid);
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
await stop(running.child);

const groups = new Map();
for (const p of procs) {
  const g = groups.get(label(p)) ?? { process: label(p), count: 0, rss: 0, pss: 0, anon: 0 };
  g.count++;
  g.rss += p.rss;
  g.pss += p.pss;
  g.anon += p.anon;
  groups.set(g.process, g);
}
const mb = (kb) => (kb / 1024).toFixed(1);
const rows = [...groups.values()]
  .sort((a, b) => b.pss - a.pss)
  .map((g) => ({ process: g.process, processes: g.count, 'RSS MB': mb(g.rss), 'PSS MB': mb(g.pss), 'anon PSS MB': mb(g.anon) }));
const total = procs.reduce((a, p) => ({ rss: a.rss + p.rss, pss: a.pss + p.pss, anon: a.anon + p.anon }), { rss: 0, pss: 0, anon: 0 });
rows.push({ process: 'whole tree', processes: procs.length, 'RSS MB': mb(total.rss), 'PSS MB': mb(total.pss), 'anon PSS MB': mb(total.anon) });

console.log(`bench/startup on ${readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm).length} cores, node ${process.versions.node}\n`);
console.log(
  table([
    { start: 'cold (fresh DATA_DIR)', 'seconds to running': cold.seconds.toFixed(2) },
    { start: 'warm (median of 3)', 'seconds to running': warmRuns[1].toFixed(2) },
  ]),
);
console.log(`\nidle process tree after ${settleSeconds} s (load average ${load}):\n`);
console.log(table(rows));
console.log(`\nidle PSS ÷ the PGlite version's 1.18 GB: ${(total.pss / 1024 / 1208).toFixed(2)}×`);
