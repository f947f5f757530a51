// bench/runs, run latency: from `POST /api/v1/workspaces/{ws}/runs` (HTTP, a real backend on
// PostgreSQL) to the run being `running` and its notebook handed to the runtime (an in-process
// stand-in that answers at once), with the worker woken by NOTIFY (WORKER_POLL_MS 60 000, so
// only the notification can start a run) and, as the anchor in the same run, the worker
// polling every 1 000 ms (the default WORKER_POLL_MS) without listening — how runs started
// before issue 17. Requests are spaced by a random pause, so the poll's phase is uniform.
// Run alone: `node bench/runs/start.mjs`; `npm run bench runs` runs it after the other parts.
import pino from 'pino';
import { startTestBackend, createAndLogin, createWorkspace, addMembers, bearer } from '@codeagent/backend/testing';
import { ScheduleWorker } from '@codeagent/worker';
import { table } from '../lib.mjs';

const NOTIFY_RUNS = Number(process.env.BENCH_START_RUNS ?? 200);
const POLL_RUNS = Number(process.env.BENCH_POLL_RUNS ?? 40);

const stats = (samples) => {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { runs: s.length, p50_ms: at(0.5).toFixed(1), p99_ms: at(0.99).toFixed(1), max_ms: s.at(-1).toFixed(1) };
};

export async function measureStartLatency() {
  process.env.CODEAGENT_TEST_DB ??= 'postgres';
  const b = await startTestBackend({ runLimits: { maxQueuedRunsPerWorkspace: 100_000 } });
  try {
    const url = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    const editor = await createAndLogin(b, 'bench-editor@example.com');
    const ws = await createWorkspace(b, 'bench-start');
    await addMembers(b, ws, [[editor, 'editor']]);
    const nb = JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
    await fetch(`${url}/api/v1/data-resources/${ws}/objects/nb.ipynb`, {
      method: 'PUT',
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      body: nb,
    });

    // When the worker handed each run to the runtime (it may come before the POST's answer is read).
    const arrived = new Map();
    const waiting = new Map();
    const runtime = {
      async runNotebook(notebook, _timeout, _context, _signal, requestId) {
        const id = requestId.replace(/^run-/, '');
        const t = process.hrtime.bigint();
        arrived.set(id, t);
        waiting.get(id)?.(t);
        return { status: 'ok', notebook, duration_ms: 0 };
      },
    };
    const io = { readNotebook: async () => Buffer.from(nb), writeExecutedNotebook: async () => undefined, writeRunLog: async (w, id) => `${w}/${id}.log` };

    async function measure(workerOptions, n) {
      // (With the default cap of running runs per workspace, decision 0234: the claim then takes its lock.)
      const worker = new ScheduleWorker({
        db: b.t.database.db,
        io,
        runtime,
        log: pino({ level: 'silent' }),
        concurrency: 4,
        maxRunningPerWorkspace: 1,
        ...workerOptions,
      });
      worker.start();
      while (workerOptions.listen && !worker.listening) await new Promise((r) => setTimeout(r, 10));
      const samples = [];
      const posts = [];
      for (let i = 0; i < n + 5; i++) {
        await new Promise((r) => setTimeout(r, Math.random() * 1000));
        const t0 = process.hrtime.bigint();
        const res = await fetch(`${url}/api/v1/workspaces/${ws}/runs`, {
          method: 'POST',
          headers: { ...bearer(editor.token), 'content-type': 'application/json' },
          body: JSON.stringify({ notebook_path: 'nb.ipynb' }),
        });
        if (res.status !== 202) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
        const { id } = await res.json();
        const answered = process.hrtime.bigint();
        const t1 = arrived.get(id) ?? (await new Promise((resolve) => waiting.set(id, resolve)));
        waiting.delete(id);
        if (i >= 5) {
          samples.push(Number(t1 - t0) / 1e6);
          posts.push(Number(answered - t0) / 1e6);
        }
      }
      await worker.stop(5000);
      return { ...stats(samples), 'POST answered p50_ms': stats(posts).p50_ms };
    }

    const notified = await measure({ pollMs: 60_000, listen: b.t.database.listen }, NOTIFY_RUNS);
    const polled = await measure({ pollMs: 1000 }, POLL_RUNS);
    return [
      { worker: 'polling every 1 000 ms, no LISTEN (anchor: before issue 17)', ...polled },
      { worker: 'LISTEN/NOTIFY (poll 60 000 ms as fallback only)', ...notified },
    ];
  } finally {
    await b.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log('bench/runs: POST run → running (notebook handed to the runtime), PostgreSQL');
  console.log(table(await measureStartLatency()));
  process.exit(0);
}
