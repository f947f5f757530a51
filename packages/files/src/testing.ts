import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { LocalObjectStore } from '@codeagent/storage';
import { WorkspaceFiles } from './files.js';

/** What a database test of workspace files works on: its own database and object store. */
export interface TestFiles {
  t: TestDatabase;
  store: LocalObjectStore;
  files: WorkspaceFiles;
  /** Inserts a workspace row directly (no API, no members) and returns its id. */
  newWorkspace(name: string): Promise<string>;
  /** Drops the test database. */
  close(): Promise<void>;
}

/**
 * A fresh, migrated test database (see `createTestDatabase`), a local object store in a new
 * temporary directory named after `name`, and WorkspaceFiles on the two.
 */
export async function createTestFiles(name: string): Promise<TestFiles> {
  const t = await createTestDatabase();
  const store = new LocalObjectStore(mkdtempSync(join(tmpdir(), `codeagent-${name}-`)));
  await store.init();
  return {
    t,
    store,
    files: new WorkspaceFiles(t.database.db, store),
    newWorkspace: async (ws) => (await t.database.db.insertInto('workspaces').values({ name: ws }).returning('id').executeTakeFirstOrThrow()).id,
    close: () => t.drop(),
  };
}
