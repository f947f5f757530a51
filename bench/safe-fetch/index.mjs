// bench/safe-fetch: (1) the guarded outbound client's latency on loopback beside a plain undici
// request to the same server, same run (target ≤ 1.3×); (2) GET /admin/audit p95 with 100k
// audit entries in PostgreSQL (newest page, filtered by target, filtered by action).
import { createServer } from 'node:http';
import { Agent, request } from 'undici';
import pg from 'pg';
import { createOutboundClient } from '../../packages/safe-fetch/dist/index.js';
import { openDatabase, migrate } from '../../packages/db/dist/index.js';
import { buildClusterAdminApp } from '../../services/cluster-admin/dist/index.js';
import { freshDatabase, table } from '../lib.mjs';

const N = Number(process.env.BENCH_ITERATIONS ?? 2000);
const server = createServer((_req, res) => res.end('{"ok":true}'));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/ws/v1/cluster/info`;

const plain = new Agent({ connections: 32 });
const guarded = createOutboundClient({ allowLoopback: true, timeoutMs: 5000 });
async function measure(fn) {
  for (let i = 0; i < 200; i++) await fn();
  const times = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(N / 2)], p95: times[Math.floor(N * 0.95)], p99: times[Math.floor(N * 0.99)] };
}
const rounds = { plain: [], guarded: [] };
for (let r = 0; r < 3; r++) {
  rounds.plain.push(
    await measure(async () => {
      const res = await request(url, { dispatcher: plain });
      await res.body.text();
    }),
  );
  rounds.guarded.push(await measure(() => guarded.fetch(url)));
}
const med = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[1];
const rows = Object.entries(rounds).map(([name, xs]) => ({
  client: name === 'plain' ? 'plain undici request' : 'safe-fetch client',
  'p50 ms': med(xs, 'p50').toFixed(3),
  'p99 ms': med(xs, 'p99').toFixed(3),
}));
console.log(`\nbench/safe-fetch: ${N} sequential GETs on loopback × 3 rounds (median of rounds)\n`);
console.log(table(rows));
console.log(`\nsafe-fetch ÷ plain undici at p50: ${(med(rounds.guarded, 'p50') / med(rounds.plain, 'p50')).toFixed(2)}× (target ≤ 1.3×)`);
await guarded.close();
await plain.close();
server.close();

// Audit listing at 100k entries.
const auditUrl = await freshDatabase('codeagent_bench_audit', { who: 'bench/safe-fetch' });
const database = await openDatabase({ databaseUrl: auditUrl });
await migrate(database);
const raw = new pg.Client({ connectionString: auditUrl });
await raw.connect();
await raw.query(`INSERT INTO audit_entries (occurred_at, actor, action, target_type, target_id, details)
  SELECT now() - (i || ' milliseconds')::interval, 'abcdef012345', (ARRAY['cluster.create','cluster.update','cluster.delete'])[1 + i % 3], 'cluster',
         ('00000000-0000-0000-0000-' || lpad((i % 500)::text, 12, '0'))::uuid,
         jsonb_build_object('before', null, 'after', jsonb_build_object('name', 'c' || i), 'changed', jsonb_build_array('name'))
  FROM generate_series(1, 100000) AS i`);
await raw.query('ANALYZE audit_entries');
await raw.end();
const app = await buildClusterAdminApp({
  db: database.db,
  adminTokens: ['bench'],
  agentToken: 'a',
  secretsKey: Buffer.alloc(32, 1),
  outbound: createOutboundClient(),
});
const auth = { authorization: 'Bearer bench' };
const audit = async (q) => {
  const times = [];
  for (let i = 0; i < 200; i++) {
    const t = process.hrtime.bigint();
    const res = await app.inject({ method: 'GET', url: `/admin/audit${q}`, headers: auth });
    if (res.statusCode !== 200) throw new Error(res.body);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { p50: times[100].toFixed(2), p95: times[190].toFixed(2) };
};
const auditRows = [];
for (const [name, q] of [
  ['newest 100', '?limit=100'],
  ['by target_id', '?target_id=00000000-0000-0000-0000-000000000042&limit=100'],
  ['by action', '?action=cluster.delete&limit=100'],
]) {
  auditRows.push({ query: name, ...(await audit(q)) });
}
console.log('\nGET /admin/audit with 100,000 entries (PostgreSQL, in-process inject, 200 calls each)\n');
console.log(table(auditRows.map((r) => ({ query: r.query, 'p50 ms': r.p50, 'p95 ms': r.p95 }))));
await app.close();
await database.close();
process.exit(0);
