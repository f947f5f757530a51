// bench/runs: the costs that issue 12's run and storage limits add, each beside its anchor in
// the same run, on PostgreSQL (TEST_DATABASE_URL, a throw-away database):
// - the fair claim (round-robin across workspaces) vs the former FIFO claim, with
//   BENCH_WORKSPACES × BENCH_QUEUED queued runs and 50 000 finished runs in the table;
// - a small write with WORKSPACE_QUOTA_BYTES set (lock + sum of objects, versions, trash over
//   10 000 objects and 10 000 versions) vs the same write without a quota;
// - the SCHEDULE_MIN_INTERVAL_SECONDS check of a 6-field cron in a DST zone vs cron parsing alone;
// - POST run → running, woken by NOTIFY vs polling (start.mjs);
// - POST run → finished on real kernels, warm pool vs none vs `jupyter nbconvert --execute` (finish.mjs).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { createTestDatabase } from '@codeagent/db';
import { claimRuns, validateSchedule } from '@codeagent/runs';
import { LocalObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from '@codeagent/files';
import { table } from '../lib.mjs';
import { measureStartLatency } from './start.mjs';
import { measureRunLatency } from './finish.mjs';

process.env.CODEAGENT_TEST_DB = 'postgres';
const WORKSPACES = Number(process.env.BENCH_WORKSPACES ?? 100);
const QUEUED = Number(process.env.BENCH_QUEUED ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);

const t = await createTestDatabase('postgres');
const db = t.database.db;
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const stats = (samples) => {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { median_ms: at(0.5).toFixed(2), p99_ms: at(0.99).toFixed(2) };
};
async function time(fn, rounds = ROUNDS) {
  const samples = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    samples.push(ms(t0));
  }
  return stats(samples);
}

try {
  console.log(`bench/runs: ${WORKSPACES} workspaces × ${QUEUED} queued runs, 50 000 finished runs…`);
  await sql`INSERT INTO workspaces (name) SELECT 'ws' || g FROM generate_series(1, ${WORKSPACES}) g`.execute(db);
  await sql`
    INSERT INTO runs (workspace_id, notebook_path, status, created_at, started_at, finished_at)
    SELECT w.id, 'nb.ipynb', 'succeeded', now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
    FROM (SELECT id FROM workspaces ORDER BY id) w, generate_series(1, ${Math.ceil(50_000 / WORKSPACES)})`.execute(db);
  const refill = async () => {
    await sql`DELETE FROM runs WHERE status IN ('queued', 'running')`.execute(db);
    await sql`
      INSERT INTO runs (workspace_id, notebook_path, created_at)
      SELECT w.id, 'nb.ipynb', now() - make_interval(secs => g)
      FROM workspaces w, generate_series(1, ${QUEUED}) g`.execute(db);
    await sql`ANALYZE runs`.execute(db);
  };
  // The claim before issue 12: oldest first, whatever the workspace.
  const fifoClaim = (limit) =>
    sql`UPDATE runs SET status = 'running', worker_id = 'bench', started_at = now(), lease_expires_at = now() + interval '30 seconds'
        WHERE id IN (SELECT id FROM runs WHERE status = 'queued' ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING *`.execute(db);
  await refill();
  const fifo = await time(() => fifoClaim(8));
  await refill();
  const fair = await time(() => claimRuns(db, 'bench', 8, 30));

  console.log('bench/runs: 10 000 objects and 10 000 versions in one workspace…');
  const [{ id: ws }] = (await sql`SELECT id FROM workspaces LIMIT 1`.execute(db)).rows;
  await sql`
    INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
    SELECT ${ws}, 'data/' || g, gen_random_uuid(), 1000, 'x', 'text/plain' FROM generate_series(1, 10000) g`.execute(db);
  await sql`
    INSERT INTO object_versions (id, workspace_id, path, size, sha256, content_type, created_at)
    SELECT gen_random_uuid(), ${ws}, 'data/' || g, 1000, 'x', 'text/plain', now() FROM generate_series(1, 10000) g`.execute(db);
  await sql`ANALYZE objects`.execute(db);
  await sql`ANALYZE object_versions`.execute(db);
  const store = new LocalObjectStore(mkdtempSync(join(tmpdir(), 'codeagent-bench-runs-')));
  await store.init();
  const plain = new WorkspaceFiles(db, store);
  const quota = new WorkspaceFiles(db, store, undefined, { quotaBytes: 1e12 });
  const write = (files, prefix) => (i) => files.put(ws, `${prefix}/${i}.txt`, Readable.from([Buffer.from('hello')]), { actor: null });
  const noQuota = await time(write(plain, 'plain'));
  const withQuota = await time(write(quota, 'quota'));

  const parseOnly = await time(() => validateSchedule('30 */5 * * * *', 'Europe/Berlin'), 50);
  const withGap = await time(() => validateSchedule('30 */5 * * * *', 'Europe/Berlin', 60), 50);
  const fiveField = await time(() => validateSchedule('*/5 * * * *', 'Europe/Berlin', 60), 50);

  console.log(
    '\n' +
      table([
        { what: `claim 8 runs, FIFO (anchor), ${WORKSPACES * QUEUED} queued`, ...fifo },
        { what: `claim 8 runs, fair round-robin, ${WORKSPACES * QUEUED} queued`, ...fair },
        { what: 'PUT 5 bytes, no quota (anchor)', ...noQuota },
        { what: 'PUT 5 bytes, quota over 20 000 rows', ...withQuota },
        { what: 'cron parse only (anchor)', ...parseOnly },
        { what: 'cron + min interval, 6 fields, Europe/Berlin', ...withGap },
        { what: 'cron + min interval, 5 fields (no sample)', ...fiveField },
      ]),
  );
} finally {
  await t.drop();
}

console.log('\nbench/runs: POST run → running (notebook handed to the runtime), PostgreSQL, issue 17');
console.log(table(await measureStartLatency()));
console.log('\nbench/runs: POST run → running → finished, one-cell notebook, real sandboxed kernels (warm pool vs none vs nbconvert)');
const finish = await measureRunLatency();
console.log(table(finish.rows));
process.exit(0);
