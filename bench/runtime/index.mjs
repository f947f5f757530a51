// bench/runtime: kernel start time and `execute` latency with and without the kernel sandbox,
// in one run. Both runtimes are built in this process from the same code (buildRuntimeApp over
// HTTP on loopback), one with KERNEL_SANDBOX on (bubblewrap, a uid and cgroups per workspace,
// the Jupyter server on a Unix socket), one with it off. For reference, the same cell is also
// executed directly on the sandboxed Jupyter server (@jupyterlab/services over its socket).
// The anchor (issue 17): the same cell sent by jupyter_client over ZMQ straight to a kernel, no
// Jupyter server in between (zmq-anchor.py, ipc transport as the platform's kernels use). And,
// for the kernel websocket over TCP (JUPYTER_URL, the unsandboxed JupyterLab host): a plain
// jupyter_server beside one with the runtime's codeagent_nodelay extension.
// The runtimes execute over ZeroMQ straight to the kernel's sockets (decision 0190); a third,
// sandboxed runtime executes through the Jupyter server's websocket as before, for comparison.
// The runtime is called with undici's request (as @codeagent/clients calls it) and with fetch.
// Rounds interleave the two modes so that both see the same machine state; medians of rounds.
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KernelAPI, KernelConnection, ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';
import { Agent, request } from 'undici';
import { buildRuntimeApp } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { freePort, root, table } from '../lib.mjs';

const N = Number(process.env.BENCH_ITERATIONS ?? 200);
const STARTS = Number(process.env.BENCH_STARTS ?? 6);
const ROUNDS = 3;
const CODE = 'x = sum(range(1000))\nx';
const TOKEN = randomUUID();
const GiB = 1024 * 1024 * 1024;

async function runtime(enabled, { directChannels = true, uidBase } = {}) {
  const kernels = await startTestKernels({
    sandbox: {
      enabled,
      maxServers: 64,
      memoryBytes: 4 * GiB,
      kernelMemoryBytes: 2 * GiB,
      pidsMax: 512,
      kernelPidsMax: 256,
      diskBytes: GiB,
      tmpBytes: GiB / 2,
      ...(uidBase ? { uidBase } : {}),
    },
    directChannels,
  });
  const app = await buildRuntimeApp({ kernels: kernels.kernels, internalServiceToken: TOKEN });
  const url = `${(await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '')}/api/v1/jupyter`;
  const headers = { 'content-type': 'application/json', 'x-internal-service-token': TOKEN };
  // The client the platform's own services use for the runtime (@codeagent/clients): undici's
  // request over a kept-alive connection.
  const act = async (body) => {
    const res = await request(url, { method: 'POST', headers, body: JSON.stringify(body), dispatcher: agent });
    if (res.statusCode !== 200) throw new Error(`runtime answered ${res.statusCode}: ${await res.body.text()}`);
    return res.body.json();
  };
  // The same call with the global fetch (WHATWG streams, more work per request in Node).
  const actFetch = async (body) => {
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`runtime answered ${res.status}: ${await res.text()}`);
    return res.json();
  };
  return { kernels, app, act, actFetch };
}
const agent = new Agent({ keepAliveTimeout: 60_000 });

const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** A new workspace's first kernel, ready to execute: starts its Jupyter server (in its sandbox) too. */
async function coldStart(rt) {
  const t = process.hrtime.bigint();
  const { kernel_id } = await rt.act({ action: 'start_kernel', workspace_id: randomUUID() });
  await rt.act({ action: 'execute', kernel_id, code: '1' });
  const elapsed = ms(t);
  await rt.act({ action: 'shutdown', kernel_id });
  return elapsed;
}

/** Another kernel on a running server, ready to execute. */
async function warmStart(rt, workspace) {
  const t = process.hrtime.bigint();
  const { kernel_id } = await rt.act({ action: 'start_kernel', workspace_id: workspace });
  await rt.act({ action: 'execute', kernel_id, code: '1' });
  const elapsed = ms(t);
  await rt.act({ action: 'shutdown', kernel_id });
  return elapsed;
}

/**
 * The anchor kept up for the whole bench: jupyter_client over ZMQ to its own kernel, in a Python
 * process that executes once per line it reads and answers with its own timing (ms), so the
 * anchor can take its turn among the paths compared, in the same machine state.
 */
function servedAnchor() {
  const child = spawn('/usr/bin/python3', [join(root, 'bench/runtime/zmq-anchor.py'), 'serve', CODE, 'ipc'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let buffer = '';
  const waiting = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  const next = () => new Promise((resolve) => waiting.push(resolve));
  const ready = next();
  return {
    ready,
    async execute() {
      const line = next();
      child.stdin.write('go\n');
      return Number(await line);
    },
    stop: () => child.kill('SIGTERM'),
  };
}

/** jupyter_client over ZMQ straight to a kernel (the anchor), in a Python process of its own. */
function zmqAnchor() {
  const out = execFileSync('/usr/bin/python3', [join(root, 'bench/runtime/zmq-anchor.py'), String(N), CODE, 'ipc'], { stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out.toString().trim().split('\n').at(-1));
}

/** A Jupyter server on TCP, with or without the codeagent_nodelay extension; a kernel connection to it. */
async function tcpServer(withExtension, dir) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const python = join(root, 'services/runtime/python');
  const child = spawn(
    '/usr/bin/python3',
    [
      '-m',
      'jupyter_server',
      `--ServerApp.port=${port}`,
      '--ServerApp.ip=127.0.0.1',
      '--ServerApp.open_browser=False',
      `--ServerApp.root_dir=${dir}`,
      '--allow-root',
      ...(withExtension ? ['--ServerApp.jpserver_extensions=codeagent_nodelay=True'] : []),
    ],
    {
      env: {
        PATH: '/usr/bin:/bin',
        HOME: dir,
        JUPYTER_TOKEN: TOKEN,
        JUPYTER_RUNTIME_DIR: join(dir, 'run'),
        JUPYTER_CONFIG_DIR: join(dir, 'cfg'),
        JUPYTER_DATA_DIR: join(dir, 'data'),
        IPYTHONDIR: join(dir, 'ipy'),
        PYDEVD_DISABLE_FILE_VALIDATION: '1',
        PYTHONDONTWRITEBYTECODE: '1',
        ...(withExtension ? { PYTHONPATH: python } : {}),
      },
      stdio: 'ignore',
    },
  );
  const settings = ServerConnection.makeSettings({
    baseUrl: `http://127.0.0.1:${port}/`,
    wsUrl: `ws://127.0.0.1:${port}/`,
    token: TOKEN,
    appendToken: true,
    WebSocket,
  });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/api/status?token=${TOKEN}`)).ok) break;
    } catch {
      if (i > 600) throw new Error('the TCP Jupyter server did not start');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const model = await KernelAPI.startNew({ name: 'python3' }, settings);
  const conn = new KernelConnection({ model, serverSettings: settings, handleComms: false });
  return { child, conn };
}

const modes = { sandbox: await runtime(true), off: await runtime(false) };
// The sandboxed runtime as it was before decision 0190: every execute through the Jupyter server's websocket.
const viaServer = await runtime(true, { directChannels: false, uidBase: 1_910_000_000 });
const tcpDir = mkdtempSync(join(tmpdir(), 'bench-runtime-tcp-'));
const tcp = { plain: await tcpServer(false, join(tcpDir, 'plain')), nodelay: await tcpServer(true, join(tcpDir, 'nodelay')) };
const workspace = randomUUID();
const acc = {};
const push = (key, v) => (acc[key] ??= []).push(v);
const kernels = {};
for (const [mode, rt] of Object.entries(modes)) {
  kernels[mode] = (await rt.act({ action: 'start_kernel', workspace_id: workspace })).kernel_id;
}
kernels.viaServer = (await viaServer.act({ action: 'start_kernel', workspace_id: randomUUID() })).kernel_id;
// Direct: our own kernel on the sandboxed server of the same workspace, over its Unix socket.
const server = await modes.sandbox.kernels.pool.server(workspace);
const directModel = await KernelAPI.startNew({ name: 'python3' }, server.settings);
const direct = new KernelConnection({ model: directModel, serverSettings: server.settings, handleComms: false });

const anchor = servedAnchor();
if ((await anchor.ready) !== 'ready') throw new Error('the ZMQ anchor did not start');
const ok = (out) => {
  if (out.status !== 'ok') throw new Error('execute failed');
};
const requestExecute = async (conn) => {
  const future = conn.requestExecute({ code: CODE, stop_on_error: true, store_history: true, allow_stdin: false });
  await future.done;
  future.dispose();
};
// Every execute path of the comparison, called in turn one execute at a time (the starting path
// rotates), so that each sees the same machine: measured one after the other, a path that runs
// right after the kernel starts above pays for their clean-up.
const paths = {
  'sandbox:exec': async () => ok(await modes.sandbox.act({ action: 'execute', kernel_id: kernels.sandbox, code: CODE })),
  'off:exec': async () => ok(await modes.off.act({ action: 'execute', kernel_id: kernels.off, code: CODE })),
  'fetch:exec': async () => ok(await modes.sandbox.actFetch({ action: 'execute', kernel_id: kernels.sandbox, code: CODE })),
  'viaServer:exec': async () => ok(await viaServer.act({ action: 'execute', kernel_id: kernels.viaServer, code: CODE })),
  'inproc:exec': async () => ok(await modes.sandbox.kernels.kernels.execute(kernels.sandbox, CODE)),
  'viaServer-inproc:exec': async () => ok(await viaServer.kernels.kernels.execute(kernels.viaServer, CODE)),
  'direct:exec': () => requestExecute(direct),
  'tcp-plain:exec': () => requestExecute(tcp.plain.conn),
  'tcp-nodelay:exec': () => requestExecute(tcp.nodelay.conn),
  // Timed by the anchor's own process (a number): the pipe to it is not part of the anchor.
  'zmq-interleaved:exec': () => anchor.execute(),
};
async function interleaved() {
  const names = Object.keys(paths);
  const times = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < 20; i++) for (const n of names) await paths[n]();
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < names.length; j++) {
      const n = names[(i + j) % names.length];
      const t = process.hrtime.bigint();
      const own = await paths[n]();
      times[n].push(typeof own === 'number' ? own : ms(t));
    }
  }
  for (const n of names) {
    push(`${n}50`, pct(times[n], 50));
    push(`${n}99`, pct(times[n], 99));
  }
}

for (let r = 0; r < ROUNDS; r++) {
  for (const [mode, rt] of Object.entries(modes)) {
    const cold = [];
    const warm = [];
    for (let i = 0; i < STARTS; i++) cold.push(await coldStart(rt));
    for (let i = 0; i < STARTS; i++) warm.push(await warmStart(rt, workspace));
    push(`${mode}:cold`, median(cold));
    push(`${mode}:warm`, median(warm));
  }
  // Let the kernels stopped above finish going before timing executes.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  await interleaved();
  const z = zmqAnchor();
  push('zmq:exec50', z.p50);
  push('zmq:exec99', z.p99);
}
const m = Object.fromEntries(Object.entries(acc).map(([k, v]) => [k, median(v)]));
const f = (x) => x.toFixed(1);
console.log(
  `\nbench/runtime: kernel starts (${STARTS} per round) and ${N} sequential executes of ${JSON.stringify(CODE)}, ${ROUNDS} interleaved rounds, medians\n`,
);
console.log(
  table([
    { measure: "a workspace's first kernel, ready (server + kernel start)", 'sandbox ms': f(m['sandbox:cold']), 'no sandbox ms': f(m['off:cold']) },
    { measure: 'another kernel on a running server, ready', 'sandbox ms': f(m['sandbox:warm']), 'no sandbox ms': f(m['off:warm']) },
    { measure: 'runtime execute p50 (undici request, as the platform calls it)', 'sandbox ms': f(m['sandbox:exec50']), 'no sandbox ms': f(m['off:exec50']) },
    { measure: 'runtime execute p99', 'sandbox ms': f(m['sandbox:exec99']), 'no sandbox ms': f(m['off:exec99']) },
    { measure: 'runtime execute, client using fetch, p50 / p99', 'sandbox ms': `${f(m['fetch:exec50'])} / ${f(m['fetch:exec99'])}`, 'no sandbox ms': '–' },
    {
      measure: 'KernelService.execute in process (no HTTP) p50 / p99',
      'sandbox ms': `${f(m['inproc:exec50'])} / ${f(m['inproc:exec99'])}`,
      'no sandbox ms': '–',
    },
    {
      measure: 'before 0190, through the Jupyter server: runtime execute p50 / p99',
      'sandbox ms': `${f(m['viaServer:exec50'])} / ${f(m['viaServer:exec99'])}`,
      'no sandbox ms': '–',
    },
    {
      measure: 'before 0190, through the Jupyter server: in process p50 / p99',
      'sandbox ms': `${f(m['viaServer-inproc:exec50'])} / ${f(m['viaServer-inproc:exec99'])}`,
      'no sandbox ms': '–',
    },
    { measure: 'direct on the sandboxed server p50 / p99', 'sandbox ms': `${f(m['direct:exec50'])} / ${f(m['direct:exec99'])}`, 'no sandbox ms': '–' },
    {
      measure: 'anchor, in turn with the paths above: jupyter_client over ZMQ, p50 / p99',
      'sandbox ms': `${f(m['zmq-interleaved:exec50'])} / ${f(m['zmq-interleaved:exec99'])}`,
      'no sandbox ms': '–',
    },
    {
      measure: 'anchor alone (after the paths): jupyter_client over ZMQ ipc, p50 / p99',
      'sandbox ms': `${f(m['zmq:exec50'])} / ${f(m['zmq:exec99'])}`,
      'no sandbox ms': '–',
    },
    { measure: 'TCP jupyter_server, plain, direct p50 / p99', 'sandbox ms': '–', 'no sandbox ms': `${f(m['tcp-plain:exec50'])} / ${f(m['tcp-plain:exec99'])}` },
    {
      measure: 'TCP jupyter_server + codeagent_nodelay, direct p50 / p99',
      'sandbox ms': '–',
      'no sandbox ms': `${f(m['tcp-nodelay:exec50'])} / ${f(m['tcp-nodelay:exec99'])}`,
    },
  ]),
);
const overhead = (a, b) => ((m[a] / m[b] - 1) * 100).toFixed(1);
console.log(
  `\nsandbox cost: first kernel ${overhead('sandbox:cold', 'off:cold')} %, warm kernel ${overhead('sandbox:warm', 'off:warm')} %, execute p50 ${overhead('sandbox:exec50', 'off:exec50')} %; runtime overhead over direct at p50: ${overhead('sandbox:exec50', 'direct:exec50')} %`,
);
console.log(
  `runtime execute p50 ÷ jupyter_client over ZMQ p50 (the anchor in turn with the paths): sandbox ${(m['sandbox:exec50'] / m['zmq-interleaved:exec50']).toFixed(2)}×, no sandbox ${(m['off:exec50'] / m['zmq-interleaved:exec50']).toFixed(2)}× (target ≤ 1.5×), with fetch ${(m['fetch:exec50'] / m['zmq-interleaved:exec50']).toFixed(2)}×, through the Jupyter server (before 0190) ${(m['viaServer:exec50'] / m['zmq-interleaved:exec50']).toFixed(2)}×; against the anchor alone: ${(m['sandbox:exec50'] / m['zmq:exec50']).toFixed(2)}×; TCP kernel websocket with no-delay ÷ without: ${(m['tcp-nodelay:exec50'] / m['tcp-plain:exec50']).toFixed(2)}×`,
);
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(join(root, 'bench/results/runtime.json'), JSON.stringify({ when: new Date().toISOString(), N, STARTS, ROUNDS, medians: m }, null, 2));

anchor.stop();
direct.dispose();
await KernelAPI.shutdownKernel(directModel.id, server.settings).catch(() => undefined);
for (const server of Object.values(tcp)) {
  server.conn.dispose();
  server.child.kill('SIGKILL');
}
rmSync(tcpDir, { recursive: true, force: true });
for (const rt of [...Object.values(modes), viaServer]) {
  await rt.app.close();
  await rt.kernels.stop();
}
process.exit(0);
