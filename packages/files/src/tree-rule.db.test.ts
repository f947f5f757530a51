import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError } from '@codeagent/service-kit';
import { sql } from 'kysely';
import { TREE_LOCK_DEPTH, treeLocks, type WorkspaceFiles } from './files.js';
import { createTestFiles, type TestFiles } from './testing.js';

const put = (files: WorkspaceFiles, ws: string, path: string, body = 'x') => files.put(ws, path, Readable.from([Buffer.from(body)]), { actor: null });

/** Writes a file `name` and two files in a folder `name` at once: either the file (both writes below it refused) or the folder (the file refused) is stored. */
async function fileAndFolderAtOnce(files: WorkspaceFiles, ws: string, name: string): Promise<void> {
  const results = await Promise.allSettled([put(files, ws, name), put(files, ws, `${name}/inner.txt`), put(files, ws, `${name}/other.txt`)]);
  const stored = (await files.list(ws, name, 1000, undefined)).items.map((o) => o.path);
  if (stored.includes(name)) expect(stored, name).toEqual([name]);
  else expect(stored, name).toEqual([`${name}/inner.txt`, `${name}/other.txt`]);
  expect(results.filter((r) => r.status === 'rejected').every((r) => r.reason instanceof ConflictError)).toBe(true);
}

/**
 * A name is never both a file and a folder (decision 0213). The workspace is a file tree to
 * WebDAV, the mount and the kernels' `/workspace`: a file `jobs` beside `jobs/nb.ipynb` made every
 * run of that notebook fail ("Not a directory: /workspace/jobs").
 */
describe(`a name is a file or a folder, never both (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  let ws: string;
  beforeAll(async () => {
    fixture = await createTestFiles('tree-rule');
    ({ files } = fixture);
    ws = await fixture.newWorkspace('tree');
  });
  afterAll(async () => {
    await fixture.close();
  });
  const paths = async (prefix: string) => (await files.list(ws, prefix, 1000, undefined)).items.map((o) => o.path);

  it('refuses a file below a file, and a file with a folder’s name (409), storing nothing', async () => {
    await put(files, ws, 'jobs/nb.ipynb', 'notebook');
    await put(files, ws, 'report');
    await expect(put(files, ws, 'jobs')).rejects.toThrow(ConflictError);
    await expect(put(files, ws, 'report/part.csv')).rejects.toThrow(/report is a file/);
    await expect(put(files, ws, 'report/deeper/part.csv')).rejects.toThrow(/report is a file/);
    expect(await paths('jobs')).toEqual(['jobs/nb.ipynb']);
    expect(await paths('report')).toEqual(['report']);
    // Replacing either is a save like any other.
    expect((await put(files, ws, 'jobs/nb.ipynb', 'saved')).created).toBe(false);
    expect((await put(files, ws, 'report', 'saved')).created).toBe(false);
    // A prefix that is not a whole segment is another name.
    expect((await put(files, ws, 'jobs2')).created).toBe(true);
    expect((await put(files, ws, 'report.d/a')).created).toBe(true);
  });

  it('holds for a rename, a version restored and a trash item restored', async () => {
    await put(files, ws, 'r/a.txt', 'a');
    await expect(files.rename(ws, 'r/a.txt', 'jobs', null)).rejects.toThrow(/jobs is a folder/);
    await expect(files.rename(ws, 'r/a.txt', 'report/a.txt', null)).rejects.toThrow(/report is a file/);
    expect(await paths('r/')).toEqual(['r/a.txt']);
    // A file deleted, then a folder made at its name: its restore (or an old version's) is refused.
    await put(files, ws, 'gone', 'one');
    await put(files, ws, 'gone', 'two');
    const [, old] = (await files.versions(ws, 'gone', 10)).items;
    await files.remove(ws, 'gone', null);
    await put(files, ws, 'gone/now-a-folder.txt');
    const item = (await files.trash(ws, 100, undefined)).items.find((t) => t.path === 'gone')!;
    await expect(files.restoreTrash(ws, item.id, null)).rejects.toThrow(/gone is a folder/);
    await expect(files.restoreVersion(ws, 'gone', old!.version_id, null)).rejects.toThrow(/gone is a folder/);
    expect(await paths('gone')).toEqual(['gone/now-a-folder.txt']);
  });

  it('holds when a file and a folder of one name are written at the same time: one of the two, every time', async () => {
    for (let round = 0; round < 20; round++) {
      await fileAndFolderAtOnce(files, ws, `race${round}`);
    }
  });
});

/**
 * A path of 1,024 bytes can name 512 segments; a lock for each folder it lies in took 511 entries
 * of the server's lock table, which every transaction of the platform shares (the embedded
 * server's: 64 × its 40 connections). A few such writes at once ended other transactions with
 * "out of shared memory" (decision 0246).
 */
describe(`deep paths (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  let ws: string;
  beforeAll(async () => {
    fixture = await createTestFiles('tree-deep');
    ({ files } = fixture);
    ws = await fixture.newWorkspace('deep');
  });
  afterAll(async () => {
    await fixture.close();
  });
  const deep = (depth: number, leaf: string) => [...Array.from({ length: depth - 1 }, () => 'd'), leaf].join('/');

  it('a write of the deepest path holds a bounded number of locks', async () => {
    const path = deep(512, 'e');
    expect(Buffer.byteLength(path)).toBe(1023);
    const db = fixture.t.database.db;
    const { exclusive } = treeLocks(ws, path);
    // Another transaction holds the write's last lock: the write waits there, holding the others.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${exclusive}, 0))`.execute(trx);
      locked();
      await held;
    });
    await isLocked;
    const writing = put(files, ws, path, 'deep');
    let count = 0;
    for (let i = 0; i < 200 && count === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
      const { rows } = await sql<{ n: string }>`
        SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND a.wait_event_type = 'Lock' AND a.datname = current_database()`.execute(db);
      count = Number(rows[0]!.n);
    }
    release();
    await holder;
    expect((await writing).created).toBe(true);
    // Twenty of them at once, beside writes of other paths: all stored.
    const all = await Promise.all(Array.from({ length: 20 }, (_, i) => put(files, ws, deep(500, `f${i}`), String(i))));
    expect(all.every((r) => r.created)).toBe(true);
  });

  it('a file and a folder of one name deeper than the locked depth: one of the two, every time', async () => {
    for (let round = 0; round < 10; round++) {
      await fileAndFolderAtOnce(files, ws, deep(TREE_LOCK_DEPTH + 5, `race${round}`));
    }
    // And a file above the locked depth with a folder below it.
    const top = deep(TREE_LOCK_DEPTH, 'top');
    const results = await Promise.allSettled([put(files, ws, top), put(files, ws, `${top}/${deep(40, 'below')}`)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  });
});
