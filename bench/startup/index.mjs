// bench/startup: `codeagent start` as a newcomer runs it (embedded PostgreSQL, local storage).
//  1. cold start to healthy (a fresh DATA_DIR: initdb, migrations, every component) and warm start
//     (the same DATA_DIR again), from spawning the command to its "running" banner;
//  2. idle memory of the whole process tree after the start settled: RSS and PSS (PSS shares the
//     pages that several processes map, so the sum is what the tree really costs), per process,
//     and PSS of anonymous memory (heaps: the part a component's code decides; the file-backed
//     part, mostly the Node binary shared by all, moves with how many Node processes run);
//  3. idle CPU of the same tree over BENCH_IDLE_SECONDS (default 20): CPU time per second and how
//     often each process's main thread wakes (its context switches) per second.
// Anchors: the PGlite version measured 1.5 GB RSS / 1.18 GB PSS for the same idle tree; for idle
// CPU, a bare Node HTTP server listening in the same window (what an idle Node process costs).
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, freePort, table } from '../lib.mjs';

const settleSeconds = Number(process.env.BENCH_SETTLE_SECONDS ?? 20);
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU time (clock ticks, all threads) and context switches of the main thread of `pid`. */
function activity(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
    const n = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { ticks: Number(fields[11]) + Number(fields[12]), switches: n('voluntary_ctxt_switches') + n('nonvoluntary_ctxt_switches') };
  } catch {
    return undefined; // gone meanwhile
  }
}

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
// Idle CPU: the tree and, beside it, a bare Node HTTP server (the anchor), over the same window.
const bare = spawn(process.execPath, ['-e', "require('node:http').createServer().listen(0, '127.0.0.1')"], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 2000));
const idleBefore = new Map([...procs.map((p) => [p.pid, activity(p.pid)]), [bare.pid, activity(bare.pid)]]);
await new Promise((r) => setTimeout(r, idleSeconds * 1000));
const idle = new Map();
for (const [pid, before] of idleBefore) {
  const after = activity(pid);
  if (before && after)
    idle.set(pid, { cpuMs: ((after.ticks - before.ticks) * 1000) / CLOCK_TICKS / idleSeconds, wakeups: (after.switches - before.switches) / idleSeconds });
}
bare.kill();
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

const cpuGroups = new Map();
for (const p of procs) {
  const i = idle.get(p.pid);
  if (!i) continue;
  const g = cpuGroups.get(label(p)) ?? { process: label(p), cpuMs: 0, wakeups: 0 };
  g.cpuMs += i.cpuMs;
  g.wakeups += i.wakeups;
  cpuGroups.set(g.process, g);
}
const cpuRows = [...cpuGroups.values()].sort((a, b) => b.wakeups - a.wakeups);
const cpuTotal = cpuRows.reduce((a, g) => ({ cpuMs: a.cpuMs + g.cpuMs, wakeups: a.wakeups + g.wakeups }), { cpuMs: 0, wakeups: 0 });
const anchor = idle.get(bare.pid) ?? { cpuMs: NaN, wakeups: NaN };
console.log(`\nidle CPU over ${idleSeconds} s (main threads' wakeups: context switches per second; postgresql: all its processes):\n`);
console.log(
  table(
    [...cpuRows, { process: 'whole tree', ...cpuTotal }, { process: 'anchor: a bare Node HTTP server', ...anchor }].map((g) => ({
      process: g.process,
      'CPU ms per s': g.cpuMs.toFixed(1),
      'wakeups per s': g.wakeups.toFixed(1),
    })),
  ),
);
