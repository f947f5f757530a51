import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { INTERNAL_TOKEN, bearer, startTestBackend, type RunDto, type ScheduleDto, type TestBackend, type WorkspaceDto } from '@codeagent/backend/testing';
import { buildRuntimeApp, type Kernels } from '@codeagent/runtime';
import { startTestKernels } from '@codeagent/runtime/testing';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { WorkspaceFiles, type VersionDto } from '@codeagent/files';
import type { ListPage } from '@codeagent/service-kit';
import type { FastifyInstance } from 'fastify';
import { ScheduleWorker } from './worker.js';
import { platformRunIO } from './server.js';
import { runtimeClient } from '@codeagent/clients';

/** A line of a run's log (worker.ts). */
type LogEvent = { event: string; time: string; written?: string[]; files_copied_in?: number };
/** An executed notebook as stored (nbformat 4), with the output fields these tests read. */
type Executed = { cells: { outputs: { output_type: string; text?: string; data?: Record<string, string> }[]; metadata: { tags?: string[] } }[] };

// The components' log lines, kept to explain a failure (printed by the test that fails).
const logLines: string[] = [];
const log = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
const notebook = (cells: string[]) =>
  JSON.stringify({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: cells.map((source, i) => ({ cell_type: 'code', source, metadata: i === 0 ? { tags: ['parameters'] } : {}, outputs: [], execution_count: null })),
  });

/** The whole path on real components: schedule → worker → runtime (real kernel) → run log via the internal route → API. */
describe(`runs end to end (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let jupyter: Kernels;
  let runtime: FastifyInstance;
  let worker: ScheduleWorker;
  let ws: string;

  beforeAll(async () => {
    b = await startTestBackend({ runLimits: { scheduleMinIntervalSeconds: 1 } });
    const backendUrl = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    jupyter = await startTestKernels({ log, uids: databaseUidAllocator(b.t.database.db, 1_900_000_000) });
    runtime = await buildRuntimeApp({ kernels: jupyter.kernels, internalServiceToken: INTERNAL_TOKEN });
    const runtimeUrl = (await runtime.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
    worker = new ScheduleWorker({
      db: b.t.database.db,
      io: platformRunIO(new WorkspaceFiles(b.t.database.db, b.store), backendUrl, INTERNAL_TOKEN),
      runtime: runtimeClient(runtimeUrl, INTERNAL_TOKEN),
      log,
      pollMs: 200,
      // One run at a time: the cancel test shows the slot is freed. A long time-out: only a
      // cancel can end the sleeping notebook of that test in time.
      concurrency: 1,
      runTimeoutSeconds: 900,
      filesMaxBytes: 16 * 1024 * 1024,
    });
    ws = (
      await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'e2e' } })
    ).json<WorkspaceDto>().id;
    const put = (path: string, body: string) =>
      b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${ws}/objects/${path}`,
        headers: { ...bearer(b.adminToken), 'content-type': 'application/x-ipynb+json' },
        payload: body,
      });
    expect((await put('jobs/hello.ipynb', notebook(['greeting = "hi"', 'print(greeting, 6 * 7)']))).statusCode).toBe(201);
    expect((await put('jobs/broken.ipynb', notebook(['x = 1', '1 / 0']))).statusCode).toBe(201);
    expect((await put('jobs/sleep.ipynb', notebook(['x = 1', 'import time\ntime.sleep(600)']))).statusCode).toBe(201);
    worker.start();
  }, 90_000);
  afterAll(async () => {
    // A failed test may leave a run holding the runtime (the 600 s sleep): cancel what is left,
    // so that the worker aborts its runtime call and the runtime can close.
    const left = (await api('runs?status=running')).json<ListPage<RunDto>>().items;
    for (const run of [...left, ...(await api('runs?status=queued')).json<ListPage<RunDto>>().items]) await api(`runs/${run.id}/cancel`, 'POST');
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
    const scheduleId = schedule.json<ScheduleDto>().id;
    const run = await waitForRun(async () => (await api(`runs?schedule_id=${scheduleId}`)).json<ListPage<RunDto>>().items.at(-1));
    await api(`schedules/${scheduleId}`, 'PATCH', { enabled: false });
    // Ticks queued meanwhile would hold the worker's single slot: cancel them.
    for (const queued of (await api(`runs?schedule_id=${scheduleId}&status=queued`)).json<ListPage<RunDto>>().items) {
      await api(`runs/${queued.id}/cancel`, 'POST');
    }

    const got = (await api(`runs/${run.id}`)).json<RunDto>();
    expect(got).toMatchObject({
      status: 'succeeded',
      schedule_id: scheduleId,
      error: null,
      output_path: `jobs/hello.runs/${run.id}.ipynb`,
      log_key: `${ws}/${run.id}.log`,
    });
    expect(Date.parse(got.finished_at ?? '')).toBeGreaterThanOrEqual(Date.parse(got.started_at ?? ''));

    const logRes = await api(`runs/${run.id}/log`);
    expect(logRes.statusCode).toBe(200);
    const events = logRes.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LogEvent);
    expect(events.map((e) => e.event)).toEqual(['claimed', 'started', 'executed', 'stored', 'finished']);
    // This runtime does not mount the workspace: it asked for the files, and the worker copied them in.
    expect(events.find((e) => e.event === 'executed')?.files_copied_in).toBeGreaterThan(0);

    const executed = await b.app.inject({
      method: 'GET',
      url: `/api/v1/data-resources/${ws}/objects/jobs/hello.runs/${run.id}.ipynb`,
      headers: bearer(b.adminToken),
    });
    expect(executed.statusCode).toBe(200);
    const cells = (JSON.parse(executed.body) as Executed).cells;
    expect(cells[1]!.outputs[0]).toMatchObject({ output_type: 'stream', text: 'hi 42\n' });
  }, 90_000);

  it('runs now with parameters, and records a failing notebook as failed with its error', async () => {
    const ok = await api('runs', 'POST', { notebook_path: 'jobs/hello.ipynb', parameters: { greeting: 'hello' } });
    expect(ok.statusCode).toBe(202);
    const bad = await api('runs', 'POST', { notebook_path: 'jobs/broken.ipynb' });
    const okRun = await waitForRun(async () => (await api(`runs/${ok.json<RunDto>().id}`)).json<RunDto>());
    const badRun = await waitForRun(async () => (await api(`runs/${bad.json<RunDto>().id}`)).json<RunDto>());
    expect(okRun.status).toBe('succeeded');
    const out = await b.app.inject({
      method: 'GET',
      url: `/api/v1/data-resources/${ws}/objects/jobs/hello.runs/${okRun.id}.ipynb`,
      headers: bearer(b.adminToken),
    });
    const cells = (JSON.parse(out.body) as Executed).cells;
    expect(cells[1]!.metadata.tags).toEqual(['injected-parameters']);
    expect(cells[2]!.outputs[0]!.text).toBe('hello 42\n');
    expect(badRun).toMatchObject({ status: 'failed', error: 'ZeroDivisionError: division by zero' });
  }, 90_000);

  it('cancels a running notebook: the run ends cancelled, its kernel is stopped, and the worker takes the next run', async () => {
    const kernels = async (): Promise<{ kernel_id: string; execution_state: string }[]> =>
      (
        await runtime.inject({
          method: 'POST',
          url: '/api/v1/jupyter',
          headers: { 'x-internal-service-token': INTERNAL_TOKEN },
          payload: { action: 'list_kernels' },
        })
      ).json<{ kernels: { kernel_id: string; execution_state: string }[] }>().kernels;
    const queued = await api('runs', 'POST', { notebook_path: 'jobs/sleep.ipynb' });
    expect(queued.statusCode).toBe(202);
    const id = queued.json<RunDto>().id;
    // Wait until the run is on its kernel (a sandboxed kernel starts in seconds; one that hangs
    // at its start is replaced by the runtime after 60 s).
    const deadline = Date.now() + 90_000;
    let busy: string | undefined;
    while (!busy && Date.now() < deadline) {
      const run = (await api(`runs/${id}`)).json<RunDto>();
      if (run.status === 'running') {
        // The run's kernel is the workspace's only one (earlier runs shut theirs down before they
        // ended). Its execution_state is jupyter_server's view, which can stay 'starting' while
        // the kernel runs the cell (seen in CI: the kernel's main thread in time.sleep).
        const listed = await kernels();
        busy = (listed.find((k) => k.execution_state === 'busy') ?? (listed.length === 1 ? listed[0] : undefined))?.kernel_id;
      }
      if (!busy) await new Promise((r) => setTimeout(r, 200));
    }
    if (!busy) {
      const runs = (await api('runs')).json<ListPage<RunDto>>().items;
      expect.fail(
        `the sleeping notebook never ran on a busy kernel: runs ${JSON.stringify(runs.map((r) => [r.notebook_path, r.status]))}, kernels ${JSON.stringify(await kernels())}, log:\n${logLines.slice(-15).join('')}`,
      );
    }

    const cancelled = await api(`runs/${id}/cancel`, 'POST');
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ id, status: 'cancelled' });
    expect((await api(`runs/${id}/cancel`, 'POST')).statusCode).toBe(409);

    // The worker notices, aborts the runtime call, and the runtime shuts the kernel down.
    let alive = true;
    while (alive && Date.now() < deadline) {
      alive = (await kernels()).some((k) => k.kernel_id === busy);
      if (alive) await new Promise((r) => setTimeout(r, 200));
    }
    expect(alive, 'the cancelled run’s kernel is still running').toBe(false);

    // The single slot is free again: the next run goes through (the sleep would hold it 600 s).
    const next = await api('runs', 'POST', { notebook_path: 'jobs/hello.ipynb' });
    const nextRun = await waitForRun(async () => (await api(`runs/${next.json<RunDto>().id}`)).json<RunDto>());
    expect(nextRun.status).toBe('succeeded');

    // The cancelled run stays cancelled, with its log saying so; no executed notebook was stored.
    const after = (await api(`runs/${id}`)).json<RunDto>();
    expect(after).toMatchObject({ status: 'cancelled', output_path: null, log_key: `${ws}/${id}.log` });
    const events = (await api(`runs/${id}/log`)).body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LogEvent);
    expect(events.map((e) => e.event)).toEqual(['claimed', 'started', 'cancelled']);
  }, 150_000);

  it('runs an ordinary notebook in its sandbox: reads a workspace file, shows an image, writes a result that becomes a new version', async () => {
    const put = (path: string, body: string, type = 'text/csv') =>
      b.app.inject({
        method: 'PUT',
        url: `/api/v1/data-resources/${ws}/objects/${path}`,
        headers: { ...bearer(b.adminToken), 'content-type': type },
        payload: body,
      });
    expect((await put('data/sample.csv', 'x,y\n1,2\n3,4\n5,6\n')).statusCode).toBe(201);
    const cells = [
      'import csv\nrows = list(csv.DictReader(open("../data/sample.csv")))\ntotal = sum(int(r["x"]) * int(r["y"]) for r in rows)\nprint("rows", len(rows), "total", total)',
      [
        'import struct, zlib',
        'from IPython.display import Image, display',
        'def png(w, h, rgb):',
        '    raw = b"".join(b"\\x00" + bytes(rgb) * w for _ in range(h))',
        '    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)',
        '    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")',
        'display(Image(data=png(4, 3, (255, 0, 0))))',
      ].join('\n'),
      'import os\nos.makedirs("../reports", exist_ok=True)\nwith open("../reports/result.csv", "w") as f:\n    f.write(f"total\\n{total}\\n")\nprint("written")',
    ];
    expect((await put('jobs/ordinary.ipynb', notebook(cells), 'application/x-ipynb+json')).statusCode).toBe(201);

    const first = (await api('runs', 'POST', { notebook_path: 'jobs/ordinary.ipynb' })).json<RunDto>();
    const done = await waitForRun(async () => (await api(`runs/${first.id}`)).json<RunDto>());
    expect(done).toMatchObject({ status: 'succeeded', error: null });
    const executed = JSON.parse(
      (await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/jobs/ordinary.runs/${first.id}.ipynb`, headers: bearer(b.adminToken) }))
        .body,
    ) as Executed;
    expect(executed.cells[0]!.outputs[0]!.text).toBe('rows 3 total 44\n');
    const image = executed.cells[1]!.outputs.find((o) => o.output_type === 'display_data');
    expect(Buffer.from(image!.data!['image/png']!, 'base64').subarray(1, 4).toString()).toBe('PNG');
    const result = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/reports/result.csv`, headers: bearer(b.adminToken) });
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe('total\n44\n');
    const logRes = await api(`runs/${first.id}/log`);
    const events = logRes.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LogEvent);
    expect(events.find((e) => e.event === 'files')).toMatchObject({ written: ['reports/result.csv'] });

    // a second run with other data: the result is a new version of the same file
    expect((await put('data/sample.csv', 'x,y\n10,10\n')).statusCode).toBe(200);
    const second = (await api('runs', 'POST', { notebook_path: 'jobs/ordinary.ipynb' })).json<RunDto>();
    expect((await waitForRun(async () => (await api(`runs/${second.id}`)).json<RunDto>())).status).toBe('succeeded');
    const versions = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/versions/reports/result.csv`, headers: bearer(b.adminToken) });
    expect(versions.json<ListPage<VersionDto>>().items).toHaveLength(2);
    const latest = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/objects/reports/result.csv`, headers: bearer(b.adminToken) });
    expect(latest.body).toBe('total\n100\n');
    // the input was only read: its versions are the two uploads, none from the runs
    const input = await b.app.inject({ method: 'GET', url: `/api/v1/data-resources/${ws}/versions/data/sample.csv`, headers: bearer(b.adminToken) });
    expect(input.json<ListPage<VersionDto>>().items).toHaveLength(2);
  }, 120_000);
});
