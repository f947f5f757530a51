import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { versionPageQuery, type WorkspaceFiles } from './files.js';
import { createTestFiles, tableRead, type TestFiles } from './testing.js';

const put = (files: WorkspaceFiles, ws: string, path: string, body: string) => files.put(ws, path, Readable.from([Buffer.from(body)]), { actor: null });

/**
 * The versions of a path in pages (decision 0208): every save keeps one, so a path can hold any
 * number, and the list once answered them all at once (a member saving in a loop made every look
 * at the file's history, and every download of one version, read all of them).
 */
describe(`the versions of a path, in pages (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  let ws: string;
  /** Every version of doc.txt, newest first, as one list gives them. */
  let all: { version_id: string; current: boolean }[];
  beforeAll(async () => {
    fixture = await createTestFiles('versions');
    ({ files } = fixture);
    ws = await fixture.newWorkspace('versions');
    // Three saves through the storage layer (two kept versions with their content)...
    for (const body of ['one', 'two', 'three']) await put(files, ws, 'doc.txt', body);
    // ...and 250 kept versions as rows, replaced in pairs within the same millisecond (the key's
    // later fields order them), plus 20 000 of another path and 20 000 of 500 others.
    await sql`INSERT INTO object_versions (id, workspace_id, path, size, sha256, content_type, created_at, replaced_at)
      SELECT gen_random_uuid(), ${ws}, 'doc.txt', 1, 'x', 'text/plain', timestamp '2026-01-01' + i * interval '1 ms',
        timestamp '2026-01-01' + (i / 2) * interval '1 s'
      FROM generate_series(1, 250) i`.execute(fixture.t.database.db);
    await sql`INSERT INTO object_versions (id, workspace_id, path, size, sha256, content_type, created_at, replaced_at)
      SELECT gen_random_uuid(), ${ws}, 'busy.txt', 1, 'x', 'text/plain', now(), now() - i * interval '1 ms'
      FROM generate_series(1, 20000) i`.execute(fixture.t.database.db);
    // (Replaced after all of them: the newest versions of the workspace are another path's.)
    await sql`INSERT INTO object_versions (id, workspace_id, path, size, sha256, content_type, created_at, replaced_at)
      SELECT gen_random_uuid(), ${ws}, 'other/' || (i % 500) || '.txt', 1, 'x', 'text/plain', now(), now() + i * interval '1 ms'
      FROM generate_series(1, 20000) i`.execute(fixture.t.database.db);
    await sql`ANALYZE object_versions`.execute(fixture.t.database.db);
    all = (await files.versions(ws, 'doc.txt', 1000)).items;
  });
  afterAll(async () => {
    await fixture.close();
  });

  it('answers the current content first, then the kept versions newest first, each once in pages of any size', async () => {
    expect(all).toHaveLength(253);
    expect(all[0]!.current).toBe(true);
    expect(all.slice(1).every((v) => !v.current)).toBe(true);
    // The two kept by the saves were replaced last: they come right after the current content.
    const kept = await Promise.all(
      all.slice(1, 3).map(async (v) => Buffer.concat(await (await files.openVersion(ws, 'doc.txt', v.version_id)).body.toArray()).toString()),
    );
    expect(kept).toEqual(['two', 'one']);
    for (const limit of [1, 2, 7, 100]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let n = 0; n < 300; n++) {
        const page = await files.versions(ws, 'doc.txt', limit, cursor);
        expect(page.items.length).toBeLessThanOrEqual(limit);
        seen.push(...page.items.map((v) => v.version_id));
        if (page.next_cursor === null) break;
        cursor = page.next_cursor;
      }
      expect(seen, `pages of ${limit}`).toEqual(all.map((v) => v.version_id));
    }
  });

  it('reads a page of kept versions from their index, whatever number the path keeps', async () => {
    const read = await tableRead(fixture.t.database.db, versionPageQuery(fixture.t.database.db, ws, 'busy.txt', 101, undefined, undefined), 'object_versions');
    expect(read.indexes).toEqual(['object_versions_page']);
    expect(read.rows).toBeLessThanOrEqual(101);
    const middle = (await files.versions(ws, 'busy.txt', 100, (await files.versions(ws, 'busy.txt', 100)).next_cursor!)).items[99]!;
    const row = await fixture.t.database.db.selectFrom('object_versions').selectAll().where('id', '=', middle.version_id).executeTakeFirstOrThrow();
    const after = [row.replaced_at, row.created_at, row.id] as const;
    const deeper = await tableRead(fixture.t.database.db, versionPageQuery(fixture.t.database.db, ws, 'busy.txt', 101, after, undefined), 'object_versions');
    expect(deeper.rows).toBeLessThanOrEqual(101);
  });

  it('opens one version without listing the others; refuses what is not a version of the path', async () => {
    const current = all[0]!;
    expect(Buffer.concat(await (await files.openVersion(ws, 'doc.txt', current.version_id)).body.toArray()).toString()).toBe('three');
    await expect(files.openVersion(ws, 'busy.txt', all[1]!.version_id)).rejects.toThrow(/not found/);
    await expect(files.openVersion(ws, 'doc.txt', 'not-a-uuid')).rejects.toThrow(/not found/);
  });

  it('refuses a cursor it did not make; a path with neither content nor versions is 404', async () => {
    await expect(files.versions(ws, 'doc.txt', 10, 'bm90LWEtY3Vyc29y')).rejects.toThrow(/cursor/);
    await expect(files.versions(ws, 'nothing.txt', 10)).rejects.toThrow(/no object or version/);
    // Kept versions without current content (the file was deleted): listed all the same.
    expect((await files.versions(ws, 'busy.txt', 3)).items.map((v) => v.current)).toEqual([false, false, false]);
  });
});
