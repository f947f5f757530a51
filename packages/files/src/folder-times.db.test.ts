import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type DB, type Listener, type TestDatabase } from '@codeagent/db';
import { LocalObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from './files.js';

async function until(what: string, probe: () => boolean | Promise<boolean>, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: still not so after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Decision 0237: a folder's time in a listing (WebDAV `PROPFIND`) is the newest under it, which
 * reads every object below it; a mount lists its root every few seconds. The times are kept while
 * the changes of files are followed, and a change drops those of its folder and the folders above.
 */
describe(`folder times of listings, kept while changes are followed (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let files: WorkspaceFiles;
  let listener: Listener;
  let ws: string;
  /** The statements that computed folder times. */
  let timeQueries = 0;
  beforeAll(async () => {
    t = await createTestDatabase();
    // The same pool, through a Kysely that counts the folder-time statements.
    const counted = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: t.database.pool }),
      log: (e) => {
        if (e.level === 'query' && e.query.sql.includes('max(updated_at)')) timeQueries++;
      },
    });
    const store = new LocalObjectStore(mkdtempSync(join(tmpdir(), 'codeagent-folder-times-')));
    await store.init();
    files = new WorkspaceFiles(counted, store);
    ws = (await t.database.db.insertInto('workspaces').values({ name: 'times' }).returning('id').executeTakeFirstOrThrow()).id;
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type, updated_at)
      SELECT ${ws}, 'data/' || i || '.csv', gen_random_uuid(), 1, 'x', 'text/csv', timestamp '2026-01-01' + i * interval '1 s'
      FROM generate_series(1, 2000) i`.execute(t.database.db);
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type, updated_at)
      VALUES (${ws}, 'notes/a/b.md', gen_random_uuid(), 1, 'x', 'text/plain', timestamp '2026-02-01')`.execute(t.database.db);
    // (Reconnecting after 2 s at the earliest: the test makes a change while nobody listens.)
    listener = files.followChanges((channel, handlers) => t.database.listen(channel, handlers, { retryMs: 2000 }));
    await until('listening', () => listener.connected);
  });
  afterAll(async () => {
    await listener?.close();
    await t.drop();
  });

  const timesOf = async (folder: string) => Object.fromEntries((await files.listFolder(ws, folder, 100)).folders.map((f) => [f.name, f.updated_at]));
  const put = (path: string) => files.put(ws, path, Readable.from([Buffer.from('new')]), { actor: null });

  it('computes a folder time once, and again only after a change below it', async () => {
    timeQueries = 0;
    const first = await timesOf('');
    expect(first).toEqual({ data: new Date('2026-01-01T00:33:20Z').toISOString(), notes: new Date('2026-02-01T00:00:00Z').toISOString() });
    expect(timeQueries).toBe(1);
    expect(await timesOf('')).toEqual(first);
    expect(await timesOf('')).toEqual(first);
    expect(timeQueries).toBe(1);

    // A save at the top changes no folder's time: still kept.
    await put('top.txt');
    await new Promise((r) => setTimeout(r, 200));
    expect(await timesOf('')).toEqual(first);
    expect(timeQueries).toBe(1);

    // A save two folders down: the folders above it are computed again (once), with its time.
    const saved = (await put('notes/a/new.md')).object.updated_at;
    await until('the change is heard', async () => (await timesOf('')).notes === saved);
    const counted = timeQueries;
    expect(await timesOf('')).toEqual({ data: first.data, notes: saved });
    expect(await timesOf('notes/')).toEqual({ a: saved });
    expect(timeQueries).toBe(counted + 1);
  });

  it('keeps nothing while its connection is down, and starts over once it is back', async () => {
    await timesOf('');
    timeQueries = 0;
    const killed = await sql<{ n: number }>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND query ILIKE 'LISTEN workspace_files%'`.execute(t.database.db);
    expect(killed.rows[0]?.n).toBe(1);
    await until('the loss is noticed', () => !listener.connected);
    // A change while nobody listens: never announced, and yet listed.
    await sql`UPDATE objects SET updated_at = timestamp '2027-01-01' WHERE workspace_id = ${ws} AND path = 'data/1.csv'`.execute(t.database.db);
    expect(listener.connected).toBe(false);
    expect((await timesOf('')).data).toBe(new Date('2027-01-01T00:00:00Z').toISOString());
    expect(timeQueries).toBe(1);
    await until('listening again', () => listener.connected);
    const before = timeQueries;
    expect((await timesOf('')).data).toBe(new Date('2027-01-01T00:00:00Z').toISOString());
    await timesOf('');
    expect(timeQueries).toBe(before + 1);
  });
});
