// bench/quota: what an upload costs under WORKSPACE_QUOTA_BYTES in a workspace that stores many
// files, against the same upload in a workspace that stores nothing (the anchor, in the same
// run): with a quota every growing write is admitted against the workspace's stored bytes
// (objects, versions and trash; decision 0038), one after another per workspace. A real backend
// on PostgreSQL, BENCH_QUOTA_OBJECTS objects (default 1 000 000) with a tenth as many versions and
// a tenth in the trash inserted in SQL; 4 KiB PUTs of new files, one at a time (latency) and eight
// at a time (throughput), the two workspaces alternating round by round.
import { sql } from 'kysely';
import { startTestBackend, createAndLogin, createWorkspace, addMembers, bearer } from '@codeagent/backend/testing';
import { table } from '../lib.mjs';

const OBJECTS = Number(process.env.BENCH_QUOTA_OBJECTS ?? 1_000_000);
const SEQUENTIAL = Number(process.env.BENCH_QUOTA_UPLOADS ?? 60);
const PARALLEL = 8;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BODY = 'x'.repeat(4096);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

process.env.CODEAGENT_TEST_DB ??= 'postgres';
const b = await startTestBackend({ workspaceQuotaBytes: 1e15 });
try {
  const url = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const db = b.t.database.db;
  const editor = await createAndLogin(b, 'bench-editor@example.com');
  const empty = await createWorkspace(b, 'bench-quota-empty');
  const full = await createWorkspace(b, 'bench-quota-full');
  await addMembers(b, empty, [[editor, 'editor']]);
  await addMembers(b, full, [[editor, 'editor']]);
  console.log(`bench/quota: inserting ${OBJECTS} objects, ${OBJECTS / 10} versions and ${OBJECTS / 10} trash items…`);
  await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
    SELECT ${full}, 'data/f' || (g / 1000) || '/x' || g || '.csv', gen_random_uuid(), 1000 + g % 5000, repeat('0', 64), 'text/csv'
    FROM generate_series(1, ${OBJECTS}) g`.execute(db);
  await sql`INSERT INTO object_versions (id, workspace_id, path, size, sha256, content_type, created_at)
    SELECT gen_random_uuid(), ${full}, 'data/f' || (g / 1000) || '/x' || g || '.csv', 1000, repeat('0', 64), 'text/csv', now()
    FROM generate_series(1, ${OBJECTS / 10}) g`.execute(db);
  await sql`INSERT INTO trash_items (workspace_id, path, version_id, size, sha256, content_type, updated_at)
    SELECT ${full}, 'old/' || g, gen_random_uuid(), 1000, repeat('0', 64), 'text/csv', now()
    FROM generate_series(1, ${OBJECTS / 10}) g`.execute(db);
  await sql`VACUUM ANALYZE objects, object_versions, trash_items`.execute(db);

  let n = 0;
  const put = async (ws) => {
    const t0 = process.hrtime.bigint();
    const res = await fetch(`${url}/api/v1/data-resources/${ws}/objects/new/${n++}.txt`, {
      method: 'PUT',
      body: BODY,
      headers: { ...bearer(editor.token), 'content-type': 'text/plain' },
    });
    await res.arrayBuffer();
    if (res.status !== 201) throw new Error(`PUT answered ${res.status}`);
    return ms(t0);
  };
  const targets = [
    ['empty workspace (anchor)', empty],
    [`workspace of ${OBJECTS.toLocaleString('en')} objects`, full],
  ];
  for (const [, ws] of targets) for (let i = 0; i < 10; i++) await put(ws); // warm-up
  const latency = Object.fromEntries(targets.map(([name]) => [name, []]));
  const throughput = Object.fromEntries(targets.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, ws] of round % 2 === 0 ? targets : [...targets].reverse()) {
      for (let i = 0; i < SEQUENTIAL; i++) latency[name].push(await put(ws));
      const t0 = process.hrtime.bigint();
      let left = SEQUENTIAL;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          while (left-- > 0) await put(ws);
        }),
      );
      throughput[name].push((SEQUENTIAL * 1000) / ms(t0));
    }
  }
  const anchor = targets[0][0];
  console.log(
    `\nPUT of a 4 KiB new file with WORKSPACE_QUOTA_BYTES set, ${ROUNDS} rounds of ${SEQUENTIAL} one at a time and ${SEQUENTIAL} ${PARALLEL} at a time`,
  );
  console.log(
    table(
      targets.map(([name]) => ({
        workspace: name,
        'p50 ms': median(latency[name]).toFixed(2),
        'p99 ms': pct(latency[name], 0.99).toFixed(2),
        [`uploads/s, ${PARALLEL} at a time`]: median(throughput[name]).toFixed(0),
        'p50 ÷ anchor': (median(latency[name]) / median(latency[anchor])).toFixed(2),
        'uploads/s ÷ anchor': (median(throughput[name]) / median(throughput[anchor])).toFixed(2),
      })),
    ),
  );
} finally {
  await b.close();
}
