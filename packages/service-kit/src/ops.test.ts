import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { Metrics, opsRoutes, startOpsServer } from './ops.js';

describe('ops routes (issue 18)', () => {
  it('/livez always, /readyz by its checks (503 with each result), /metrics with requests by route pattern', async () => {
    const metrics = new Metrics('test');
    let storageUp = true;
    const app = Fastify();
    app.get('/items/:id', () => ({ ok: true }));
    await app.register(opsRoutes, { metrics, readiness: { database: () => Promise.resolve(true), storage: () => Promise.resolve(storageUp) } });
    for (const id of ['a', 'b', 'c']) await app.inject(`/items/${id}`);
    expect((await app.inject('/livez')).json()).toEqual({ status: 'ok' });
    expect((await app.inject('/readyz')).json()).toEqual({ status: 'ok', checks: { database: 'ok', storage: 'ok' } });
    storageUp = false;
    const down = await app.inject('/readyz');
    expect(down.statusCode).toBe(503);
    expect(down.json()).toEqual({ status: 'error', checks: { database: 'ok', storage: 'error' } });
    const text = (await app.inject('/metrics')).body;
    // One series per route pattern, never per URL.
    expect(text).toContain('codeagent_http_requests_total{route="/items/:id",method="GET",status_code="200",component="test"} 3');
    expect(text).not.toContain('/items/a');
    expect(text).toContain(`codeagent_http_request_duration_seconds_count{component="test",route="/items/:id",method="GET"} 3`);
    expect(text).toMatch(/process_resident_memory_bytes\{component="test"\}/);
    await app.close();
  });

  it('is not ready once shutting down, so that traffic drains first', async () => {
    const ops = await startOpsServer(new Metrics('stopping'), '127.0.0.1', 0, { database: () => Promise.resolve(true) });
    expect((await fetch(`${ops.url}/readyz`)).status).toBe(200);
    ops.stopping();
    const res = await fetch(`${ops.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'stopping' });
    expect((await fetch(`${ops.url}/livez`)).status).toBe(200);
    await ops.app.close();
  });

  it('a check that hangs counts as failed (bounded)', async () => {
    const app = Fastify();
    await app.register(opsRoutes, { metrics: new Metrics('hang'), readiness: { database: () => new Promise<boolean>(() => undefined) } });
    const res = await app.inject('/readyz');
    expect(res.statusCode).toBe(503);
    await app.close();
  });

  it('lets an idle component sleep: its metrics wake the event loop about ten times a second, not a hundred', async () => {
    // A process that only holds the metrics (as every idle component does), built JavaScript.
    const ops = fileURLToPath(new URL('../dist/ops.js', import.meta.url));
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', `import { Metrics } from ${JSON.stringify(ops)}; new Metrics('idle'); setInterval(() => {}, 1e9); console.log('up');`],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.once('data', () => resolve());
        child.once('exit', (code) => reject(new Error(`exited with ${code}`)));
      });
      // How often its main thread went to sleep and woke again (context switches), over 3 s.
      const switches = () => {
        const status = readFileSync(`/proc/${child.pid}/task/${child.pid}/status`, 'utf8');
        return ['voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches'].reduce(
          (n, key) => n + Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1]),
          0,
        );
      };
      await new Promise((r) => setTimeout(r, 1000));
      const before = switches();
      await new Promise((r) => setTimeout(r, 3000));
      const perSecond = (switches() - before) / 3;
      // prom-client's default sampling of the event loop's delay (every 10 ms): about 100.
      expect(perSecond).toBeGreaterThan(3);
      expect(perSecond).toBeLessThan(40);
    } finally {
      child.kill();
    }
  });
});
