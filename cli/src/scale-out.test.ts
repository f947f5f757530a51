// Scale-out on this machine (issue 18): every component a process of its own, exactly as a
// deployment starts them (`node cli/dist/index.js <component>`): gateway + 2 backends + 2 workers
// + runtime + cluster service, against the machine's PostgreSQL (a fresh database) and s3rver
// (STORAGE_BACKEND=s3). Under bounded load on loopback one backend is SIGKILLed, then one worker
// in the middle of a run. The figures are written to .test-results/scale-out.json (and quoted in
// docs/performance.md); the assertions are about counts, never about time.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import S3rver from 's3rver';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { CLI, freePort, login, waitFor } from './testing.js';

interface Proc {
  name: string;
  child: ChildProcess;
  out: () => string;
}

const ADMIN_PASSWORD = 'scale-out-admin-password';
const results: Record<string, unknown> = {};

describe('scale-out: gateway, 2 backends, 2 workers, runtime, cluster service as separate processes', () => {
  let db: TestDatabase;
  let s3: S3rver;
  const procs: Proc[] = [];
  const ports: Record<string, number> = {};
  let base: string;
  let env: NodeJS.ProcessEnv;
  let token: string;
  let workspace: string;

  const start = (name: string, component: string, extra: NodeJS.ProcessEnv = {}): Proc => {
    const child = spawn(process.execPath, [CLI, component], { env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
    const proc = { name, child, out: () => out };
    procs.push(proc);
    return proc;
  };
  const proc = (name: string) => procs.find((p) => p.name === name)!;
  const ready = (name: string, port: number) =>
    waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.ok, `readiness of ${name} on ${port}`, 90_000).catch(
      (err: unknown) => {
        throw new Error(`${(err as Error).message}; its output:\n${proc(name).out().slice(-3000)}`);
      },
    );
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${token}`,
        ...(init.body && typeof init.body === 'string' ? { 'content-type': 'application/json' } : {}),
        ...init.headers,
      },
    });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const dataDir = mkdtempSync(join(tmpdir(), 'codeagent-scale-out-'));
    s3 = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: join(dataDir, 's3') });
    const { port: s3Port } = await s3.run();
    for (const n of ['gateway', 'gatewayMetrics', 'backend1', 'backend2', 'runtime', 'clusterAdmin', 'worker1', 'worker2']) ports[n] = await freePort();
    const backends = `http://127.0.0.1:${ports.backend1},http://127.0.0.1:${ports.backend2}`;
    env = {
      ...process.env,
      NODE_ENV: 'production',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      DATABASE_URL: db.url,
      STORAGE_BACKEND: 's3',
      S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
      S3_REGION: 'us-east-1',
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      INTERNAL_SERVICE_TOKEN: randomUUID(),
      JWT_SECRET: `${randomUUID()}${randomUUID()}`,
      ADMIN_TOKENS: randomUUID(),
      SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
      AGENT_TOKEN: randomUUID(),
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
      PORT: String(ports.gateway),
      GATEWAY_METRICS_PORT: String(ports.gatewayMetrics),
      BACKEND_URL: backends,
      RUNTIME_PORT: String(ports.runtime),
      CLUSTER_ADMIN_PORT: String(ports.clusterAdmin),
      BRIDGE_URL: 'http://127.0.0.1:9',
      JUPYTERLAB_URL: 'http://127.0.0.1:9',
      KERNEL_SANDBOX: 'off',
      WORKER_LEASE_SECONDS: '3',
      WORKER_POLL_MS: '200',
      WORKER_CONCURRENCY: '1',
      SCHEDULE_MIN_INTERVAL_SECONDS: '1',
    };
    // Both backends start at once: the migrations' advisory lock lets only one apply them.
    start('backend1', 'backend', { BACKEND_PORT: String(ports.backend1) });
    start('backend2', 'backend', { BACKEND_PORT: String(ports.backend2) });
    start('runtime', 'runtime');
    start('cluster-admin', 'cluster-admin');
    await Promise.all([
      ready('backend1', ports.backend1!),
      ready('backend2', ports.backend2!),
      ready('runtime', ports.runtime!),
      ready('cluster-admin', ports.clusterAdmin!),
    ]);
    start('worker1', 'worker', { WORKER_METRICS_PORT: String(ports.worker1) });
    start('worker2', 'worker', { WORKER_METRICS_PORT: String(ports.worker2) });
    start('gateway', 'gateway');
    await Promise.all([ready('worker1', ports.worker1!), ready('worker2', ports.worker2!), ready('gateway', ports.gatewayMetrics!)]);
    base = `http://127.0.0.1:${ports.gateway}`;
    token = await login(base, 'admin@localhost', ADMIN_PASSWORD);
    const ws = await api('/api/v1/platform/workspaces', { method: 'POST', body: JSON.stringify({ name: 'scale-out' }) });
    workspace = ((await ws.json()) as { id: string }).id;
  }, 180_000);

  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await s3?.close();
    await db?.drop();
    mkdirSync('.test-results', { recursive: true });
    writeFileSync(join('.test-results', 'scale-out.json'), JSON.stringify({ when: new Date().toISOString(), ...results }, null, 2));
  });

  it('follows one request id through the gateway, a backend and the runtime in their logs', async () => {
    const id = `trace-${randomUUID()}`;
    const res = await fetch(`${base}/api/v1/health`, { headers: { 'x-request-id': id } });
    expect(res.headers.get('x-request-id')).toBe(id);
    expect(await res.json()).toMatchObject({ status: 'ok', checks: { database: 'ok', storage: 'ok', runtime: 'ok' } });
    await waitFor(() => proc('gateway').out().includes(id), 'the gateway log line');
    const backendLogs = proc('backend1').out() + proc('backend2').out();
    const logged = (text: string) => text.split('\n').filter((l) => l.includes(id));
    expect(logged(proc('gateway').out()).length).toBeGreaterThan(0);
    expect(logged(backendLogs).length).toBeGreaterThan(0);
    expect(logged(proc('runtime').out()).length).toBeGreaterThan(0);
    // Every line is structured JSON carrying the id as its request id.
    for (const line of [...logged(proc('gateway').out()), ...logged(backendLogs), ...logged(proc('runtime').out())]) {
      expect(JSON.parse(line)).toMatchObject({ reqId: id });
    }
  });

  it('serves /metrics, /livez and /readyz on each internal port, never through the gateway', async () => {
    for (const path of ['/metrics', '/livez', '/readyz']) expect((await fetch(`${base}${path}`)).status, path).toBe(404);
    const text = async (port: number) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    // The health request of the test above went to one of the two backends.
    expect((await text(ports.backend1!)) + (await text(ports.backend2!))).toMatch(
      /codeagent_http_requests_total\{route="\/api\/v1\/health",method="GET",status_code="200",component="backend"\} \d+/,
    );
    expect(await text(ports.backend1!)).toMatch(/codeagent_runs\{status="queued",component="backend"\} \d+/);
    expect(await text(ports.runtime!)).toMatch(/codeagent_runtime_kernels_running\{component="runtime"\} \d+/);
    // Jupyter servers start per workspace on demand: none yet (the runs test below starts one).
    expect(await text(ports.runtime!)).toMatch(/codeagent_runtime_jupyter_servers_running\{component="runtime"\} 0/);
    expect(await text(ports.gatewayMetrics!)).toMatch(
      /codeagent_gateway_upstream_up\{upstream="backend",instance="http:\/\/127\.0\.0\.1:\d+",component="gateway"\} 1/,
    );
    expect(await text(ports.gatewayMetrics!)).toMatch(
      /codeagent_http_requests_total\{route="\/api\/v1\/\*",method="GET",status_code="200",component="gateway"\}/,
    );
    expect(await text(ports.worker1!)).toMatch(/codeagent_worker_runs_in_flight\{component="worker"\} 0/);
    expect(await text(ports.clusterAdmin!)).toMatch(/process_resident_memory_bytes\{component="cluster-admin"\}/);
    for (const port of [ports.backend1, ports.runtime, ports.clusterAdmin, ports.worker1, ports.gatewayMetrics]) {
      expect((await fetch(`http://127.0.0.1:${port}/livez`)).status).toBe(200);
      expect(await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()).toMatchObject({ status: 'ok' });
    }
  });

  it('keeps answering through the other backend when one is SIGKILLed under load', async () => {
    const clients = 8;
    const perClient = 150;
    let served = 0;
    const errors: string[] = [];
    let killedAt = -1;
    let sent = 0;
    const upload = Buffer.alloc(16 * 1024, 1);
    const one = async (i: number) => {
      // Reads, and writes with a body (a PUT cannot be sent twice once its body streamed).
      const res =
        i % 4 === 3
          ? await api(`/api/v1/data-resources/${workspace}/objects/load/${i % 16}.bin`, {
              method: 'PUT',
              body: upload,
              headers: { 'content-type': 'application/octet-stream' },
            })
          : await api(i % 2 === 0 ? '/api/v1/auth/me' : `/api/v1/data-resources/${workspace}/objects?prefix=load/`);
      await res.arrayBuffer();
      if (res.status < 300) served++;
      else errors.push(`${sent} ${res.status}`);
    };
    await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        for (let i = 0; i < perClient; i++) {
          const n = sent++;
          if (n === Math.floor((clients * perClient) / 3)) {
            killedAt = n;
            proc('backend1').child.kill('SIGKILL');
          }
          await one(c * perClient + i).catch((err: unknown) => errors.push(`${n} ${(err as Error).message}`));
        }
      }),
    );
    const total = clients * perClient;
    results.backendKill = { requests: total, served, errors: errors.length, errorDetails: errors, killedAtRequest: killedAt };
    expect(killedAt).toBeGreaterThan(0);
    // Only requests in flight on the killed backend at that moment may fail: at most one per client.
    expect(errors.length).toBeLessThanOrEqual(clients);
    expect(served).toBe(total - errors.length);
    // And the platform keeps serving: a fresh round through the gateway all succeeds.
    const after = await Promise.all(Array.from({ length: 20 }, () => api('/api/v1/auth/me').then((r) => r.status)));
    expect(after).toEqual(Array(20).fill(200));
  }, 120_000);

  it('runs every scheduled run exactly once with two workers, one SIGKILLed in the middle of a run', async () => {
    const notebook = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
      cells: [{ cell_type: 'code', metadata: {}, outputs: [], execution_count: null, source: 'import time\ntime.sleep(1.5)\nprint("done")' }],
    };
    expect((await api(`/api/v1/data-resources/${workspace}/objects/sleep.ipynb`, { method: 'PUT', body: JSON.stringify(notebook) })).status).toBe(201);
    const schedule = (await (
      await api(`/api/v1/workspaces/${workspace}/schedules`, { method: 'POST', body: JSON.stringify({ notebook_path: 'sleep.ipynb', cron: '*/2 * * * * *' }) })
    ).json()) as { id: string };
    expect(schedule.id).toBeTruthy();

    type Run = { id: string; status: string; schedule_id: string | null; error: string | null; output_path: string | null };
    const runs = async () =>
      ((await (await api(`/api/v1/workspaces/${workspace}/runs?schedule_id=${schedule.id}&limit=1000`)).json()) as { items: Run[] }).items;
    // Kill a worker while it executes a run.
    await waitFor(async () => (await runs()).some((r) => r.status === 'running'), 'a running run', 60_000);
    const running = await db.database.db.selectFrom('runs').select(['id', 'worker_id']).where('status', '=', 'running').executeTakeFirstOrThrow();
    const victim = running.worker_id!.split(':')[1] === String(proc('worker1').child.pid) ? 'worker1' : 'worker2';
    proc(victim).child.kill('SIGKILL');
    // Let the schedule fire a few more times with one worker left, then stop it.
    await waitFor(async () => (await runs()).filter((r) => r.status === 'succeeded').length >= 4, 'more runs on the remaining worker', 90_000);
    expect((await api(`/api/v1/workspaces/${workspace}/schedules/${schedule.id}`, { method: 'PATCH', body: JSON.stringify({ enabled: false }) })).status).toBe(
      200,
    );
    await waitFor(async () => (await runs()).every((r) => ['succeeded', 'failed', 'cancelled'].includes(r.status)), 'every run to end', 90_000);

    const all = await runs();
    const killed = all.find((r) => r.id === running.id)!;
    // The run of the killed worker ends failed after its lease (docs/contract/spec.md §7), never stuck and never run twice.
    expect(killed.status).toBe('failed');
    expect(killed.error).toMatch(/lease/);
    const others = all.filter((r) => r.id !== running.id);
    expect(others.every((r) => r.status === 'succeeded')).toBe(true);
    // Exactly once: one executed notebook per succeeded run, one run per schedule tick.
    const outputs = ((await (await api(`/api/v1/data-resources/${workspace}/objects?prefix=sleep.runs/&limit=1000`)).json()) as { items: { path: string }[] })
      .items;
    expect(outputs.map((o) => o.path).sort()).toEqual(others.map((r) => `sleep.runs/${r.id}.ipynb`).sort());
    // The schedule fires every 2 s: two runs of one tick (two workers enqueuing it) would be
    // created within milliseconds of each other.
    const created = (await db.database.db.selectFrom('runs').select('created_at').where('schedule_id', '=', schedule.id).orderBy('created_at').execute()).map(
      (r) => r.created_at.getTime(),
    );
    const duplicateTicks = created.filter((t, i) => i > 0 && t - created[i - 1]! < 1000).length;
    expect(duplicateTicks).toBe(0);
    for (const r of others) {
      // Written once: the current content and no older version.
      const versions = (
        (await (await api(`/api/v1/data-resources/${workspace}/versions/sleep.runs/${r.id}.ipynb`)).json()) as { items: { current: boolean }[] }
      ).items;
      expect(
        versions.map((v) => v.current),
        r.id,
      ).toEqual([true]);
    }
    const servers = /codeagent_runtime_jupyter_servers_running\{component="runtime"\} (\d+)/.exec(
      await (await fetch(`http://127.0.0.1:${ports.runtime}/metrics`)).text(),
    );
    expect(Number(servers?.[1])).toBe(1); // the workspace's server, started by the first run
    results.workerKill = {
      scheduledRuns: all.length,
      succeeded: others.length,
      failedWithKilledWorker: 1,
      duplicateRuns: duplicateTicks,
      executedNotebooks: outputs.length,
    };
  }, 240_000);
});
