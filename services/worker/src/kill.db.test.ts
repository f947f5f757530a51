import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { enqueueRun } from '@codeagent/runs';
import { ScheduleWorker } from './worker.js';

const FIXTURE = fileURLToPath(new URL('../dist/kill-fixture.js', import.meta.url));

/** Needs a database that a second process can reach: PostgreSQL only (PGlite is in-process). */
describe.runIf(process.env.CODEAGENT_TEST_DB === 'postgres')('a worker killed with SIGKILL mid-run', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t.drop();
  });

  it('leaves its run failed after the lease, and the next tick runs normally', async () => {
    const ws = (await t.database.db.insertInto('workspaces').values({ name: 'kill' }).returning('id').executeTakeFirstOrThrow()).id;
    const doomed = await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'nb.ipynb' });
    const child = spawn(process.execPath, [FIXTURE, t.url, 'doomed-worker', '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (c: Buffer) => c.toString().includes('executing') && resolve());
      child.once('exit', (code) => reject(new Error(`fixture exited early (${code})`)));
    });
    const running = await t.database.db.selectFrom('runs').selectAll().where('id', '=', doomed.id).executeTakeFirstOrThrow();
    expect(running).toMatchObject({ status: 'running', worker_id: 'doomed-worker' });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    const survivor = new ScheduleWorker({
      db: t.database.db,
      io: {
        readNotebook: () => Promise.resolve(Buffer.from(JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] }))),
        writeExecutedNotebook: () => Promise.resolve(),
        writeRunLog: (w, r) => Promise.resolve(`${w}/${r}.log`),
      },
      runtime: { runNotebook: (nb) => Promise.resolve({ status: 'ok', notebook: nb, duration_ms: 1 }) },
      log: pino({ level: 'silent' }),
      pollMs: 100,
    });
    // Before the lease runs out the run is still running: no premature failure.
    await survivor.tick();
    expect((await t.database.db.selectFrom('runs').select('status').where('id', '=', doomed.id).executeTakeFirstOrThrow()).status).toBe('running');

    await new Promise((r) => setTimeout(r, 2200));
    const next = await enqueueRun(t.database.db, { workspaceId: ws, notebookPath: 'nb.ipynb' });
    await survivor.tick();
    await survivor.drain();
    const dead = await t.database.db.selectFrom('runs').selectAll().where('id', '=', doomed.id).executeTakeFirstOrThrow();
    expect(dead.status).toBe('failed');
    expect(dead.error).toMatch(/doomed-worker/);
    expect(dead.finished_at).not.toBeNull();
    const fine = await t.database.db.selectFrom('runs').select('status').where('id', '=', next.id).executeTakeFirstOrThrow();
    expect(fine.status).toBe('succeeded');
  });
});
