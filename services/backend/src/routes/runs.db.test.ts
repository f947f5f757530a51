import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createAndLogin, startTestBackend, type TestBackend } from '../testing.js';

describe(`runs and schedules API (${process.env.CODEAGENT_TEST_DB ?? 'pglite'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  let ws: string;
  beforeAll(async () => {
    b = await startTestBackend();
    editor = await createAndLogin(b, 'editor@example.com');
    viewer = await createAndLogin(b, 'viewer@example.com');
    stranger = await createAndLogin(b, 'stranger@example.com');
    ws = (await b.app.inject({ method: 'POST', url: '/api/v1/platform/workspaces', headers: bearer(b.adminToken), payload: { name: 'runs' } })).json().id;
    for (const [u, role] of [[editor, 'editor'], [viewer, 'viewer']] as const) {
      await b.app.inject({ method: 'POST', url: `/api/v1/platform/workspaces/${ws}/members`, headers: bearer(b.adminToken), payload: { user_id: u.id, role } });
    }
  });
  afterAll(async () => {
    await b.close();
  });

  const NB = JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
  const upload = (path: string) =>
    b.app.inject({ method: 'PUT', url: `/api/v1/data-resources/${ws}/objects/${path}`, headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' }, payload: NB });

  const call = (token: string, method: string, url: string, payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/workspaces/${url}`, headers: bearer(token), ...(payload ? { payload } : {}) });

  it('queues a run (202) with the SPEC fields; a missing notebook is 404', async () => {
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'missing.ipynb' })).statusCode).toBe(404);
    for (const p of ['reports/daily.ipynb', 'a.ipynb', 'b.ipynb']) expect((await upload(p)).statusCode).toBe(201);
    const res = await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'reports/daily.ipynb', parameters: { day: '2026-11-22' } });
    expect(res.statusCode).toBe(202);
    const run = res.json();
    for (const field of ['id', 'workspace_id', 'schedule_id', 'notebook_path', 'status', 'started_at', 'finished_at', 'error', 'log_key', 'output_path']) {
      expect(run).toHaveProperty(field);
    }
    expect(run).toMatchObject({ workspace_id: ws, schedule_id: null, notebook_path: 'reports/daily.ipynb', status: 'queued', parameters: { day: '2026-11-22' } });
    const got = await call(viewer.token, 'GET', `${ws}/runs/${run.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json().id).toBe(run.id);
    const log = await call(viewer.token, 'GET', `${ws}/runs/${run.id}/log`);
    expect(log.statusCode).toBe(404);
  });

  it('lists runs newest first, filtered by status and schedule', async () => {
    const first = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' })).json();
    const second = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'b.ipynb' })).json();
    const list = (await call(viewer.token, 'GET', `${ws}/runs`)).json();
    const ids = list.items.map((r: { id: string }) => r.id);
    expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(first.id));
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=queued`)).json().items.length).toBe(ids.length);
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=succeeded`)).json().items).toEqual([]);
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=exploded`)).statusCode).toBe(400);
    expect((await call(viewer.token, 'GET', `${ws}/runs?schedule_id=00000000-0000-0000-0000-000000000000`)).json().items).toEqual([]);
    const page = (await call(viewer.token, 'GET', `${ws}/runs?limit=1`)).json();
    expect(page.items).toHaveLength(1);
    const next = (await call(viewer.token, 'GET', `${ws}/runs?limit=1&cursor=${page.next_cursor}`)).json();
    expect(next.items[0].id).toBe(ids[1]);
  });

  it('enforces membership: non-members 404, viewers read only, bad input 400', async () => {
    expect((await call(stranger.token, 'GET', `${ws}/runs`)).statusCode).toBe(404);
    expect((await call(stranger.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' })).statusCode).toBe(404);
    const denied = await call(viewer.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' });
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error).toBe('forbidden');
    expect((await call(viewer.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '* * * * *' })).statusCode).toBe(403);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'not-a-notebook.txt' })).statusCode).toBe(400);
    expect((await call(editor.token, 'GET', `${ws}/runs/00000000-0000-0000-0000-000000000000`)).statusCode).toBe(404);
    expect((await b.app.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/runs` })).statusCode).toBe(401);
  });

  it('creates, reads, changes and deletes schedules with 5- and 6-field cron and IANA zones', async () => {
    const five = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin' });
    expect(five.statusCode).toBe(201);
    expect(five.json()).toMatchObject({ cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin', enabled: true });
    expect(Date.parse(five.json().next_run_at)).toBeGreaterThan(Date.now());
    const six = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '*/30 * * * * *', enabled: false });
    expect(six.statusCode).toBe(201);
    expect(six.json()).toMatchObject({ timezone: 'UTC', enabled: false });

    for (const bad of [{ cron: '* * * *' }, { cron: '61 * * * *' }, { cron: '* * * * *', timezone: 'Mars/Olympus' }, { cron: 'every day' }]) {
      const res = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', ...bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }

    const id = five.json().id;
    expect((await call(viewer.token, 'GET', `${ws}/schedules/${id}`)).json().id).toBe(id);
    expect((await call(viewer.token, 'GET', `${ws}/schedules`)).json().items.length).toBe(2);
    const patched = await call(editor.token, 'PATCH', `${ws}/schedules/${id}`, { cron: '*/5 * * * *', enabled: false });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ cron: '*/5 * * * *', enabled: false });
    expect((await call(editor.token, 'PATCH', `${ws}/schedules/${id}`, { timezone: 'Nowhere/Land' })).statusCode).toBe(400);
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${id}`)).statusCode).toBe(204);
    expect((await call(editor.token, 'GET', `${ws}/schedules/${id}`)).statusCode).toBe(404);
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${id}`)).statusCode).toBe(404);
  });
});
