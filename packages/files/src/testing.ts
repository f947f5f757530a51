import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql, type Expression, type Kysely } from 'kysely';
import { createTestDatabase, type DB, type TestDatabase } from '@codeagent/db';
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

interface PlanNode {
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/**
 * How a statement read a table (`objects` unless `table` says another) when run (`EXPLAIN ANALYZE`): the index of each scan of
 * it (undefined: the table itself), and the rows all its scans read — what each kept and what its
 * filter dropped, times its loops. What tests of a statement's cost assert on.
 */
export async function tableRead(db: Kysely<DB>, statement: Expression<unknown>, table = 'objects'): Promise<{ indexes: (string | undefined)[]; rows: number }> {
  const { rows } = await sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`.execute(db);
  const scans: PlanNode[] = [];
  const walk = (n: PlanNode): void => {
    if (n['Relation Name'] === table) scans.push(n);
    for (const c of n.Plans ?? []) walk(c);
  };
  walk(rows[0]!['QUERY PLAN'][0].Plan);
  return {
    indexes: scans.map((n) => n['Index Name']),
    rows: scans.reduce((a, n) => a + (n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0)) * n['Actual Loops'], 0),
  };
}
