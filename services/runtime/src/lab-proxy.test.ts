import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildRuntimeApp } from './app.js';
import { labProxy } from './lab-proxy.js';
import { defaultLabHost } from './lab-host.js';
import type { Kernels } from './kernels-factory.js';
import { startTestKernels } from './testing.js';

const TOKEN = 'lab-token';
const A = '11111111-1111-4111-8111-111111111111';
const B = '22222222-2222-4222-8222-222222222222';

// SANDBOX_MAX_SERVERS with JupyterLab (decision 0103): real sandboxed servers, cap 1.
describe('the lab proxy at the server cap', () => {
  let kernels: Kernels;
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    kernels = await startTestKernels({ sandbox: { maxServers: 1 }, lab: defaultLabHost() });
    app = await buildRuntimeApp({
      kernels: kernels.kernels,
      internalServiceToken: 'internal',
      lab: labProxy({ pool: kernels.pool, token: TOKEN, log: pino({ level: 'silent' }) }),
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await kernels?.stop();
  }, 60_000);

  const call = (ws: string, path: string, init: RequestInit = {}) =>
    fetch(`${base}/jupyter/${ws}/${path}`, { ...init, headers: { authorization: `token ${TOKEN}`, ...(init.headers as Record<string, string> | undefined) } });

  it('never stops a server whose kernel was started in JupyterLab; the refused start names the setting; the next visit after the kernel ends gets the room', async () => {
    expect((await call(A, 'api/status')).status).toBe(200);
    const kernel = await call(A, 'api/kernels', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"python3"}' });
    expect(kernel.status).toBe(201);
    const { id } = (await kernel.json()) as { id: string };

    const api = await call(B, 'api/status');
    expect(api.status).toBe(503);
    expect(await api.json()).toMatchObject({ error: 'kernel_unavailable', message: expect.stringMatching(/SANDBOX_MAX_SERVERS=1/) as unknown });
    // The page shows why, without refreshing; A's kernel still runs.
    const page = await call(B, 'lab', { headers: { accept: 'text/html' } });
    expect(page.status).toBe(503);
    const html = await page.text();
    expect(html).toContain('JupyterLab could not start');
    expect(html).toContain('SANDBOX_MAX_SERVERS=1');
    expect(html).not.toContain('http-equiv="refresh"');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect((await call(A, `api/kernels/${id}`)).status).toBe(200);

    expect((await call(A, `api/kernels/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await call(B, 'api/status')).status).toBe(200);
    expect(kernels.pool.status(A)).toEqual({ state: 'stopped' });
  }, 120_000);
});
