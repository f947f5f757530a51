import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectPageQuery, type WorkspaceFiles } from './files.js';
import { createTestFiles, tableRead, type TestFiles } from './testing.js';

/** The notebooks of a workspace (`kind=notebook`, decision 0203): what the run and schedule forms offer. */
describe(`a workspace's notebooks (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  let files: WorkspaceFiles;
  let ws: string;
  beforeAll(async () => {
    fixture = await createTestFiles('notebooks');
    ({ files } = fixture);
    ws = await fixture.newWorkspace('notebooks');
    for (const p of ['a.ipynb', 'data/x.csv', 'jobs/daily.ipynb', 'jobs/daily.runs/0b6f.ipynb', 'jobs/notes.ipynb.txt', 'z/deep/er.ipynb', 'x.runs.ipynb']) {
      await files.put(ws, p, Readable.from([Buffer.from('{}')]), { actor: null });
    }
    // Files that sort before the notebooks: the run form once read the first 1 000 objects and
    // found no notebook among them.
    await sql`INSERT INTO objects (workspace_id, path, version_id, size, sha256, content_type)
      SELECT ${ws}, 'b/' || lpad(i::text, 6, '0') || '.csv', gen_random_uuid(), 1, 'x', 'text/csv'
      FROM generate_series(1, 5000) i`.execute(fixture.t.database.db);
    await sql`ANALYZE objects`.execute(fixture.t.database.db);
  });
  afterAll(async () => {
    await fixture.close();
  });

  it('lists the notebooks anywhere under the prefix, not the executed copies of runs, in pages', async () => {
    const all = await files.list(ws, '', 100, undefined, { notebooks: true });
    expect(all.items.map((o) => o.path)).toEqual(['a.ipynb', 'jobs/daily.ipynb', 'x.runs.ipynb', 'z/deep/er.ipynb']);
    expect((await files.list(ws, 'jobs/', 100, undefined, { notebooks: true })).items.map((o) => o.path)).toEqual(['jobs/daily.ipynb']);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < 10; n++) {
      const page = await files.list(ws, '', 1, cursor, { notebooks: true });
      seen.push(...page.items.map((o) => o.path));
      if (page.next_cursor === null) break;
      cursor = page.next_cursor;
    }
    expect(seen).toEqual(all.items.map((o) => o.path));
    // Without it, every object, as before.
    expect((await files.list(ws, 'jobs/', 100, undefined)).items).toHaveLength(3);
  });

  it('reads the notebooks from their index, not the other files of the workspace', async () => {
    const read = await tableRead(fixture.t.database.db, objectPageQuery(fixture.t.database.db, ws, '', 100, undefined, true));
    expect(read.indexes).toEqual(['objects_notebooks']);
    expect(read.rows).toBeLessThan(10);
  });
});
