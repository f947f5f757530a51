import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError, NotFoundError } from '@codeagent/service-kit';
import { FOLDER_COUNT_LIMIT, folderPageQuery, prefixEnd, type WorkspaceFiles } from './files.js';
import { createTestFiles, tableRead, type TestFiles } from './testing.js';

/** The folder view and renames of WorkspaceFiles, which the WebDAV tree is built on. */
describe(`workspace files as a tree (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let files: WorkspaceFiles;
  let fixture: TestFiles;
  let ws: string;
  beforeAll(async () => {
    fixture = await createTestFiles('files-tree');
    ({ files } = fixture);
  });
  afterAll(async () => {
    await fixture.close();
  });
  beforeEach(async () => {
    ws = await fixture.newWorkspace('tree');
  });

  const write = (path: string, content: string) => files.put(ws, path, Readable.from([Buffer.from(content)]), { actor: null });
  const read = async (path: string) => (await files.readAll(ws, path)).toString();

  it('lists what lies directly in a folder: objects and sub-folders, by name', async () => {
    for (const p of ['a.txt', 'd/b.txt', 'd/e/c.txt', 'd/e/f/g.txt', 'de.txt', 'z/1']) await write(p, p);
    const root = await files.listFolder(ws, '', 100);
    expect(root.objects.map((o) => o.path)).toEqual(['a.txt', 'de.txt']);
    expect(root.folders.map((f) => f.name)).toEqual(['d', 'z']);
    const d = await files.listFolder(ws, 'd/', 100);
    expect(d.objects.map((o) => o.path)).toEqual(['d/b.txt']);
    expect(d.folders.map((f) => f.name)).toEqual(['e']);
    expect(await files.kindOf(ws, 'd')).toBe('folder');
    expect(await files.kindOf(ws, 'd/b.txt')).toBe('object');
    expect(await files.kindOf(ws, 'de')).toBeUndefined();
    expect(await files.pathsAt(ws, 'd/e')).toEqual(['d/e/c.txt', 'd/e/f/g.txt']);
    expect(await files.objectAncestor(ws, 'a.txt/x/y')).toBe('a.txt');
    expect(await files.objectAncestor(ws, 'd/x')).toBeUndefined();
  });

  it('gives each folder of a listing the time of the newest object anywhere below it', async () => {
    await write('old/x', 'x');
    await write('d/a', 'a');
    await new Promise((r) => setTimeout(r, 20));
    const deep = await write('d/e/f/g', 'g');
    await write('d0', 'beside');
    const root = await files.listFolder(ws, '', 100);
    const times = Object.fromEntries(root.folders.map((f) => [f.name, f.updated_at]));
    expect(times).toEqual({ d: deep.object.updated_at, old: (await files.stat(ws, 'old/x')).updated_at });
    expect(times.d! > times.old!).toBe(true);
    expect((await files.listFolder(ws, 'd/', 100)).folders).toEqual([{ name: 'e', updated_at: deep.object.updated_at }]);
  });

  it("finds a folder's objects as one range of names, whatever lies beside it, in the same order on every server", async () => {
    // Just below `d/` ('.', '-', '!' sort before '/'), just above (`d0`), a longer sibling (`dd/`),
    // the last code point before and after a folder name's end, upper case before lower (bytes).
    const paths = ['d!x', 'd-x/y', 'd.txt', 'd/a', 'd/z/deep', 'd0', 'dd/x', 'D/up', 'é/in', 'ê/out', 'x\u{1F600}/a', 'x\u{1F601}/b'];
    for (const p of paths) await write(p, p);
    expect((await files.listFolder(ws, 'd/', 100)).objects.map((o) => o.path)).toEqual(['d/a']);
    expect((await files.listFolder(ws, 'd/', 100)).folders.map((f) => f.name)).toEqual(['z']);
    expect(await files.pathsAt(ws, 'd')).toEqual(['d/a', 'd/z/deep']);
    expect(await files.kindOf(ws, 'd')).toBe('folder');
    expect(await files.kindOf(ws, 'd.txt')).toBe('object');
    expect(await files.kindOf(ws, 'd-x')).toBe('folder');
    expect(await files.kindOf(ws, 'd!')).toBeUndefined();
    expect(await files.kindOf(ws, 'é')).toBe('folder');
    expect(await files.kindOf(ws, 'x\u{1F600}')).toBe('folder');
    expect((await files.list(ws, 'x\u{1F600}', 100, undefined)).items.map((o) => o.path)).toEqual(['x\u{1F600}/a']);
    expect((await files.list(ws, 'd', 100, undefined)).items.map((o) => o.path)).toEqual(['d!x', 'd-x/y', 'd.txt', 'd/a', 'd/z/deep', 'd0', 'dd/x']);
    // By code point (migration 011), not by the database's locale: `D` before `d`, `é` before `ê`.
    const all = (await files.list(ws, '', 100, undefined)).items.map((o) => o.path);
    expect(all).toEqual([...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
    const { rows } = await sql<{
      collation_name: string;
    }>`SELECT collation_name FROM information_schema.columns WHERE table_name = 'objects' AND column_name = 'path'`.execute(fixture.t.database.db);
    expect(rows).toEqual([{ collation_name: 'C' }]);
  });

  /** Every page of a listing by folder, `limit` entries at a time: its entries' keys in order, and the folders' counts. */
  const byFolder = async (prefix: string, limit: number) => {
    const keys: string[] = [];
    const counts: Record<string, number | string> = {};
    let cursor: string | undefined;
    for (let pages = 0; pages < 1000; pages++) {
      const page = await files.listByFolder(ws, prefix, limit, cursor);
      expect(page.items.length + page.folders.length).toBeLessThanOrEqual(limit);
      const entries = [...page.items.map((o) => o.path), ...page.folders.map((f) => f.path)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      keys.push(...entries);
      for (const f of page.folders) counts[f.path] = f.object_count_capped ? `${f.object_count}+` : f.object_count;
      if (page.next_cursor === null) return { keys, counts };
      cursor = page.next_cursor;
    }
    throw new Error('the listing did not end');
  };

  it('lists by folder: the objects directly under a prefix and one entry per sub-folder with its count, in pages of any size', async () => {
    const paths = ['a.txt', 'd!x', 'd-x/y', 'd.txt', 'd/a', 'd/b/c', 'd/b/d/e', 'd/z/deep', 'd0', 'dd/x', 'D/up', 'é/in', 'x\u{1F600}/a', 'x\u{1F600}/b', 'z'];
    for (const p of paths) await write(p, p);
    const root = ['D/', 'a.txt', 'd!x', 'd-x/', 'd.txt', 'd/', 'd0', 'dd/', 'x\u{1F600}/', 'z', 'é/'];
    for (const limit of [1, 2, 3, 100]) {
      const { keys, counts } = await byFolder('', limit);
      expect(keys, `pages of ${limit}`).toEqual(root);
      expect(counts).toEqual({ 'D/': 1, 'd-x/': 1, 'd/': 4, 'dd/': 1, 'x\u{1F600}/': 2, 'é/': 1 });
    }
    expect((await byFolder('d/', 1)).keys).toEqual(['d/a', 'd/b/', 'd/z/']);
    expect((await byFolder('d/', 2)).counts).toEqual({ 'd/b/': 2, 'd/z/': 1 });
    expect((await byFolder('d/b/', 5)).keys).toEqual(['d/b/c', 'd/b/d/']);
    // A prefix that is not a whole folder name, as S3 takes it: the entries start with it.
    expect((await byFolder('d', 2)).keys).toEqual(['d!x', 'd-x/', 'd.txt', 'd/', 'd0', 'dd/']);
    expect((await byFolder('x\u{1F600}/', 1)).keys).toEqual(['x\u{1F600}/a', 'x\u{1F600}/b']);
    expect((await byFolder('nothing/', 10)).keys).toEqual([]);
    // The objects come as the plain listing gives them.
    const page = await files.listByFolder(ws, 'd/', 10, undefined);
    expect(page.items).toEqual((await files.list(ws, 'd/a', 10, undefined)).items);
    await expect(files.listByFolder(ws, '../', 10, undefined)).rejects.toThrow();
    await expect(files.listByFolder(ws, '', 10, 'not a cursor')).rejects.toThrow(/cursor/);
  });

  it('counts the objects of a folder up to its limit, and the next page starts past the folder', async () => {
    await write('big/first', 'x');
    await write('small/one', 'x');
    // More objects than a count goes to, written as rows (the count reads no content).
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
      SELECT ${ws}, 'big/' || lpad(i::text, 6, '0'), gen_random_uuid(), 1, 'x', 'text/plain'
      FROM generate_series(1, ${FOLDER_COUNT_LIMIT + 5}) i`.execute(fixture.t.database.db);
    const { counts } = await byFolder('', 1);
    expect(counts).toEqual({ 'big/': `${FOLDER_COUNT_LIMIT}+`, 'small/': 1 });
    const page = await files.listByFolder(ws, '', 1, undefined);
    expect(page.folders.map((f) => f.path)).toEqual(['big/']);
    const next = await files.listByFolder(ws, '', 1, page.next_cursor!);
    expect(next.folders).toEqual([{ path: 'small/', object_count: 1, object_count_capped: false }]);
    expect(next.next_cursor).toBeNull();
  });

  it('reads for a page its entries and the counts, never the rest of the folders beside them (rows in the plan)', async () => {
    for (const p of ['a.txt', 'small/1', 'small/2/3', 'z.txt']) await write(p, p);
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
      SELECT ${ws}, 'big/' || lpad(i::text, 6, '0'), gen_random_uuid(), 1, 'x', 'text/plain'
      FROM generate_series(1, ${FOLDER_COUNT_LIMIT * 5}) i`.execute(fixture.t.database.db);
    /** Rows the statement read from `objects`: every scan of it, what it kept and what its filter dropped, times its loops. */
    const rowsRead = async (prefix: string, limit: number, after?: string) =>
      (await tableRead(fixture.t.database.db, folderPageQuery(ws, prefix, limit, after))).rows;
    // The root: four entries; the big folder is read only to count it, up to the limit.
    const root = await rowsRead('', 100);
    expect(root).toBeGreaterThan(FOLDER_COUNT_LIMIT);
    expect(root).toBeLessThan(FOLDER_COUNT_LIMIT + 50);
    // After the big folder, nothing of it is read again.
    expect(await rowsRead('', 100, 'big/')).toBeLessThan(50);
    expect(await rowsRead('small/', 1)).toBeLessThan(20);
  });

  it('treats LIKE wildcards and non-ASCII names in folder names literally', async () => {
    for (const p of ['100%/a', '100x/b', 'été/c', 'a_b/d', 'aXb/e']) await write(p, p);
    expect((await files.listFolder(ws, '100%/', 100)).objects.map((o) => o.path)).toEqual(['100%/a']);
    expect((await files.listFolder(ws, 'été/', 100)).objects.map((o) => o.path)).toEqual(['été/c']);
    expect(await files.pathsAt(ws, 'a_b')).toEqual(['a_b/d']);
  });

  it('renames with the versions; a rename over an object keeps its content as a version', async () => {
    await write('a.txt', 'a1');
    await write('a.txt', 'a2');
    await write('b.txt', 'b1');
    const { created } = await files.rename(ws, 'a.txt', 'b.txt', null);
    expect(created).toBe(false);
    await expect(files.stat(ws, 'a.txt')).rejects.toBeInstanceOf(NotFoundError);
    expect(await read('b.txt')).toBe('a2');
    const versions = (await files.versions(ws, 'b.txt')).items;
    expect(versions).toHaveLength(3);
    const contents = await Promise.all(versions.map(async (v) => (await files.openVersion(ws, 'b.txt', v.version_id)).body.toArray()));
    expect(contents.map((c) => Buffer.concat(c).toString()).sort()).toEqual(['a1', 'a2', 'b1']);
    await expect(files.rename(ws, 'missing', 'x', null)).rejects.toBeInstanceOf(NotFoundError);
    await expect(files.rename(ws, 'b.txt', 'b.txt', null)).rejects.toBeInstanceOf(ConflictError);
  });

  it('keeps every save when editors save at once by writing a temporary file and renaming it over the original', async () => {
    await write('nb.ipynb', 'v0');
    const saves = 8;
    await Promise.all(
      Array.from({ length: saves }, async (_, i) => {
        await write(`.~nb-${i}.ipynb`, `v${i + 1}`);
        await files.rename(ws, `.~nb-${i}.ipynb`, 'nb.ipynb', null);
      }),
    );
    const versions = (await files.versions(ws, 'nb.ipynb')).items;
    expect(versions).toHaveLength(saves + 1);
    const contents = await Promise.all(
      versions.map(async (v) => Buffer.concat(await (await files.openVersion(ws, 'nb.ipynb', v.version_id)).body.toArray()).toString()),
    );
    expect(contents.sort()).toEqual(Array.from({ length: saves + 1 }, (_, i) => `v${i}`).sort());
    expect((await files.listFolder(ws, '', 100)).objects.map((o) => o.path)).toEqual(['nb.ipynb']);
  });

  it('serialises a rename with a save of the same target: both contents survive', async () => {
    for (let round = 0; round < 5; round++) {
      await write(`src-${round}`, `renamed-${round}`);
      await Promise.all([files.rename(ws, `src-${round}`, 'target', null), write('target', `saved-${round}`)]);
    }
    const versions = (await files.versions(ws, 'target')).items;
    expect(versions).toHaveLength(10);
    const contents = await Promise.all(
      versions.map(async (v) => Buffer.concat(await (await files.openVersion(ws, 'target', v.version_id)).body.toArray()).toString()),
    );
    expect(contents.sort()).toEqual(
      Array.from({ length: 5 }, (_, r) => [`renamed-${r}`, `saved-${r}`])
        .flat()
        .sort(),
    );
  });
});

describe('prefixEnd', () => {
  it('raises the last code point by one (a surrogate pair is one), skipping the surrogates, past the highest one', () => {
    expect(prefixEnd('d/')).toBe('d0');
    expect(prefixEnd('a')).toBe('b');
    expect(prefixEnd('x\u{1F600}')).toBe('x\u{1F601}');
    expect(prefixEnd('x\u{D7FF}')).toBe('x\u{E000}');
    expect(prefixEnd('é/')).toBe('é0');
    expect(prefixEnd('a\u{10FFFF}')).toBe('b');
    expect(prefixEnd('\u{10FFFF}\u{10FFFF}')).toBeUndefined();
  });
});
