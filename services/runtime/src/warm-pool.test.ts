import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { KernelAPI } from '@jupyterlab/services';
import { buildRuntimeApp } from './app.js';
import type { Kernels } from './kernels-factory.js';
import type { WarmKernelPool } from './warm-pool.js';
import { startTestKernels } from './testing.js';

const TOKEN = 'runtime-warm-pool-test-token';
const WS_A = '1a1a1a1a-0000-4000-8000-00000000001a';
const WS_B = '1b1b1b1b-0000-4000-8000-00000000001b';
const WS_C = '1c1c1c1c-0000-4000-8000-00000000001c';

/** Prints the id of the kernel running the cell (from its connection file's name). */
const WHO = 'import sys\nprint("kernel:" + sys.argv[-1].rsplit("kernel-", 1)[-1][:-5])\n';
const notebook = (...sources: string[]) => ({
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: 'python3' } },
  cells: sources.map((source) => ({ cell_type: 'code', source, metadata: {}, outputs: [], execution_count: null })),
});
type Cell = { execution_count: number | null; outputs: { text?: string; ename?: string; evalue?: string }[] };
const textOf = (cells: Cell[]) => cells.flatMap((c) => c.outputs.map((o) => o.text ?? `${o.ename}: ${o.evalue}`)).join('');
const kernelOf = (out: string) => /kernel:([0-9a-f-]{36})/.exec(out)?.[1];

describe('warm kernel pool (issue 17): runs start on a warm kernel of their own workspace, with fresh state', () => {
  let k: Kernels;
  let app: FastifyInstance;
  let warm: WarmKernelPool;
  const runNotebook = async (workspace_id: string, sources: string[], extra: Record<string, unknown> = {}) => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/jupyter',
      headers: { 'x-internal-service-token': TOKEN },
      payload: { action: 'run_notebook', notebook: notebook(...sources), timeout_seconds: 120, workspace_id, ...extra },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<{ status: string; notebook: { cells: Cell[] } }>();
    return { status: body.status, cells: body.notebook.cells, out: textOf(body.notebook.cells) };
  };
  const act = (body: Record<string, unknown>) =>
    app.inject({ method: 'POST', url: '/api/v1/jupyter', headers: { 'x-internal-service-token': TOKEN }, payload: body });
  /** Every kernel the workspaces' Jupyter servers run, asked of the servers themselves (warm ones included). */
  const liveKernels = async () => {
    await k.kernels.kernelsEnded();
    const all: { id: string; ws: string | undefined }[] = [];
    for (const server of k.pool.running()) for (const m of await KernelAPI.listRunning(server.settings)) all.push({ id: m.id, ws: server.workspaceId });
    return all;
  };

  beforeAll(async () => {
    k = await startTestKernels({ log: pino({ level: 'silent' }), sandbox: { maxServers: 6 }, warmPool: { size: 1, max: 2, idleSeconds: 600 } });
    app = await buildRuntimeApp({ kernels: k.kernels, internalServiceToken: TOKEN });
    warm = k.kernels.warm!;
    expect(warm).toBeDefined();
  }, 60_000);
  afterAll(async () => {
    await app.close();
    await k.stop();
  }, 60_000);

  it("a run takes the warm kernel of its workspace (in the run's directory) and the pool starts the next one", async () => {
    const first = await runNotebook(WS_A, [WHO]);
    expect(first.status, first.out).toBe('ok');
    await warm.settled();
    const [pooled] = warm.readyKernels(WS_A);
    expect(pooled).toMatch(/^[0-9a-f-]{36}$/);
    expect(kernelOf(first.out)).not.toBe(pooled);

    // The next run gets exactly that kernel, moved into the run's own directory with the files.
    const second = await runNotebook(WS_A, [WHO + 'import os\nprint("cwd:" + os.getcwd())\nprint("data:" + open("data.txt").read())'], {
      notebook_path: 'sub/nb.ipynb',
      files: [{ path: 'sub/data.txt', content_base64: Buffer.from('hello from A').toString('base64') }],
    });
    expect(second.status, second.out).toBe('ok');
    expect(kernelOf(second.out)).toBe(pooled);
    expect(second.out).toContain('data:hello from A');
    expect(second.out).toMatch(/cwd:\/workspace\/\.codeagent-runs\/[0-9a-f-]{36}\/sub\n/);
    // The silent chdir left no trace: the run's first cell is execution 1.
    expect(second.cells[0]!.execution_count).toBe(1);

    // Used once and shut down; a new warm kernel took its place.
    await warm.settled();
    const refilled = warm.readyKernels(WS_A);
    expect(refilled).toHaveLength(1);
    expect(refilled[0]).not.toBe(pooled);
    const live = (await liveKernels()).map((l) => l.id);
    expect(live).not.toContain(pooled);
    expect(live).toContain(refilled[0]);
  }, 180_000);

  it("two consecutive runs never see each other's variables", async () => {
    const one = await runNotebook(WS_A, [WHO + 'secret = "left by run one"\nimport json']);
    expect(one.status, one.out).toBe('ok');
    await warm.settled();
    const two = await runNotebook(WS_A, [WHO + 'print("seen:", "secret" in globals(), "json" in globals(), len(In))']);
    expect(two.status, two.out).toBe('ok');
    expect(kernelOf(two.out)).not.toBe(kernelOf(one.out));
    expect(two.out).toContain('seen: False False 2');
    expect(two.cells[0]!.execution_count).toBe(1);
  }, 180_000);

  it("never hands workspace A's warm kernel to a run of workspace B", async () => {
    await warm.settled();
    const [warmA] = warm.readyKernels(WS_A);
    expect(warmA).toBeDefined();
    const b = await runNotebook(WS_B, [WHO + 'import os\nprint("uid:", os.getuid())\nprint("A files:", os.path.exists("/workspace/.codeagent-runs"))']);
    expect(b.status, b.out).toBe('ok');
    expect(kernelOf(b.out)).not.toBe(warmA);
    expect(warm.readyKernels(WS_A)).toEqual([warmA]);
    await warm.settled();
    // Each warm kernel runs in its own workspace's sandbox.
    const live = await liveKernels();
    expect(live.find((l) => l.id === warmA)?.ws).toBe(WS_A);
    const [warmB] = warm.readyKernels(WS_B);
    expect(live.find((l) => l.id === warmB)?.ws).toBe(WS_B);
    // B's next run gets B's warm kernel, not A's.
    const b2 = await runNotebook(WS_B, [WHO]);
    expect(kernelOf(b2.out)).toBe(warmB);
    expect(warm.readyKernels(WS_A)).toEqual([warmA]);
  }, 180_000);

  it('holds its caps under a burst of runs (1 per workspace, 2 in all) and leaks no kernel', async () => {
    await warm.settled();
    const results = await Promise.all([...Array.from({ length: 3 }, () => runNotebook(WS_C, [WHO])), runNotebook(WS_A, [WHO]), runNotebook(WS_B, [WHO])]);
    for (const r of results) expect(r.status, r.out).toBe('ok');
    // Each run had a kernel of its own.
    expect(new Set(results.map((r) => kernelOf(r.out))).size).toBe(5);
    await warm.settled();
    const total = warm.stats(null);
    expect(total.starting).toBe(0);
    expect(total.ready).toBeLessThanOrEqual(2);
    for (const ws of [WS_A, WS_B, WS_C]) expect(warm.readyKernels(ws).length).toBeLessThanOrEqual(1);
    // Every kernel still running is a warm one: the runs' kernels were shut down, none leaked.
    const live = (await liveKernels()).map((l) => l.id).sort();
    expect(live).toEqual([WS_A, WS_B, WS_C].flatMap((ws) => warm.readyKernels(ws)).sort());
  }, 240_000);

  it('keeps warm kernels out of reach of kernel actions and list_kernels', async () => {
    await warm.settled();
    const [warmC] = warm.readyKernels(WS_C).length
      ? warm.readyKernels(WS_C)
      : warm.readyKernels(WS_B).length
        ? warm.readyKernels(WS_B)
        : warm.readyKernels(WS_A);
    expect(warmC).toBeDefined();
    for (const action of ['execute', 'interrupt', 'restart', 'shutdown']) {
      const res = await act({ action, kernel_id: warmC, ...(action === 'execute' ? { code: 'planted = 1' } : {}) });
      expect(res.statusCode, `${action}: ${res.body}`).toBe(404);
    }
    const listed = (await act({ action: 'list_kernels' })).json<{ kernels: { kernel_id: string }[] }>();
    expect(listed.kernels.map((x) => x.kernel_id)).not.toContain(warmC);
    expect((await liveKernels()).map((l) => l.id)).toContain(warmC);
  }, 60_000);

  it('never hands out a warm kernel that died: the run starts its own', async () => {
    await warm.settled();
    const [warmA] = warm.readyKernels(WS_A).length ? warm.readyKernels(WS_A) : (await runNotebook(WS_A, ['1']), await warm.settled(), warm.readyKernels(WS_A));
    expect(warmA).toBeDefined();
    const server = k.pool.running().find((s) => s.workspaceId === WS_A)!;
    await KernelAPI.shutdownKernel(warmA!, server.settings);
    const run = await runNotebook(WS_A, [WHO]);
    expect(run.status, run.out).toBe('ok');
    expect(kernelOf(run.out)).not.toBe(warmA);
  }, 120_000);

  it('empties the pool of a workspace with no run for KERNEL_POOL_IDLE_SECONDS', async () => {
    await warm.settled();
    expect(warm.stats(null).ready).toBeGreaterThan(0);
    await warm.cullIdle(Date.now());
    expect(warm.stats(null).ready).toBeGreaterThan(0);
    await warm.cullIdle(Date.now() + 601_000);
    expect(warm.stats(null)).toEqual({ ready: 0, starting: 0 });
    expect(await liveKernels()).toEqual([]);
  }, 120_000);

  it('warm_up readies a workspace before its first run: its server and one warm kernel, which the run then takes (decision 0209)', async () => {
    const WS_D = '1d1d1d1d-0000-4000-8000-00000000001d';
    expect(warm.stats(WS_D)).toEqual({ ready: 0, starting: 0 });
    const res = await act({ action: 'warm_up', workspace_id: WS_D });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ warming: true });
    await warm.settled();
    const ready = warm.readyKernels(WS_D);
    expect(ready).toHaveLength(1);
    // Asked again: nothing more starts (the pool is full).
    await act({ action: 'warm_up', workspace_id: WS_D });
    await warm.settled();
    expect(warm.readyKernels(WS_D)).toEqual(ready);
    const run = await runNotebook(WS_D, [WHO]);
    expect(kernelOf(run.out)).toBe(ready[0]);
    // A workspace id that is not one: 400, nothing started.
    expect((await act({ action: 'warm_up', workspace_id: 'nope' })).statusCode).toBe(400);
  }, 120_000);
});
