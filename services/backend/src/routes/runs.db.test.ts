import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { MAX_NOTEBOOK_BYTES, claimRuns, completeRun, enqueueDueSchedules, enqueueRun } from '@codeagent/runs';
import type { ErrorBody, ListPage } from '@codeagent/service-kit';
import {
  addMembers,
  bearer,
  createAndLogin,
  createWorkspace,
  startTestBackend,
  type RunDto,
  type ScheduleDto,
  type TestBackend,
  disableUser,
} from '../testing.js';

describe(`runs and schedules API (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
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
    ws = await createWorkspace(b, 'runs');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
  });
  afterAll(async () => {
    await b.close();
  });

  const NB = JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
  const upload = (path: string) =>
    b.app.inject({
      method: 'PUT',
      url: `/api/v1/data-resources/${ws}/objects/${path}`,
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      payload: NB,
    });

  const call = (token: string, method: string, url: string, payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/workspaces/${url}`, headers: bearer(token), ...(payload ? { payload } : {}) });

  it('queues a run (202) with the SPEC fields; a missing notebook is 404', async () => {
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'missing.ipynb' })).statusCode).toBe(404);
    for (const p of ['reports/daily.ipynb', 'a.ipynb', 'b.ipynb']) expect((await upload(p)).statusCode).toBe(201);
    const res = await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'reports/daily.ipynb', parameters: { day: '2026-11-22' } });
    expect(res.statusCode).toBe(202);
    const run = res.json<RunDto>();
    for (const field of ['id', 'workspace_id', 'schedule_id', 'notebook_path', 'status', 'started_at', 'finished_at', 'error', 'log_key', 'output_path']) {
      expect(run).toHaveProperty(field);
    }
    expect(run).toMatchObject({
      workspace_id: ws,
      schedule_id: null,
      notebook_path: 'reports/daily.ipynb',
      status: 'queued',
      parameters: { day: '2026-11-22' },
      // Who started it (the web app names them, decision 0225).
      created_by: editor.id,
    });
    const got = await call(viewer.token, 'GET', `${ws}/runs/${run.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json<RunDto>().id).toBe(run.id);
    const log = await call(viewer.token, 'GET', `${ws}/runs/${run.id}/log`);
    expect(log.statusCode).toBe(404);
  });

  it('lists runs newest first, filtered by status and schedule', async () => {
    const first = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' })).json<RunDto>();
    const second = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'b.ipynb' })).json<RunDto>();
    const list = (await call(viewer.token, 'GET', `${ws}/runs`)).json<ListPage<RunDto>>();
    const ids = list.items.map((r: { id: string }) => r.id);
    expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(first.id));
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=queued`)).json<ListPage<RunDto>>().items.length).toBe(ids.length);
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=succeeded`)).json<ListPage<RunDto>>().items).toEqual([]);
    expect((await call(viewer.token, 'GET', `${ws}/runs?status=exploded`)).statusCode).toBe(400);
    expect((await call(viewer.token, 'GET', `${ws}/runs?schedule_id=00000000-0000-0000-0000-000000000000`)).json<ListPage<RunDto>>().items).toEqual([]);
    const page = (await call(viewer.token, 'GET', `${ws}/runs?limit=1`)).json<ListPage<RunDto>>();
    expect(page.items).toHaveLength(1);
    const next = (await call(viewer.token, 'GET', `${ws}/runs?limit=1&cursor=${page.next_cursor}`)).json<ListPage<RunDto>>();
    expect(next.items[0]!.id).toBe(ids[1]);
  });

  it('pages through runs created in the same millisecond one at a time, each once, newest id first among equals', async () => {
    for (const notebook_path of ['t1.ipynb', 't2.ipynb', 't3.ipynb']) await call(editor.token, 'POST', `${ws}/runs`, { notebook_path });
    await sql`UPDATE runs SET created_at = '2026-01-01T00:00:00Z' WHERE workspace_id = ${ws}`.execute(b.t.database.db);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: ListPage<RunDto> = (await call(viewer.token, 'GET', `${ws}/runs?limit=1${cursor ? `&cursor=${cursor}` : ''}`)).json();
      seen.push(...page.items.map((r) => r.id));
      cursor = page.next_cursor;
    } while (cursor && seen.length < 100);
    const all = (await call(viewer.token, 'GET', `${ws}/runs?limit=100`)).json<ListPage<RunDto>>().items.map((r) => r.id);
    expect(all.length).toBeGreaterThanOrEqual(3);
    expect(seen).toEqual(all);
    expect(all).toEqual([...all].sort().reverse());
  });

  it('enforces membership: non-members 404, viewers read only, bad input 400', async () => {
    expect((await call(stranger.token, 'GET', `${ws}/runs`)).statusCode).toBe(404);
    expect((await call(stranger.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' })).statusCode).toBe(404);
    const denied = await call(viewer.token, 'POST', `${ws}/runs`, { notebook_path: 'a.ipynb' });
    expect(denied.statusCode).toBe(403);
    expect(denied.json<ErrorBody>().error).toBe('forbidden');
    expect((await call(viewer.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '* * * * *' })).statusCode).toBe(403);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'not-a-notebook.txt' })).statusCode).toBe(400);
    expect((await call(editor.token, 'GET', `${ws}/runs/00000000-0000-0000-0000-000000000000`)).statusCode).toBe(404);
    expect((await b.app.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/runs` })).statusCode).toBe(401);
  });

  it('creates, reads, changes and deletes schedules with 5- and 6-field cron and IANA zones', async () => {
    const five = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin' });
    expect(five.statusCode).toBe(201);
    expect(five.json()).toMatchObject({ cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin', enabled: true, created_by: editor.id });
    expect(Date.parse(five.json<ScheduleDto>().next_run_at ?? '')).toBeGreaterThan(Date.now());
    const six = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', cron: '30 */2 * * * *', enabled: false });
    expect(six.statusCode).toBe(201);
    expect(six.json()).toMatchObject({ timezone: 'UTC', enabled: false });

    for (const bad of [{ cron: '* * * *' }, { cron: '61 * * * *' }, { cron: '* * * * *', timezone: 'Mars/Olympus' }, { cron: 'every day' }]) {
      const res = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'a.ipynb', ...bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json<ErrorBody>().error).toBe('invalid_request');
    }

    const id = five.json<ScheduleDto>().id;
    expect((await call(viewer.token, 'GET', `${ws}/schedules/${id}`)).json<ScheduleDto>().id).toBe(id);
    expect((await call(viewer.token, 'GET', `${ws}/schedules`)).json<ListPage<ScheduleDto>>().items.length).toBe(2);
    const patched = await call(editor.token, 'PATCH', `${ws}/schedules/${id}`, { cron: '*/5 * * * *', enabled: false });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ cron: '*/5 * * * *', enabled: false });
    expect((await call(editor.token, 'PATCH', `${ws}/schedules/${id}`, { timezone: 'Nowhere/Land' })).statusCode).toBe(400);
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${id}`)).statusCode).toBe(204);
    expect((await call(editor.token, 'GET', `${ws}/schedules/${id}`)).statusCode).toBe(404);
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${id}`)).statusCode).toBe(404);
  });

  it('a viewer or a stranger learns nothing of which notebooks exist: the same refusal for a missing one as for an existing one', async () => {
    expect((await upload('exists.ipynb')).statusCode).toBe(201);
    for (const [who, token, status] of [
      ['viewer', viewer.token, 403],
      ['stranger', stranger.token, 404],
    ] as const) {
      for (const notebook_path of ['exists.ipynb', 'missing-one.ipynb']) {
        const res = await call(token, 'POST', `${ws}/schedules`, { notebook_path, cron: '0 9 * * *' });
        expect(res.statusCode, `${who} ${notebook_path}`).toBe(status);
        expect(res.body, `${who} ${notebook_path}`).not.toContain(notebook_path);
      }
    }
  });
});

describe(`run flood limits and cancel (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  let editor: { id: string; token: string };
  let viewer: { id: string; token: string };
  let stranger: { id: string; token: string };
  const LIMITS = { maxSchedulesPerWorkspace: 3, maxQueuedRunsPerWorkspace: 5 };
  beforeAll(async () => {
    b = await startTestBackend({ runLimits: LIMITS });
    editor = await createAndLogin(b, 'editor@example.com');
    viewer = await createAndLogin(b, 'viewer@example.com');
    stranger = await createAndLogin(b, 'stranger@example.com');
  });
  afterAll(async () => {
    await b.close();
  });

  const NB = JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
  /** A fresh workspace with the editor and viewer as members and `nb.ipynb` in it. */
  async function workspace(): Promise<string> {
    const ws = await createWorkspace(b, 'limits');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    const put = await b.app.inject({
      method: 'PUT',
      url: `/api/v1/data-resources/${ws}/objects/nb.ipynb`,
      headers: { ...bearer(editor.token), 'content-type': 'application/octet-stream' },
      payload: NB,
    });
    expect(put.statusCode).toBe(201);
    return ws;
  }
  const call = (token: string, method: string, url: string, payload?: object) =>
    b.app.inject({ method: method as 'GET', url: `/api/v1/workspaces/${url}`, headers: bearer(token), ...(payload ? { payload } : {}) });

  it('refuses a cron that fires more often than SCHEDULE_MIN_INTERVAL_SECONDS (default 60), also on change', async () => {
    const ws = await workspace();
    for (const cron of ['* * * * * *', '*/10 * * * * *', '0,30 * * * * *']) {
      const res = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron });
      expect(res.statusCode, cron).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { cron: expect.stringMatching(/SCHEDULE_MIN_INTERVAL_SECONDS/) as unknown } });
      expect(res.json<ErrorBody>().message).toMatch(/SCHEDULE_MIN_INTERVAL_SECONDS/);
    }
    const ok = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '* * * * *' });
    expect(ok.statusCode).toBe(201);
    expect((await call(editor.token, 'PATCH', `${ws}/schedules/${ok.json<ScheduleDto>().id}`, { cron: '*/5 * * * * *' })).statusCode).toBe(400);
    // A schedule stored before the limit existed can still be switched off.
    const legacy = await b.t.database.db
      .insertInto('schedules')
      .values({ workspace_id: ws, notebook_path: 'nb.ipynb', cron: '* * * * * *', timezone: 'UTC', next_run_at: new Date() })
      .returning('id')
      .executeTakeFirstOrThrow();
    const off = await call(editor.token, 'PATCH', `${ws}/schedules/${legacy.id}`, { enabled: false });
    expect(off.statusCode).toBe(200);
    expect((await call(editor.token, 'PATCH', `${ws}/schedules/${legacy.id}`, { enabled: true })).statusCode).toBe(400);
  });

  it('refuses a cron that no date matches (400 naming why, never a 500), also on change; a stored one can still be switched off', async () => {
    const ws = await workspace();
    // '0 0 31 4,6,9,11 *' made croner's search outgrow the stack: the request answered 500.
    for (const [cron, timezone] of [
      ['0 0 31 2 *', 'UTC'],
      ['0 0 31 4,6,9,11 *', 'UTC'],
      ['0 0 0 31 4,6,9,11 *', 'Asia/Tokyo'],
    ] as const) {
      const res = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron, timezone });
      expect(res.statusCode, cron).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_request', fields: { cron: expect.stringMatching(/never run/) as unknown } });
    }
    const ok = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 0 29 2 *' });
    expect(ok.statusCode).toBe(201);
    const changed = await call(editor.token, 'PATCH', `${ws}/schedules/${ok.json<ScheduleDto>().id}`, { cron: '0 0 31 4,6,9,11 *' });
    expect(changed.statusCode).toBe(400);
    expect(changed.json<ErrorBody>().fields).toHaveProperty('cron');
    const legacy = await b.t.database.db
      .insertInto('schedules')
      .values({ workspace_id: ws, notebook_path: 'nb.ipynb', cron: '0 0 31 4,6,9,11 *', timezone: 'UTC', next_run_at: null })
      .returning('id')
      .executeTakeFirstOrThrow();
    const renamed = await call(editor.token, 'PATCH', `${ws}/schedules/${legacy.id}`, { enabled: false, notebook_path: 'nb.ipynb' });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ enabled: false, next_run_at: null });
  });

  it('a schedule runs for the member who set it up: switched off once they are removed or deleted; an editor who turns it on takes it over (decision 0254)', async () => {
    const w = await workspace();
    const db = b.t.database.db;
    const leaver = await createAndLogin(b, 'leaver@example.com');
    const gone = await createAndLogin(b, 'gone@example.com');
    await addMembers(b, w, [
      [leaver, 'editor'],
      [gone, 'editor'],
    ]);
    const made = (token: string) => call(token, 'POST', `${w}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 * * * *' }).then((r) => r.json<ScheduleDto>());
    const [mine, theirs] = [await made(leaver.token), await made(gone.token)];
    expect(mine.created_by).toBe(leaver.id);
    const admin = bearer(b.adminToken);
    expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/workspaces/${w}/members/${leaver.id}`, headers: admin })).statusCode).toBe(204);
    // Deleting a user switches their schedules off at once (the reference to them is gone).
    expect((await b.app.inject({ method: 'DELETE', url: `/api/v1/platform/users/${gone.id}`, headers: admin })).statusCode).toBe(204);
    expect((await call(editor.token, 'GET', `${w}/schedules/${theirs.id}`)).json()).toMatchObject({ enabled: false, created_by: null });
    // The removed member's schedule is switched off at its tick, and queues nothing.
    await db
      .updateTable('schedules')
      .set({ next_run_at: new Date(Date.now() - 1000) })
      .where('workspace_id', '=', w)
      .execute();
    const tick = await enqueueDueSchedules(db);
    expect(tick.enqueued.filter((r) => r.workspace_id === w)).toEqual([]);
    expect(tick.stopped.map((s) => s.scheduleId)).toContain(mine.id);
    expect((await call(editor.token, 'GET', `${w}/schedules/${mine.id}`)).json()).toMatchObject({ enabled: false, created_by: leaver.id });
    // An editor turns it on again: it runs for them.
    const taken = await call(editor.token, 'PATCH', `${w}/schedules/${mine.id}`, { enabled: true });
    expect(taken.json()).toMatchObject({ enabled: true, created_by: editor.id });
    await db
      .updateTable('schedules')
      .set({ next_run_at: new Date(Date.now() - 1000) })
      .where('id', '=', mine.id)
      .execute();
    const again = await enqueueDueSchedules(db);
    expect(again.enqueued.filter((r) => r.workspace_id === w).map((r) => [r.schedule_id, r.created_by])).toEqual([[mine.id, editor.id]]);
  });

  it('refuses parameter names Python cannot assign to (400 naming each) instead of a run that fails later; queues nothing', async () => {
    const ws = await workspace();
    const res = await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb', parameters: { ok: 1, 'a b': 2, class: 3 } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: 'invalid_request',
      fields: {
        'parameters.a b': expect.stringMatching(/not a Python identifier/) as unknown,
        'parameters.class': expect.stringMatching(/keyword/) as unknown,
      },
    });
    expect(res.json<ErrorBody>().fields).not.toHaveProperty('parameters.ok');
    expect((await call(editor.token, 'GET', `${ws}/runs`)).json<ListPage<RunDto>>().items).toEqual([]);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb', parameters: { ok: 1, print: 'x' } })).statusCode).toBe(202);
  });

  it('needs the schedule notebook to exist (404 naming it, as a run of it); bad paths 400', async () => {
    const ws = await workspace();
    const missing = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'reports/missing.ipynb', cron: '0 9 * * *' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error: 'not_found' });
    expect(missing.json<ErrorBody>().message).toContain('reports/missing.ipynb');
    expect((await call(editor.token, 'GET', `${ws}/schedules`)).json<ListPage<ScheduleDto>>().items).toEqual([]);
    const s = (await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })).json<ScheduleDto>();
    const moved = await call(editor.token, 'PATCH', `${ws}/schedules/${s.id}`, { notebook_path: 'gone.ipynb' });
    expect(moved.statusCode).toBe(404);
    expect(moved.json<ErrorBody>().message).toContain('gone.ipynb');
    expect((await call(editor.token, 'GET', `${ws}/schedules/${s.id}`)).json<ScheduleDto>().notebook_path).toBe('nb.ipynb');
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'missing.ipynb' })).statusCode).toBe(404);
    for (const bad of ['../nb.ipynb', 'a/./nb.ipynb', '/nb.ipynb']) {
      expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: bad })).statusCode, bad).toBe(400);
      expect((await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: bad, cron: '0 9 * * *' })).statusCode, bad).toBe(400);
    }
  });

  it(`refuses a notebook over ${MAX_NOTEBOOK_BYTES / 1024 / 1024} MiB for a run and a schedule (400 saying how to shrink it), queueing nothing (decision 0230)`, async () => {
    const ws = await workspace();
    // (A row only: the size is what is checked, before any content is read.)
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type, updated_at)
      VALUES (${ws}, 'huge.ipynb', gen_random_uuid(), ${MAX_NOTEBOOK_BYTES + 1}, repeat('0', 64), 'application/x-ipynb+json', now())`.execute(b.t.database.db);
    const run = await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'huge.ipynb' });
    expect(run.statusCode).toBe(400);
    expect(run.json()).toMatchObject({ error: 'invalid_request', fields: { notebook_path: 'larger than 64 MiB' } });
    expect(run.json<ErrorBody>().message).toContain('clear its outputs');
    const schedule = await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'huge.ipynb', cron: '0 9 * * *' });
    expect(schedule.statusCode).toBe(400);
    const s = (await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })).json<ScheduleDto>();
    expect((await call(editor.token, 'PATCH', `${ws}/schedules/${s.id}`, { notebook_path: 'huge.ipynb' })).statusCode).toBe(400);
    expect((await call(editor.token, 'GET', `${ws}/runs`)).json<ListPage<RunDto>>().items).toEqual([]);
    // Exactly at the limit is fine.
    await sql`UPDATE objects SET size = ${MAX_NOTEBOOK_BYTES} WHERE workspace_id = ${ws} AND path = 'huge.ipynb'`.execute(b.t.database.db);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'huge.ipynb' })).statusCode).toBe(202);
  });

  it('caps schedules per workspace (429 too_many_requests), also under parallel requests', async () => {
    const ws = await workspace();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })),
    );
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(LIMITS.maxSchedulesPerWorkspace);
    const refused = results.filter((r) => r.statusCode !== 201);
    expect(refused.every((r) => r.statusCode === 429 && r.json<ErrorBody>().error === 'too_many_requests')).toBe(true);
    expect(refused[0]!.json<ErrorBody>().message).toMatch(/MAX_SCHEDULES_PER_WORKSPACE/);
    expect((await call(viewer.token, 'GET', `${ws}/schedules`)).json<ListPage<ScheduleDto>>().items).toHaveLength(LIMITS.maxSchedulesPerWorkspace);
    // After a delete there is room again; another workspace has its own count.
    const first = (await call(viewer.token, 'GET', `${ws}/schedules`)).json<ListPage<ScheduleDto>>().items[0]!.id;
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${first}`)).statusCode).toBe(204);
    expect((await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })).statusCode).toBe(201);
    const other = await workspace();
    expect((await call(editor.token, 'POST', `${other}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })).statusCode).toBe(201);
  });

  it('caps queued runs per workspace (429), also under parallel requests; cancelled runs free their place', async () => {
    const ws = await workspace();
    const results = await Promise.all(Array.from({ length: 12 }, () => call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })));
    expect(results.filter((r) => r.statusCode === 202)).toHaveLength(LIMITS.maxQueuedRunsPerWorkspace);
    const refused = results.filter((r) => r.statusCode !== 202);
    expect(refused.every((r) => r.statusCode === 429 && r.json<ErrorBody>().error === 'too_many_requests')).toBe(true);
    expect(refused[0]!.json<ErrorBody>().message).toMatch(/MAX_QUEUED_RUNS_PER_WORKSPACE/);
    const queued = (await call(viewer.token, 'GET', `${ws}/runs?status=queued`)).json<ListPage<RunDto>>().items;
    expect(queued).toHaveLength(LIMITS.maxQueuedRunsPerWorkspace);
    expect((await call(editor.token, 'POST', `${ws}/runs/${queued[0]!.id}/cancel`)).statusCode).toBe(200);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).statusCode).toBe(202);
    expect((await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).statusCode).toBe(429);
    const other = await workspace();
    expect((await call(editor.token, 'POST', `${other}/runs`, { notebook_path: 'nb.ipynb' })).statusCode).toBe(202);
  });

  it('cancels a queued run (never claimed afterwards) and a running one; finished 409; viewer 403; stranger 404', async () => {
    const ws = await workspace();
    const run = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    expect((await call(viewer.token, 'POST', `${ws}/runs/${run.id}/cancel`)).statusCode).toBe(403);
    expect((await call(stranger.token, 'POST', `${ws}/runs/${run.id}/cancel`)).statusCode).toBe(404);
    expect((await b.app.inject({ method: 'POST', url: `/api/v1/workspaces/${ws}/runs/${run.id}/cancel` })).statusCode).toBe(401);
    const cancelled = await call(editor.token, 'POST', `${ws}/runs/${run.id}/cancel`);
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ id: run.id, status: 'cancelled', started_at: null });
    expect(cancelled.json<RunDto>().finished_at).not.toBeNull();
    const again = await call(editor.token, 'POST', `${ws}/runs/${run.id}/cancel`);
    expect(again.statusCode).toBe(409);
    expect(again.json<ErrorBody>().error).toBe('conflict');
    const claimed = await claimRuns(b.t.database.db, 'test-worker', 1000, 30);
    expect(claimed.map((r) => r.id)).not.toContain(run.id);

    // A running run: cancelled in the database at once; the worker can no longer complete it.
    const running = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    expect((await claimRuns(b.t.database.db, 'test-worker', 1000, 30)).map((r) => r.id)).toContain(running.id);
    const stop = await call(editor.token, 'POST', `${ws}/runs/${running.id}/cancel`);
    expect(stop.json<RunDto>()).toMatchObject({ status: 'cancelled' });
    expect(await completeRun(b.t.database.db, running.id, 'test-worker', { status: 'succeeded' })).toBe(false);
    expect((await call(viewer.token, 'GET', `${ws}/runs/${running.id}`)).json<RunDto>().status).toBe('cancelled');

    // A finished run cannot be cancelled; unknown and malformed ids are 404.
    const done = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    await claimRuns(b.t.database.db, 'test-worker', 1000, 30);
    expect(await completeRun(b.t.database.db, done.id, 'test-worker', { status: 'succeeded' })).toBe(true);
    const finished = await call(admin(), 'POST', `${ws}/runs/${done.id}/cancel`);
    expect(finished.statusCode).toBe(409);
    expect(finished.json<ErrorBody>().message).toMatch(/succeeded/);
    expect((await call(editor.token, 'POST', `${ws}/runs/00000000-0000-0000-0000-000000000000/cancel`)).statusCode).toBe(404);
    expect((await call(editor.token, 'POST', `${ws}/runs/not-a-run/cancel`)).statusCode).toBe(404);
    // Another workspace's run cannot be cancelled through this one.
    const other = await workspace();
    const foreign = (await call(editor.token, 'POST', `${other}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    expect((await call(editor.token, 'POST', `${ws}/runs/${foreign.id}/cancel`)).statusCode).toBe(404);
    expect((await call(viewer.token, 'GET', `${other}/runs/${foreign.id}`)).json<RunDto>().status).toBe('queued');
  });

  it('deleting a schedule cancels its queued runs and leaves other runs alone', async () => {
    const ws = await workspace();
    const s = (await call(editor.token, 'POST', `${ws}/schedules`, { notebook_path: 'nb.ipynb', cron: '0 9 * * *' })).json<ScheduleDto>();
    const db = b.t.database.db;
    const ticks = [];
    for (let i = 0; i < 3; i++) ticks.push(await enqueueRun(db, { workspaceId: ws, notebookPath: 'nb.ipynb', scheduleId: s.id }));
    const manual = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    expect((await call(editor.token, 'DELETE', `${ws}/schedules/${s.id}`)).statusCode).toBe(204);
    const rows = await db
      .selectFrom('runs')
      .selectAll()
      .where(
        'id',
        'in',
        ticks.map((r) => r.id),
      )
      .execute();
    expect(rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(rows[0]!.error).toMatch(/schedule was deleted/);
    expect((await call(viewer.token, 'GET', `${ws}/runs/${manual.id}`)).json<RunDto>().status).toBe('queued');
  });

  it('documents the cancel route in the OpenAPI document; another method on it is 405', async () => {
    const doc = (await b.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json<{ paths: Record<string, Record<string, { responses: object }>> }>();
    expect(doc.paths['/api/v1/workspaces/{ws}/runs/{id}/cancel']?.post?.responses).toHaveProperty('409');
    expect(doc.paths['/api/v1/workspaces/{ws}/runs']?.post?.responses).toHaveProperty('429');
    const ws = await workspace();
    const run = (await call(editor.token, 'POST', `${ws}/runs`, { notebook_path: 'nb.ipynb' })).json<RunDto>();
    expect((await call(editor.token, 'GET', `${ws}/runs/${run.id}/cancel`)).statusCode).toBe(405);
  });

  const admin = () => b.adminToken;
});

describe(`readying a workspace for a run (decision 0209, ${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let b: TestBackend;
  const asked: string[] = [];
  let failing = false;
  beforeAll(async () => {
    b = await startTestBackend({
      runtimeWarmUp: (workspaceId) => {
        asked.push(workspaceId);
        return failing ? Promise.reject(new Error('the runtime is down')) : Promise.resolve(true);
      },
    });
  });
  afterAll(async () => {
    await b.close();
  });

  it('an editor readies the workspace (202, at once), at most once every 10 s however often asked; viewer 403, stranger 404, logged out or disabled 401', async () => {
    const editor = await createAndLogin(b, 'warm-editor@example.com');
    const viewer = await createAndLogin(b, 'warm-viewer@example.com');
    const stranger = await createAndLogin(b, 'warm-stranger@example.com');
    const ws = await createWorkspace(b, 'warm');
    const other = await createWorkspace(b, 'warm-other');
    await addMembers(b, ws, [
      [editor, 'editor'],
      [viewer, 'viewer'],
    ]);
    await addMembers(b, other, [[editor, 'editor']]);
    const warm = (token: string | undefined, w = ws) =>
      b.app.inject({ method: 'POST', url: `/api/v1/workspaces/${w}/runs/warm-up`, headers: token ? bearer(token) : {} });
    expect((await warm(viewer.token)).statusCode).toBe(403);
    expect((await warm(stranger.token)).statusCode).toBe(404);
    expect((await warm(undefined)).statusCode).toBe(401);
    expect(asked).toEqual([]);
    // A loop of requests reaches the runtime once per workspace in the window.
    for (let i = 0; i < 20; i++) expect((await warm(editor.token)).statusCode).toBe(202);
    expect((await warm(editor.token, other)).statusCode).toBe(202);
    expect((await warm(editor.token, ws.toUpperCase())).statusCode).toBe(202);
    expect(asked).toEqual([ws, other]);
    // A runtime that refuses costs the caller nothing: still 202, logged.
    failing = true;
    const third = await createWorkspace(b, 'warm-third');
    await addMembers(b, third, [[editor, 'editor']]);
    expect((await warm(editor.token, third)).statusCode).toBe(202);
    expect(asked).toEqual([ws, other, third]);
    // A disabled account's session warms nothing.
    await disableUser(b, editor.id);
    const fourth = await createWorkspace(b, 'warm-fourth');
    await addMembers(b, fourth, [[editor, 'editor']]);
    expect((await warm(editor.token, fourth)).statusCode).toBe(401);
    expect(asked).toEqual([ws, other, third]);
  });
});
