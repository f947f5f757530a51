import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { INTERNAL_TOKEN, bearer, startTestBackend, type TestBackend } from '@codeagent/backend/testing';
import { ManagedJupyterServer, KernelService, buildRuntimeApp } from '@codeagent/runtime';
import { WorkspaceFiles } from '@codeagent/storage';
import type { FastifyInstance } from 'fastify';
import { ScheduleWorker } from './worker.js';
import { platformRunIO } from './server.js';
import { runtimeClient } from './clients.js';

const log = pino({ level: 'silent' });
const notebook = (cells: string[]) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: cells.map((source, i) => ({ cell_type: 'code', source, metadata: i === 0 ? { tags: ['parameters'] } : {}, outputs: [], execution_count: null })),
  });

/** The whole path on real components: schedule → worker → runtime (real kernel) → run log via the internal route → API. */
describe(`runs end to end (${process.env.CODEAGENT_TEST_DB ?? 'pglite'})`, () => {
  let b: TestBackend;
  let jupyter: ManagedJupyterServer;
  let runtime: FastifyInstance;
  let worker: ScheduleWorker;
  let ws: string;

  beforeAll(async () => {
    b = await startTestBackend();
    const backendUrl = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    jupyter = new ManagedJupyterServer({ python: '/usr/bin/python3', rootDir: '/tmp/codeagent-e2e-runtime', cullIdleSeconds: 0, log });
    runtime = await buildRuntimeApp({ kernels: new KernelService(jupyter), internalServiceToken: INTERNAL_TOKEN });
    const runtimeUrl = (await runtime.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    worker = new ScheduleWorker({
      db: b.t.database.db,
      io: platformRunIO(new WorkspaceFiles(b.t.database.db, b.store), backendUrl, INTERNAL_TOKEN),
      runtime: runtimeClient(runtimeUrl, INTERNAL_TOKEN),
      log,
      pollMs: 200,
      runTimeoutSeconds: 60,
    });
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'e2e' } })).json().id;
    const put = (path: string, body: string) =>
      b.app.inject({ method: 'PUT', url: `/api/v1/data-resources/${ws}/objects/${path}`, headers: { ...bearer(b.adminToken), 'content-type': 'application/x-ipynb+json' }, payload: body });
    expect((await put('jobs/hello.ipynb', notebook(['greeting = "hi"', 'print(greeting, 6 * 7)']))).statusCode).toBe(201);
    expect((await put('jobs/broken.ipynb', notebook(['x = 1', '1 / 0']))).statusCode).toBe(201);
    worker.start();
  }, 90_000);
  afterAll(async () => {
    await worker.stop(5000);
    await runtime.close();
    await jupyter.stop();
    await b.close();
  });

  const api = (url: string, method = 'GET', payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/workspaces/${ws}/${url}`, headers: bearer(b.adminToken), ...(payload ? { payload } : {}) });

  async function waitForRun(find: () => Promise<{ id: string; status: string } | undefined>, timeoutMs = 45_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = await find();
      if (run && !['queued', 'running'].includes(run.status)) return run;
      if (Date.now() > deadline) throw new Error(`run did not finish in time: ${JSON.stringify(run)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it('fires a schedule with a seconds field and shows the run, its log and the executed notebook', async () => {
    const schedule = await api('schedules', 'POST', { notebook_path: 'jobs/hello.ipynb', cron: '*/2 * * * * *' });
    expect(schedule.statusCode).toBe(201);
    const scheduleId = schedule.json().id as string;
    const run = await waitForRun(async () => (await api(`runs?schedule_id=${scheduleId}`)).json().items.at(-1));
    await api(`schedules/${scheduleId}`, 'PATCH', { enabled: false });

    const got = (await api(`runs/${run.id}`)).json();
    expect(got).toMatchObject({ status: 'succeeded', schedule_id: scheduleId, error: null, output_path: `jobs/hello.runs/${run.id}.ipynb`, log_key: `${ws}/${run.id}.log` });
    expect(Date.parse(got.finished_at)).toBeGreaterThanOrEqual(Date.parse(got.started_at));

    const logRes = await api(`runs/${run.id}/log`);
    expect(logRes.statusCode).toBe(200);
    const events = logRes.body.trim().split('\n').map((l) => JSON.parse(l));
    expect(events.map((e) => e.event)).toEqual(['claimed', 'started', 'executed', 'stored', 'finished']);

    const executed = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/jobs/hello.runs/${run.id}.ipynb`, headers: bearer(b.adminToken) });
    expect(executed.statusCode).toBe(200);
    const cells = JSON.parse(executed.body).cells;
    expect(cells[1].outputs[0]).toMatchObject({ output_type: 'stream', text: 'hi 42\n' });
  });

  it('runs now with parameters, and records a failing notebook as failed with its error', async () => {
    const ok = await api('runs', 'POST', { notebook_path: 'jobs/hello.ipynb', parameters: { greeting: 'hello' } });
    expect(ok.statusCode).toBe(202);
    const bad = await api('runs', 'POST', { notebook_path: 'jobs/broken.ipynb' });
    const okRun = await waitForRun(async () => (await api(`runs/${ok.json().id}`)).json());
    const badRun = await waitForRun(async () => (await api(`runs/${bad.json().id}`)).json());
    expect(okRun.status).toBe('succeeded');
    const out = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/jobs/hello.runs/${okRun.id}.ipynb`, headers: bearer(b.adminToken) });
    const cells = JSON.parse(out.body).cells as { outputs: { text?: string }[]; metadata: { tags?: string[] } }[];
    expect(cells[1]!.metadata.tags).toEqual(['injected-parameters']);
    expect(cells[2]!.outputs[0]!.text).toBe('hello 42\n');
    expect(badRun).toMatchObject({ status: 'failed', error: 'ZeroDivisionError: division by zero' });
  });
});
