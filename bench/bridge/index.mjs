// bench/bridge: the bridge's /edit overhead beside a direct call to the same zero-latency fake
// code-agent server, same run (target ≤ 5 ms at p50), and 50 notebooks edited in parallel.
import { createServer } from 'node:http';
import { request } from 'undici';
import { createTestDatabase } from '../../packages/db/dist/index.js';
import { issueUserToken } from '../../packages/auth/dist/index.js';
import { buildBridgeApp } from '../../services/bridge/dist/index.js';
import { table } from '../lib.mjs';

const N = Number(process.env.BENCH_ITERATIONS ?? 500);
let next = 0;
const reply = JSON.stringify({ info: { providerID: 'fake', modelID: 'fake-model' }, parts: [{ type: 'text', text: '```python\nprint(1)\n```\nok' }] });
const fake = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && req.url.startsWith('/session?')) return res.end(JSON.stringify({ id: `ses_${++next}` }));
    return res.end(reply);
  });
});
await new Promise((r) => fake.listen(0, '127.0.0.1', r));
const upstream = `http://127.0.0.1:${fake.address().port}`;

const t = await createTestDatabase('postgres');
const user = await t.database.db
  .insertInto('users')
  .values({ email: 'b@x', name: 'b', password_hash: 'x', platform_role_id: 'user' })
  .returning('id')
  .executeTakeFirstOrThrow();
const secret = 'bench-secret-that-is-long-enough-0000000000';
const { token } = await issueUserToken(user.id, secret, 3600);
const app = await buildBridgeApp({
  db: t.database.db,
  jwtSecret: secret,
  env: { url: upstream, user: undefined, password: undefined, allowedHosts: [] },
  workdir: '/tmp',
});
const base = (await app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
const body = (nb) =>
  JSON.stringify({
    notebook_path: nb,
    action: 'fix',
    cell: { id: 'c', source: 'print(1/0)' },
    errors: [{ ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: [] }],
  });

async function time(fn) {
  for (let i = 0; i < 50; i++) await fn();
  const xs = [];
  for (let i = 0; i < N; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    xs.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  xs.sort((a, b) => a - b);
  return { p50: xs[Math.floor(N / 2)], p99: xs[Math.floor(N * 0.99)] };
}
const direct = await time(async () => {
  const r = await request(`${upstream}/session/ses_1/message`, {
    method: 'POST',
    body: '{"parts":[{"type":"text","text":"x"}]}',
    headers: { 'content-type': 'application/json' },
  });
  await r.body.text();
});
const viaBridge = await time(async () => {
  const r = await request(`${base}/codeagent-bridge/edit`, {
    method: 'POST',
    body: body('nb/one.ipynb'),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
  });
  if (r.statusCode !== 200) throw new Error(await r.body.text());
  await r.body.text();
});
const t0 = Date.now();
const all = await Promise.all(
  Array.from({ length: 50 }, (_, i) =>
    request(`${base}/codeagent-bridge/edit`, {
      method: 'POST',
      body: body(`nb/p${i}.ipynb`),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    }).then(async (r) => (await r.body.text(), r.statusCode)),
  ),
);
const parallelMs = Date.now() - t0;
console.log(`\nbench/bridge: ${N} sequential edits, zero-latency fake code agent, database ${t.target}\n`);
console.log(
  table([
    { path: 'direct POST /session/{id}/message', 'p50 ms': direct.p50.toFixed(2), 'p99 ms': direct.p99.toFixed(2) },
    { path: 'bridge POST /codeagent-bridge/edit', 'p50 ms': viaBridge.p50.toFixed(2), 'p99 ms': viaBridge.p99.toFixed(2) },
  ]),
);
console.log(`\nbridge overhead at p50: ${(viaBridge.p50 - direct.p50).toFixed(2)} ms (target ≤ 5 ms)`);
console.log(`50 notebooks in parallel (new sessions each): ${parallelMs} ms, ${all.filter((s) => s === 200).length}/50 succeeded`);
await app.close();
fake.close();
await t.drop();
process.exit(0);
