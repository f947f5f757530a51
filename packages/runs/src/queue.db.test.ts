import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { cancelRun, claimRuns, completeRun, enqueueDueSchedules, enqueueRun } from './queue.js';

describe(`run queue (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  const workspace = async (name: string) => (await t.database.db.insertInto('workspaces').values({ name }).returning('id').executeTakeFirstOrThrow()).id;
  const flood = async (ws: string, n: number, tag: string) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: `${tag}${i}.ipynb` })).id);
    // "Oldest" is created_at (milliseconds), ties by id: runs queued within one millisecond have
    // no other order, so the expected order is the database's, not the order of the inserts.
    const rows = await t.database.db.selectFrom('runs').select('id').where('id', 'in', ids).orderBy('created_at').orderBy('id').execute();
    return rows.map((r) => r.id);
  };
  /** Claims everything still queued, so each test starts with an empty queue. */
  const drainQueue = async () => {
    while ((await claimRuns(t.database.db, 'drain', 1000, 30)).length > 0);
  };

  it('claims round-robin across workspaces: every workspace’s oldest run before any second one', async () => {
    await drainQueue();
    const [a, b, c] = [await workspace('a'), await workspace('b'), await workspace('c')];
    const runsA = await flood(a, 6, 'a');
    const runsB = await flood(b, 2, 'b');
    const runsC = await flood(c, 1, 'c');
    const first = await claimRuns(t.database.db, 'w', 3, 30);
    expect(new Set(first.map((r) => r.id))).toEqual(new Set([runsA[0], runsB[0], runsC[0]]));
    const second = await claimRuns(t.database.db, 'w', 2, 30);
    expect(new Set(second.map((r) => r.id))).toEqual(new Set([runsA[1], runsB[1]]));
    const rest = await claimRuns(t.database.db, 'w', 100, 30);
    expect(rest.map((r) => r.id).sort()).toEqual(runsA.slice(2).sort());
    expect(rest.every((r) => r.status === 'running' && r.worker_id === 'w' && r.lease_expires_at !== null)).toBe(true);
  });

  it('serves the workspace served longest ago first, so a flood delays another workspace by one claim at most', async () => {
    await drainQueue();
    const [flooder, quiet] = [await workspace('flooder'), await workspace('quiet')];
    const floodIds = await flood(flooder, 60, 'f');
    // The flooder is being served: one run per claim.
    for (let i = 0; i < 5; i++) expect((await claimRuns(t.database.db, 'w', 1, 30))[0]!.id).toBe(floodIds[i]);
    // A run arrives in the quiet workspace, behind 55 older queued runs of the flooder.
    const [lone] = await flood(quiet, 1, 'q');
    const next = await claimRuns(t.database.db, 'w', 1, 30);
    expect(next.map((r) => r.id)).toEqual([lone]);
    // Then the flooder continues, oldest first.
    expect((await claimRuns(t.database.db, 'w', 1, 30))[0]!.id).toBe(floodIds[5]);
  });

  it('holds a workspace at maxRunningPerWorkspace running runs over every claim, so another workspace gets the free slot', async () => {
    await drainQueue();
    const [hog, other] = [await workspace('hog'), await workspace('other')];
    const hogRuns = await flood(hog, 3, 'h');
    const first = await claimRuns(t.database.db, 'w1', 10, 30, { maxRunningPerWorkspace: 1 });
    expect(first.map((r) => r.id)).toEqual([hogRuns[0]]);
    // A second worker with free slots: the workspace is at its cap.
    expect(await claimRuns(t.database.db, 'w2', 10, 30, { maxRunningPerWorkspace: 1 })).toEqual([]);
    const [otherRun] = await flood(other, 1, 'o');
    expect((await claimRuns(t.database.db, 'w2', 10, 30, { maxRunningPerWorkspace: 1 })).map((r) => r.id)).toEqual([otherRun]);
    // The running run ends: the next one of the workspace may start, one at a time.
    expect(await completeRun(t.database.db, hogRuns[0]!, 'w1', { status: 'succeeded' })).toBe(true);
    expect((await claimRuns(t.database.db, 'w2', 10, 30, { maxRunningPerWorkspace: 1 })).map((r) => r.id)).toEqual([hogRuns[1]]);
    // A cancelled running run frees its place too; a larger cap lets the rest through.
    expect((await cancelRun(t.database.db, hog, hogRuns[1]!))?.status).toBe('cancelled');
    expect((await claimRuns(t.database.db, 'w1', 10, 30, { maxRunningPerWorkspace: 2 })).map((r) => r.id)).toEqual([hogRuns[2]]);
  });

  it('never lets concurrent claims of many workers pass the running cap together', async () => {
    await drainQueue();
    for (let round = 0; round < 5; round++) {
      const ws = await workspace(`race${round}`);
      await flood(ws, 12, `r${round}`);
      const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => claimRuns(t.database.db, `racer${i}`, 2, 30, { maxRunningPerWorkspace: 3 })));
      expect(claims.flat()).toHaveLength(3);
      const running = await t.database.db.selectFrom('runs').select('id').where('workspace_id', '=', ws).where('status', '=', 'running').execute();
      expect(running).toHaveLength(3);
    }
  });

  it('never claims a cancelled run', async () => {
    await drainQueue();
    const ws = await workspace('cancel');
    const [keep, drop] = await flood(ws, 2, 'x');
    expect((await cancelRun(t.database.db, ws, drop!))?.status).toBe('cancelled');
    expect(await cancelRun(t.database.db, ws, drop!)).toBeUndefined();
    expect((await claimRuns(t.database.db, 'w', 10, 30)).map((r) => r.id)).toEqual([keep]);
  });

  it('caps queued runs per workspace when asked', async () => {
    await drainQueue();
    const ws = await workspace('cap');
    await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'a.ipynb' }, { maxQueued: 2 });
    await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'a.ipynb' }, { maxQueued: 2 });
    await expect(enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'a.ipynb' }, { maxQueued: 2 })).rejects.toThrow(/MAX_QUEUED_RUNS_PER_WORKSPACE/);
  });

  it('never schedules a tick sooner than the minimum interval, even for a cron stored before the limit', async () => {
    await drainQueue();
    const ws = await workspace('legacy');
    const due = new Date('2026-03-01T12:00:00Z');
    const s = await t.database.db
      .insertInto('schedules')
      .values({ workspace_id: ws, notebook_path: 'nb.ipynb', cron: '* * * * * *', timezone: 'UTC', next_run_at: due })
      .returning('id')
      .executeTakeFirstOrThrow();
    const now = new Date(due.getTime() + 300);
    const tick = await enqueueDueSchedules(t.database.db, { now, minIntervalSeconds: 60 });
    expect(tick.enqueued.map((r) => r.schedule_id)).toEqual([s.id]);
    const after = await t.database.db.selectFrom('schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    expect(after.next_run_at!.toISOString()).toBe('2026-03-01T12:01:00.000Z');
    // A schedule that keeps to the limit keeps its exact times.
    await t.database.db.updateTable('schedules').set({ cron: '0 * * * * *', next_run_at: due }).where('id', '=', s.id).execute();
    await enqueueDueSchedules(t.database.db, { now, minIntervalSeconds: 60 });
    const exact = await t.database.db.selectFrom('schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    expect(exact.next_run_at!.toISOString()).toBe('2026-03-01T12:01:00.000Z');
    await t.database.db.deleteFrom('runs').where('schedule_id', '=', s.id).execute();
    await t.database.db.deleteFrom('schedules').where('id', '=', s.id).execute();
  });

  it('skips the tick of a schedule whose workspace queue is full, and moves it on', async () => {
    await drainQueue();
    const ws = await workspace('full');
    await flood(ws, 3, 'full');
    const due = new Date(Date.now() - 1000);
    const s = await t.database.db
      .insertInto('schedules')
      .values({ workspace_id: ws, notebook_path: 'nb.ipynb', cron: '0 * * * *', timezone: 'UTC', next_run_at: due })
      .returning('id')
      .executeTakeFirstOrThrow();
    const tick = await enqueueDueSchedules(t.database.db, { maxQueuedPerWorkspace: 3 });
    expect(tick.enqueued).toEqual([]);
    expect(tick.skipped).toEqual([{ scheduleId: s.id, workspaceId: ws, queued: 3 }]);
    const after = await t.database.db.selectFrom('schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    expect(after.next_run_at!.getTime()).toBeGreaterThan(Date.now());
    expect(after.last_run_at).toBeNull();
    const runs = await t.database.db.selectFrom('runs').select('id').where('schedule_id', '=', s.id).execute();
    expect(runs).toEqual([]);
  });

  it('moves a due schedule that no date matches to no next time, and the tick goes on for the others', async () => {
    await drainQueue();
    const ws = await workspace('never');
    const due = new Date(Date.now() - 1000);
    // Stored as a due tick (a cron changed in the database, or stored before the check): croner's
    // search for its next date outgrew the stack, which failed the whole tick, every schedule's.
    const [never, fine] = await t.database.db
      .insertInto('schedules')
      .values([
        { workspace_id: ws, notebook_path: 'a.ipynb', cron: '0 0 31 4,6,9,11 *', timezone: 'UTC', next_run_at: due },
        { workspace_id: ws, notebook_path: 'b.ipynb', cron: '0 * * * *', timezone: 'UTC', next_run_at: due },
      ])
      .returning('id')
      .execute();
    const tick = await enqueueDueSchedules(t.database.db, { minIntervalSeconds: 60 });
    expect(tick.enqueued.map((r) => r.schedule_id).sort()).toEqual([never!.id, fine!.id].sort());
    const after = await t.database.db.selectFrom('schedules').select(['id', 'next_run_at']).where('workspace_id', '=', ws).execute();
    expect(after.find((r) => r.id === never!.id)!.next_run_at).toBeNull();
    expect(after.find((r) => r.id === fine!.id)!.next_run_at!.getTime()).toBeGreaterThan(Date.now());
  });

  it('switches off, at its tick, a schedule whose member may no longer run notebooks there: removed, made a viewer, disabled (decision 0254)', async () => {
    await drainQueue();
    const ws = await workspace('owners');
    const db = t.database.db;
    const user = async (name: string) =>
      (
        await db
          .insertInto('users')
          .values({ email: `${name}@example.com`, name, password_hash: 'x', platform_role_id: 'user' })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
    const [editor, removed, demoted, disabled] = [await user('editor'), await user('removed'), await user('demoted'), await user('disabled')];
    for (const u of [editor, removed, demoted, disabled])
      await db.insertInto('workspace_members').values({ workspace_id: ws, user_id: u, role: 'editor' }).execute();
    const due = new Date(Date.now() - 1000);
    const schedules: Record<string, string> = {};
    for (const [name, u] of Object.entries({ editor, removed, demoted, disabled })) {
      schedules[name] = (
        await db
          .insertInto('schedules')
          .values({ workspace_id: ws, notebook_path: `${name}.ipynb`, cron: '0 * * * *', timezone: 'UTC', next_run_at: due, created_by: u })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
    }
    await db.updateTable('workspace_members').set({ deleted_at: new Date() }).where('user_id', '=', removed).execute();
    await db.updateTable('workspace_members').set({ role: 'viewer' }).where('user_id', '=', demoted).execute();
    await db.updateTable('users').set({ disabled_at: new Date() }).where('id', '=', disabled).execute();
    const tick = await enqueueDueSchedules(db);
    expect(tick.enqueued.map((r) => r.schedule_id)).toEqual([schedules.editor]);
    expect(tick.stopped.map((s) => s.scheduleId).sort()).toEqual([schedules.removed, schedules.demoted, schedules.disabled].sort());
    const rows = await db.selectFrom('schedules').select(['id', 'enabled']).where('workspace_id', '=', ws).execute();
    expect(rows.filter((r) => r.enabled).map((r) => r.id)).toEqual([schedules.editor]);
    // Switched off, they queue nothing at later ticks either.
    await db.updateTable('schedules').set({ next_run_at: due }).where('workspace_id', '=', ws).execute();
    expect((await enqueueDueSchedules(db)).enqueued.map((r) => r.schedule_id)).toEqual([schedules.editor]);
    await drainQueue();
  });
});
