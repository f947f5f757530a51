// bench/lists: a page deep in a long list costs what the first page costs. A workspace with
// BENCH_LIST_RUNS runs (default 200 000, inserted in SQL), `GET /api/v1/workspaces/{ws}/runs?limit=50`
// through a real backend on PostgreSQL: the first page (the anchor, in the same run) against the
// pages whose cursor sits 10 %, 50 % and 90 % down the list. Every keyset list (users, workspaces,
// members, schedules, runs, trash, audit) asks PostgreSQL for `(time, id) < (cursor)` as a row
// comparison, which its index starts at; the OR form it replaced (`time < t OR (time = t AND
// id < i)`) made PostgreSQL walk the index from the top and drop every row before the cursor. Both
// SQL forms are timed as well, straight on the database, at the same cursors. Then a small
// folder beside BENCH_LIST_OBJECTS other objects (default 100 000) against the same folder alone,
// and the file browser's listing by folder (decision 0199) in that workspace.
import { sql } from 'kysely';
import { startTestBackend, createAndLogin, createWorkspace, addMembers, bearer } from '@codeagent/backend/testing';
import { table } from '../lib.mjs';

const RUNS = Number(process.env.BENCH_LIST_RUNS ?? 200_000);
const REQUESTS = Number(process.env.BENCH_LIST_REQUESTS ?? 200);
const LIMIT = 50;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const cursorOf = (row) => Buffer.from(JSON.stringify([row.created_at.toISOString(), row.id])).toString('base64url');

process.env.CODEAGENT_TEST_DB ??= 'postgres';
const b = await startTestBackend();
try {
  const url = (await b.app.listen({ host: '127.0.0.1', port: 0 })).replace(/\/$/, '');
  const db = b.t.database.db;
  const viewer = await createAndLogin(b, 'bench-viewer@example.com');
  const ws = await createWorkspace(b, 'bench-lists');
  await addMembers(b, ws, [[viewer, 'viewer']]);
  console.log(`bench/lists: inserting ${RUNS} finished runs…`);
  // One run per millisecond going back from now, every tenth sharing its millisecond with the
  // next (ties are decided by the id); finished, so that no worker would take them.
  await sql`INSERT INTO runs (workspace_id, notebook_path, status, created_at, started_at, finished_at)
    SELECT ${ws}, 'nb.ipynb', 'succeeded', now() - make_interval(secs => (g - g % 10 * 0.1) / 1000.0), now(), now()
    FROM generate_series(1, ${RUNS}) g`.execute(db);
  await sql`ANALYZE runs`.execute(db);

  const newestFirst = (offset) =>
    db
      .selectFrom('runs')
      .select(['created_at', 'id'])
      .where('workspace_id', '=', ws)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .offset(offset)
      .limit(1)
      .executeTakeFirstOrThrow();
  const places = [
    ['first page (anchor)', undefined],
    ['10 % down', await newestFirst(Math.floor(RUNS * 0.1))],
    ['50 % down', await newestFirst(Math.floor(RUNS * 0.5))],
    ['90 % down', await newestFirst(Math.floor(RUNS * 0.9))],
  ];

  const api = async (row) => {
    const t0 = process.hrtime.bigint();
    const res = await fetch(`${url}/api/v1/workspaces/${ws}/runs?limit=${LIMIT}${row ? `&cursor=${cursorOf(row)}` : ''}`, { headers: bearer(viewer.token) });
    const body = await res.json();
    const took = ms(t0);
    if (res.status !== 200 || body.items.length !== LIMIT) throw new Error(`the list answered ${res.status} with ${body.items?.length} items`);
    return took;
  };
  const direct = async (row, form) => {
    const t0 = process.hrtime.bigint();
    const rows = await (
      form === 'row'
        ? sql`SELECT * FROM runs WHERE workspace_id = ${ws} AND (created_at, id) < (${row.created_at}, ${row.id}) ORDER BY created_at DESC, id DESC LIMIT ${LIMIT + 1}`
        : sql`SELECT * FROM runs WHERE workspace_id = ${ws} AND (created_at < ${row.created_at} OR (created_at = ${row.created_at} AND id < ${row.id})) ORDER BY created_at DESC, id DESC LIMIT ${LIMIT + 1}`
    ).execute(db);
    const took = ms(t0);
    if (rows.rows.length !== LIMIT + 1) throw new Error(`the ${form} form found ${rows.rows.length} rows`);
    return took;
  };

  for (let i = 0; i < 20; i++) for (const [, row] of places) await api(row); // warm: code compiled, pages cached
  const samples = new Map(places.map(([name]) => [name, []]));
  for (let i = 0; i < REQUESTS; i++) for (const [name, row] of places) samples.get(name).push(await api(row)); // interleaved
  const sqlRounds = Math.max(5, Math.floor(REQUESTS / 20));
  const sqlSamples = new Map(places.slice(1).map(([name]) => [name, { row: [], or: [] }]));
  for (let i = 0; i < sqlRounds; i++) {
    for (const [name, row] of places.slice(1)) {
      sqlSamples.get(name).row.push(await direct(row, 'row'));
      sqlSamples.get(name).or.push(await direct(row, 'or'));
    }
  }
  const anchor = median(samples.get(places[0][0]));
  const rows = places.map(([name]) => {
    const p50 = median(samples.get(name));
    const s = sqlSamples.get(name);
    return {
      page: name,
      'API p50 ms': p50.toFixed(2),
      '÷ first page': (p50 / anchor).toFixed(2),
      'SQL, row comparison, ms': s ? median(s.row).toFixed(2) : '–',
      'SQL, the OR form it replaced, ms': s ? median(s.or).toFixed(2) : '–',
    };
  });
  console.log(`\nbench/lists: ${RUNS} runs in one workspace, pages of ${LIMIT}, ${REQUESTS} interleaved requests per page (SQL: ${sqlRounds} each), medians\n`);
  console.log(table(rows));
  const worst = Math.max(...places.slice(1).map(([name]) => median(samples.get(name)) / anchor));
  console.log(`\ndeepest page ÷ first page: ${worst.toFixed(2)}× (a keyset page costs the same wherever it starts: ≈ 1×)`);

  // Folders: the same small folder (`aa/`, 10 files; before every other path) in a workspace of BENCH_LIST_OBJECTS other
  // objects and, as the anchor, in a workspace that holds nothing else. A folder's objects are
  // one range of the primary key (paths compare by code point, migration 011), which WebDAV's
  // lookups and listings and the API's prefix listing read from the index.
  const OBJECTS = Number(process.env.BENCH_LIST_OBJECTS ?? 100_000);
  const small = await createWorkspace(b, 'bench-lists-small');
  const big = await createWorkspace(b, 'bench-lists-big');
  await addMembers(b, small, [[viewer, 'viewer']]);
  await addMembers(b, big, [[viewer, 'viewer']]);
  console.log(`\nbench/lists: inserting ${OBJECTS} objects…`);
  const objects = (workspace, from) =>
    sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
      SELECT ${workspace}, p, gen_random_uuid(), 1, repeat('0', 64), 'text/plain' FROM ${from}`.execute(db);
  for (const workspace of [small, big]) await objects(workspace, sql`(SELECT 'aa/' || g || '.txt' AS p FROM generate_series(1, 10) g) s`);
  await objects(big, sql`(SELECT 'data/f' || g || '/x' || (g % 7) || '.csv' AS p FROM generate_series(1, ${OBJECTS}) g) s`);
  await sql`ANALYZE objects`.execute(db);
  const asks = [
    ['WebDAV PROPFIND aa/ (depth 1)', (w) => [`${url}/api/v1/dav/${w}/aa/`, { method: 'PROPFIND', headers: { ...bearer(viewer.token), depth: '1' } }], 207],
    ['WebDAV GET of a missing path', (w) => [`${url}/api/v1/dav/${w}/nope`, { headers: bearer(viewer.token) }], 404],
    ['API objects?prefix=aa/', (w) => [`${url}/api/v1/data-resources/${w}/objects?prefix=aa/`, { headers: bearer(viewer.token) }], 200],
    // The file browser's listing of the root (decision 0199): its folders and files, each folder
    // with a count of what lies under it (up to 1 000), in one page whatever the folders hold.
    [
      'API objects?delimiter=/ (the root, by folder)',
      (w) => [`${url}/api/v1/data-resources/${w}/objects?delimiter=/&limit=1000`, { headers: bearer(viewer.token) }],
      200,
    ],
    // For information: the root's listing names each sub-folder with the time of its newest
    // object, which reads every object below it (here all of them).
    [
      'WebDAV PROPFIND of the root (depth 1)',
      (w) => [`${url}/api/v1/dav/${w}/`, { method: 'PROPFIND', headers: { ...bearer(viewer.token), depth: '1' } }],
      207,
    ],
  ];
  const ask = async ([, request, status], w) => {
    const t0 = process.hrtime.bigint();
    const res = await fetch(...request(w));
    await res.arrayBuffer();
    const took = ms(t0);
    if (res.status !== status) throw new Error(`${request(w)[0]} answered ${res.status}`);
    return took;
  };
  for (let i = 0; i < 20; i++) for (const a of asks) for (const w of [small, big]) await ask(a, w);
  const folderRows = [];
  for (const a of asks) {
    const times = { [small]: [], [big]: [] };
    for (let i = 0; i < REQUESTS; i++) for (const w of i % 2 ? [big, small] : [small, big]) times[w].push(await ask(a, w));
    const [alone, among] = [median(times[small]), median(times[big])];
    folderRows.push({
      request: a[0],
      'folder alone, p50 ms': alone.toFixed(2),
      [`among ${OBJECTS} objects, p50 ms`]: among.toFixed(2),
      ratio: (among / alone).toFixed(2),
    });
  }
  console.log(
    `\nbench/lists: a folder of 10 files alone in its workspace (anchor) and among ${OBJECTS} other objects, ${REQUESTS} interleaved requests each, medians\n`,
  );
  console.log(table(folderRows));

  // The file browser's load of the big workspace's root: before decision 0199 it read every
  // object under the folder (pages of 1 000 to the end) to find the sub-folders and count their
  // files; now one page by folder. And a page of 1 000 entries by folder where each is a
  // sub-folder (`data/` holds BENCH_LIST_OBJECTS of them: a probe of the key and a count each)
  // against a plain page of 1 000 objects from the same folder.
  const pagesOf = async (query, all) => {
    const t0 = process.hrtime.bigint();
    let cursor = '';
    let pages = 0;
    for (;;) {
      const res = await fetch(`${url}/api/v1/data-resources/${big}/objects?${query}&limit=1000${cursor}`, { headers: bearer(viewer.token) });
      const body = await res.json();
      if (res.status !== 200) throw new Error(`the listing answered ${res.status}`);
      pages++;
      if (body.next_cursor === null || !all) break;
      cursor = `&cursor=${body.next_cursor}`;
    }
    return { took: ms(t0), pages };
  };
  const loads = [
    ['the root by folder, every page (now)', 'delimiter=/', true],
    ['the root, every object, every page (before)', 'prefix=', true],
    ['data/: one page of 1 000 sub-folders by folder', 'prefix=data/&delimiter=/', false],
    ['data/: one page of 1 000 objects, plain (anchor)', 'prefix=data/', false],
  ];
  const LOADS = Math.max(3, Math.floor(REQUESTS / 20));
  const loadTimes = new Map(loads.map(([name]) => [name, []]));
  const loadPages = new Map();
  for (let i = 0; i < LOADS; i++) {
    for (const [name, query, all] of loads) {
      const { took, pages } = await pagesOf(query, all);
      loadTimes.get(name).push(took);
      loadPages.set(name, pages);
    }
  }
  console.log(`\nbench/lists: the file browser's load in a workspace of ${OBJECTS + 10} objects, ${LOADS} interleaved rounds, medians\n`);
  console.log(table(loads.map(([name]) => ({ load: name, pages: loadPages.get(name), 'p50 ms': median(loadTimes.get(name)).toFixed(2) }))));
} finally {
  await b.close();
}
process.exit(0);
