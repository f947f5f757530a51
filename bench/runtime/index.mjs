// bench/runtime: p50/p99 of the runtime's `execute` action beside the same code executed by
// calling the Jupyter server directly (@jupyterlab/services over its websocket), in one run,
// against one Jupyter server and two kernels of it. Target: runtime overhead ≤ 10 % at p50.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KernelAPI, KernelConnection, ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';
import { cli, freePort, root, startProcess, stopProcess, table, waitFor } from '../lib.mjs';

const N = Number(process.env.BENCH_ITERATIONS ?? 300);
const CODE = 'x = sum(range(1000))\nx';
const dir = mkdtempSync(join(tmpdir(), 'codeagent-bench-runtime-'));
const [jupyterPort, runtimePort] = await Promise.all([freePort(), freePort()]);
const jupyterToken = randomBytes(16).toString('hex');
const internalToken = randomBytes(16).toString('hex');

const jupyter = spawn('/usr/bin/python3', ['-m', 'jupyter_server', '--allow-root', '--ServerApp.ip=127.0.0.1', `--ServerApp.port=${jupyterPort}`,
  '--ServerApp.open_browser=False', `--ServerApp.token=${jupyterToken}`, `--ServerApp.root_dir=${dir}`], { stdio: 'ignore', env: { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: '1' } });
process.on('exit', () => jupyter.kill('SIGKILL'));
const jupyterUrl = `http://127.0.0.1:${jupyterPort}`;
await waitFor(`${jupyterUrl}/api/status?token=${jupyterToken}`, { accept: (s) => s === 200 });

const runtime = startProcess(process.execPath, [cli, 'runtime'], {
  DATA_DIR: dir, RUNTIME_PORT: String(runtimePort), INTERNAL_SERVICE_TOKEN: internalToken, LOG_LEVEL: 'warn',
  JUPYTER_URL: jupyterUrl, JUPYTER_TOKEN: jupyterToken,
});
const runtimeUrl = `http://127.0.0.1:${runtimePort}/api/v1/jupyter`;
await waitFor(runtimeUrl, { accept: (s) => s === 401 });
const act = async (body) => {
  const res = await fetch(runtimeUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'x-internal-service-token': internalToken }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`runtime answered ${res.status}: ${await res.text()}`);
  return res.json();
};

// Direct: our own kernel on the same Jupyter server.
const settings = ServerConnection.makeSettings({ baseUrl: `${jupyterUrl}/`, wsUrl: `${jupyterUrl.replace('http', 'ws')}/`, token: jupyterToken, appendToken: true, WebSocket });
const directModel = await KernelAPI.startNew({ name: 'python3' }, settings);
const direct = new KernelConnection({ model: directModel, serverSettings: settings, handleComms: false });
const { kernel_id: viaRuntime } = await act({ action: 'start_kernel' });

async function measure(fn) {
  for (let i = 0; i < 20; i++) await fn(); // warm-up
  const times = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  const at = (p) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))];
  return { p50: at(50), p99: at(99), mean: times.reduce((a, b) => a + b, 0) / times.length };
}

// Interleave the two in rounds so that both see the same machine state.
const rounds = 3;
const acc = { direct: [], runtime: [] };
for (let r = 0; r < rounds; r++) {
  acc.direct.push(await measure(async () => {
    const future = direct.requestExecute({ code: CODE, stop_on_error: true, store_history: true, allow_stdin: false });
    await future.done;
    future.dispose();
  }));
  acc.runtime.push(await measure(async () => {
    const out = await act({ action: 'execute', kernel_id: viaRuntime, code: CODE });
    if (out.status !== 'ok') throw new Error('execute failed');
  }));
}
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = Object.fromEntries(Object.entries(acc).map(([k, v]) => [k, { p50: median(v.map((x) => x.p50)), p99: median(v.map((x) => x.p99)) }]));
const overhead = (summary.runtime.p50 / summary.direct.p50 - 1) * 100;
console.log(`\nbench/runtime: execute ${JSON.stringify(CODE)}, ${N} sequential calls × ${rounds} rounds each (median of rounds)\n`);
console.log(table([
  { path: 'Jupyter server direct (@jupyterlab/services)', 'p50 ms': summary.direct.p50.toFixed(2), 'p99 ms': summary.direct.p99.toFixed(2) },
  { path: 'runtime POST /api/v1/jupyter execute', 'p50 ms': summary.runtime.p50.toFixed(2), 'p99 ms': summary.runtime.p99.toFixed(2) },
]));
console.log(`\nruntime overhead at p50: ${overhead.toFixed(1)} % (target ≤ 10 %)`);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(join(root, 'bench/results/runtime.json'), JSON.stringify({ when: new Date().toISOString(), N, rounds, summary, overhead_pct: overhead }, null, 2));

direct.dispose();
await KernelAPI.shutdownKernel(directModel.id, settings).catch(() => undefined);
await act({ action: 'shutdown', kernel_id: viaRuntime }).catch(() => undefined);
await stopProcess(runtime);
jupyter.kill('SIGTERM');
process.exit(0);
