import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { MAX_NOTEBOOK_BYTES } from '@codeagent/runs';
import { createTestFiles, type TestFiles } from '@codeagent/files/testing';
import { platformRunIO } from './server.js';
import { InvalidNotebookError } from './notebook.js';

/** The worker never reads a notebook too large to run (decision 0230), whatever the API let through before. */
describe(`the worker's notebook size limit (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let fixture: TestFiles;
  beforeAll(async () => {
    fixture = await createTestFiles('notebook-size');
  });
  afterAll(async () => {
    await fixture.close();
  });

  it('reads a notebook up to the limit, and refuses one over it by its size before reading it', async () => {
    const ws = await fixture.newWorkspace('notebook-size');
    const notebook = JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
    await fixture.files.put(ws, 'nb.ipynb', Readable.from([Buffer.from(notebook)]), { actor: null });
    const io = platformRunIO(fixture.files, 'http://127.0.0.1:9', 'unused');
    expect((await io.readNotebook(ws, 'nb.ipynb')).toString()).toBe(notebook);
    // The notebook grown past the limit after its run was queued (the size as stored says so;
    // the content stays small, so a read of it would pass: only the size check refuses).
    await sql`UPDATE objects SET size = ${MAX_NOTEBOOK_BYTES + 1} WHERE workspace_id = ${ws} AND path = 'nb.ipynb'`.execute(fixture.t.database.db);
    const refused = io.readNotebook(ws, 'nb.ipynb');
    await expect(refused).rejects.toBeInstanceOf(InvalidNotebookError);
    await expect(refused).rejects.toThrow(/more than the 64 MiB a run takes: clear its outputs/);
  });
});
