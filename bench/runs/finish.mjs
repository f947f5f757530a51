// bench/runs, run latency end to end on real kernels (issue 17): `POST /api/v1/workspaces/{ws}/runs`
// (HTTP, a real backend on PostgreSQL) → `running` (the worker, woken by NOTIFY, hands the notebook
// to the runtime) → finished (the worker recorded the result), for a one-cell notebook (`1+1`) with
// one workspace file, on the runtime over HTTP with sandboxed kernels. Two runtimes in this
// process, one with the warm kernel pool (KERNEL_POOL_SIZE=1) and one without (0: every run
// starts its kernel, as before), runs alternating between them; the anchor, in the same rounds:
// the same notebook through `jupyter nbconvert --to notebook --execute` (Debian's nbconvert,
// spawned, until it exits). As root with FUSE and rclone (the platform's default there, decision
// 0140), a third runtime runs on the workspace mounted as /workspace, as `codeagent start` does:
// the run ends once what it wrote is stored (the mount's flush). Runs are spaced (the pool refills
// between them, as between runs a person starts); back-to-back runs of one workspace would each
// find the pool still refilling.
// Run alone: `node bench/runs/finish.mjs`.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { mountTokenKey } from '@codeagent/auth';
import { startTestBackend, createAndLogin, createWorkspace, addMembers, bearer, INTERNAL_TOKEN } from '@codeagent/backend/testing';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { ScheduleWorker } from '@codeagent/worker';
import { runtimeClient } from '@codeagent/clients';
import { buildRuntimeApp, WorkspaceMounts } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { table } from '../lib.mjs';

const RUNS = Number(process.env.BENCH_FINISH_RUNS ?? 10);
/** The workspace mount needs root, /dev/fuse and rclone (scripts/system-deps.sh webdav). */
const MOUNTED = process.getuid?.() === 0 && existsSync('/dev/fuse') && existsSync('/usr/bin/rclone');
const GiB = 1024 * 1024 * 1024;
const NOTEBOOK = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
  cells: [{ cell_type: 'code', id: 'c1', source: '1+1', metadata: {}, outputs: [], execution_count: null }],
};

const stats = (samples) => {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { runs: s.length, p50: at(0.5), p99: at(0.99) };
};
const f1 = (x) => x.toFixed(1);

/** A runtime with sandboxed kernels; with `mounted`, each workspace's files mounted from the backend's WebDAV tree. */
async function runtime(poolSize, mounted) {
  const kernels = await startTestKernels({
    sandbox: { maxServers: 8, memoryBytes: 4 * GiB, kernelMemoryBytes: 2 * GiB, pidsMax: 512, kernelPidsMax: 256, diskBytes: GiB, tmpBytes: GiB / 2 },
    warmPool: { size: poolSize, max: 4, idleSeconds: 600 },
    ...(mounted
      ? {
          uids: databaseUidAllocator(mounted.db, 1_900_000_000),
          mounts: new WorkspaceMounts({
            dataDir: mounted.dataDir,
            davUrl: (w) => `${mounted.backendUrl}/api/v1/dav/${w}/`,
            tokenKey: mountTokenKey(INTERNAL_TOKEN),
            log: pino({ level: 'silent' }),
            cacheBytes: 64 * 1024 * 1024,
          }),
        }
      : {}),
  });
  const app = await buildRuntimeApp({ kernels: kernels.kernels, internalServiceToken: INTERNAL_TOKEN });
  const url = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  return { kernels, app, client: runtimeClient(url, INTERNAL_TOKEN) };
}

/** `jupyter nbconvert --to notebook --execute` of the same notebook, spawn to exit. */
function nbconvert(dir) {
  return new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    const child = spawn('/usr/bin/python3', ['-m', 'nbconvert', '--to', 'notebook', '--execute', '--output', 'out.ipynb', 'nb.ipynb'], {
      cwd: dir,
      env: {
        PATH: '/usr/bin:/bin',
        HOME: dir,
        LANG: 'C.UTF-8',
        PYDEVD_DISABLE_FILE_VALIDATION: '1',
        IPYTHONDIR: join(dir, '.ipython'),
        JUPYTER_RUNTIME_DIR: join(dir, 'rt'),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - t) / 1e6) : reject(new Error(`nbconvert exited ${code}: ${err}`))));
  });
}

export async function measureRunLatency() {
  process.env.CODEAGENT_TEST_DB ??= 'postgres';
  const b = await startTestBackend({ runLimits: { maxQueuedRunsPerWorkspace: 100_000 } });
  const url = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const dir = mkdtempSync(join(tmpdir(), 'bench-finish-'));
  const warm = await runtime(1);
  const cold = await runtime(0);
  const mounted = MOUNTED ? await runtime(1, { db: b.t.database.db, backendUrl: url, dataDir: join(dir, 'mounts') }) : undefined;
  writeFileSync(join(dir, 'nb.ipynb'), JSON.stringify(NOTEBOOK));
  let worker;
  try {
    const editor = await createAndLogin(b, 'bench-finish@example.com');
    const workspace = async (name) => {
      const id = await createWorkspace(b, name);
      await addMembers(b, id, [[editor, 'editor']]);
      const put = await fetch(`${url}/api/v1/data-resources/${id}/objects/nb.ipynb`, {
        method: 'PUT',
        headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
        body: JSON.stringify(NOTEBOOK),
      });
      if (!put.ok) throw new Error(`PUT nb.ipynb answered ${put.status}`);
      return id;
    };
    const wsWarm = await workspace('bench-warm');
    const wsCold = await workspace('bench-cold');
    const wsMounted = mounted ? await workspace('bench-mounted') : undefined;
    const nb = Buffer.from(JSON.stringify(NOTEBOOK));
    const byWorkspace = new Map([[wsWarm, warm], [wsCold, cold], ...(mounted ? [[wsMounted, mounted]] : [])]);

    let onRunning;
    let onFinished;
    const io = {
      readNotebook: async () => nb,
      readWorkspaceFiles: async () => [{ path: 'data.csv', content: Buffer.from('a,b\n1,2\n') }],
      writeExecutedNotebook: async () => undefined,
      writeRunLog: async (w, id) => `${w}/${id}.log`,
    };
    const dispatch = {
      runNotebook(notebook, timeout, context, signal, requestId) {
        onRunning?.(process.hrtime.bigint());
        return byWorkspace.get(context.workspaceId).client.runNotebook(notebook, timeout, context, signal, requestId);
      },
    };
    worker = new ScheduleWorker({
      db: b.t.database.db,
      io,
      runtime: dispatch,
      log: pino({ level: 'silent' }),
      concurrency: 2,
      pollMs: 60_000,
      listen: b.t.database.listen,
      onFinished: (status) => onFinished?.(status),
    });
    worker.start();
    while (!worker.listening) await new Promise((r) => setTimeout(r, 10));

    const oneRun = async (ws) => {
      const running = new Promise((r) => (onRunning = r));
      const finished = new Promise((r) => (onFinished = (status) => r({ status, t: process.hrtime.bigint() })));
      const t0 = process.hrtime.bigint();
      const res = await fetch(`${url}/api/v1/workspaces/${ws}/runs`, {
        method: 'POST',
        headers: { ...bearer(editor.token), 'content-type': 'application/json' },
        body: JSON.stringify({ notebook_path: 'nb.ipynb' }),
      });
      if (res.status !== 202) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
      const t1 = await running;
      const end = await Promise.race([finished, new Promise((_, rej) => setTimeout(() => rej(new Error('run did not finish in 120 s')), 120_000))]);
      if (end.status !== 'succeeded') throw new Error(`run ended ${end.status}`);
      return { running: Number(t1 - t0) / 1e6, finished: Number(end.t - t0) / 1e6 };
    };

    // The first run of each workspace starts its Jupyter server (and fills the pool): not counted.
    await oneRun(wsWarm);
    await oneRun(wsCold);
    if (mounted) await oneRun(wsMounted);
    await nbconvert(dir);
    const samples = { warm: { running: [], finished: [] }, cold: { running: [], finished: [] }, mounted: { running: [], finished: [] }, anchor: [] };
    let warmHits = 0;
    for (let i = 0; i < RUNS; i++) {
      await warm.kernels.kernels.warm.settled();
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 300));
      warmHits += warm.kernels.kernels.warm.stats(wsWarm).ready > 0 ? 1 : 0;
      const w = await oneRun(wsWarm);
      samples.warm.running.push(w.running);
      samples.warm.finished.push(w.finished);
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 300));
      const c = await oneRun(wsCold);
      samples.cold.running.push(c.running);
      samples.cold.finished.push(c.finished);
      if (mounted) {
        await mounted.kernels.kernels.warm.settled();
        await new Promise((r) => setTimeout(r, 300 + Math.random() * 300));
        const m = await oneRun(wsMounted);
        samples.mounted.running.push(m.running);
        samples.mounted.finished.push(m.finished);
      }
      samples.anchor.push(await nbconvert(dir));
    }
    // Back to back: each run sent as the one before finished, so the pool is still starting the
    // replacement (decision 0206: the run takes that start instead of one of its own).
    const burst = { running: [], finished: [] };
    await warm.kernels.kernels.warm.settled();
    for (let i = 0; i < RUNS; i++) {
      const w = await oneRun(wsWarm);
      burst.running.push(w.running);
      burst.finished.push(w.finished);
    }
    const anchor = stats(samples.anchor);
    const row = (name, s) => {
      const r = stats(s.running);
      const f = stats(s.finished);
      return {
        path: name,
        runs: f.runs,
        'running p50 ms': f1(r.p50),
        'running p99 ms': f1(r.p99),
        'finished p50 ms': f1(f.p50),
        'finished p99 ms': f1(f.p99),
        '÷ anchor p50': `${(f.p50 / anchor.p50).toFixed(2)}×`,
      };
    };
    return {
      warmHits,
      rows: [
        {
          path: 'anchor: jupyter nbconvert --execute',
          runs: anchor.runs,
          'running p50 ms': '–',
          'running p99 ms': '–',
          'finished p50 ms': f1(anchor.p50),
          'finished p99 ms': f1(anchor.p99),
          '÷ anchor p50': '1.00×',
        },
        row('platform, no pool (KERNEL_POOL_SIZE=0, before)', samples.cold),
        row('platform, warm pool (KERNEL_POOL_SIZE=1)', samples.warm),
        ...(mounted ? [row('platform, warm pool, workspace mounted (the default as root)', samples.mounted)] : []),
        row('platform, warm pool, runs back to back (pool refilling)', burst),
      ],
    };
  } finally {
    await worker?.stop(5000);
    for (const rt of [warm, cold, mounted].filter(Boolean)) {
      await rt.app.close();
      await rt.kernels.stop();
    }
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log('bench/runs: POST run → running → finished, one-cell notebook, real sandboxed kernels, PostgreSQL');
  const { rows, warmHits } = await measureRunLatency();
  console.log(table(rows));
  console.log(
    `warm kernel ready before the run: ${warmHits}/${RUNS}; load average ${(await import('node:os'))
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
  process.exit(0);
}
