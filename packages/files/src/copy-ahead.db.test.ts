import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@codeagent/db';
import { LocalObjectStore, type Area } from '@codeagent/storage';
import { WorkspaceFiles } from './files.js';

/** A local store whose next copy can be held (as a large copy on S3 takes seconds) or followed by a step of the test. */
class HeldStore extends LocalObjectStore {
  copies: string[] = [];
  private next: { held: Promise<void>; reached: () => void; after?: (() => Promise<void>) | undefined } | undefined;

  /** Holds the next copy until `release`; `reached` resolves when it is held. */
  holdNext(): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const isReached = new Promise<void>((r) => (reached = r));
    this.next = { held: new Promise((r) => (release = r)), reached };
    return { reached: isReached, release };
  }

  /** Runs `step` right after the next copy. */
  afterNext(step: () => Promise<void>): void {
    this.next = { held: Promise.resolve(), reached: () => undefined, after: step };
  }

  override async copy(fromArea: Area, fromKey: string, toArea: Area, toKey: string): Promise<void> {
    this.copies.push(`${fromArea}->${toArea}`);
    const next = this.next;
    this.next = undefined;
    next?.reached();
    await next?.held;
    await super.copy(fromArea, fromKey, toArea, toKey);
    await next?.after?.();
  }
}

const body = (s: string) => Readable.from([Buffer.from(s)]);

/**
 * Decision 0235: content is copied between the storage areas before the transaction that
 * records it. A copy on S3 takes seconds for a large object; inside the transaction it held a
 * pool connection, the object's row lock and the tree's locks for as long, so a member replacing
 * or restoring large files in parallel could take every connection of the backend.
 */
describe(`copies between the storage areas happen outside transactions (${process.env.CODEAGENT_TEST_DB ?? 'postgres'})`, () => {
  let t: TestDatabase;
  let store: HeldStore;
  let files: WorkspaceFiles;
  let ws: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    store = new HeldStore(mkdtempSync(join(tmpdir(), 'codeagent-copy-ahead-')));
    await store.init();
    files = new WorkspaceFiles(t.database.db, store);
    ws = (await t.database.db.insertInto('workspaces').values({ name: 'copy-ahead' }).returning('id').executeTakeFirstOrThrow()).id;
  });
  afterAll(async () => {
    await t.drop();
  });

  const text = async (path: string) => (await files.readAll(ws, path)).toString();
  const versionTexts = async (path: string) => {
    const out: string[] = [];
    for (const v of (await files.versions(ws, path, 100)).items) {
      const { body: b } = await files.openVersion(ws, path, v.version_id);
      const chunks: Buffer[] = [];
      for await (const c of b) chunks.push(c as Buffer);
      out.push(Buffer.concat(chunks).toString());
    }
    return out;
  };
  /** Transactions open in the test's database now (the pool's idle connections hold none). */
  const openTransactions = async () =>
    Number(
      (
        await sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`.execute(t.database.db)
      ).rows[0]!.n,
    );
  /** Whether the object's row can be locked at once (no transaction holds it). */
  const rowFree = async (path: string) =>
    t.database.db.transaction().execute(async (trx) => {
      await sql`SET LOCAL lock_timeout = '100ms'`.execute(trx);
      return trx
        .selectFrom('objects')
        .select('path')
        .where('workspace_id', '=', ws)
        .where('path', '=', path)
        .forUpdate()
        .execute()
        .then(
          () => true,
          () => false,
        );
    });

  /** Starts `op` with its first copy held; checks that nothing is locked meanwhile; lets it finish. */
  const heldCopy = async <T>(path: string, op: () => Promise<T>): Promise<T> => {
    const gate = store.holdNext();
    const done = op();
    await gate.reached;
    expect(await openTransactions()).toBe(0);
    expect(await rowFree(path)).toBe(true);
    gate.release();
    return done;
  };

  it('replaces, moves onto, deletes and restores with every copy outside a transaction', async () => {
    await files.put(ws, 'a.txt', body('one'), { actor: null });
    // A replace: the old content is copied to the version area first.
    await heldCopy('a.txt', () => files.put(ws, 'a.txt', body('two'), { actor: null }));
    expect(await text('a.txt')).toBe('two');
    expect(await versionTexts('a.txt')).toEqual(['two', 'one']);

    // A move onto an existing file: the file replaced becomes a version.
    await files.put(ws, 'b.txt', body('bee'), { actor: null });
    await heldCopy('a.txt', () => files.rename(ws, 'b.txt', 'a.txt', null));
    expect(await text('a.txt')).toBe('bee');
    expect(await versionTexts('a.txt')).toEqual(['bee', 'two', 'one']);

    // Restoring a version: both copies (the version back, the current content kept) come first.
    const one = (await files.versions(ws, 'a.txt', 100)).items.at(-1)!;
    store.copies = [];
    await heldCopy('a.txt', () => files.restoreVersion(ws, 'a.txt', one.version_id, null));
    expect(store.copies).toEqual(['version->workspace', 'workspace->version']);
    expect(await text('a.txt')).toBe('one');

    // Deleting: the content goes to the trash first; restoring it: back first.
    await heldCopy('a.txt', () => files.remove(ws, 'a.txt', null));
    const [item] = (await files.trash(ws, 10, undefined)).items;
    await heldCopy('a.txt', () => files.restoreTrash(ws, item!.id, null));
    expect(await text('a.txt')).toBe('one');
  });

  it('a replace whose transaction fails removes the copy it made ahead; the content stays whole', async () => {
    const quota = new WorkspaceFiles(t.database.db, store, undefined, { quotaBytes: 1_000 });
    const space = (await t.database.db.insertInto('workspaces').values({ name: 'quota' }).returning('id').executeTakeFirstOrThrow()).id;
    await quota.put(space, 'big.txt', body('x'.repeat(400)), { actor: null });
    const before = (await quota.stat(space, 'big.txt')).version_id;
    // While the replace copies ahead, another upload takes the room it counted on.
    const gate = store.holdNext();
    const replace = quota.put(space, 'big.txt', body('y'.repeat(400)), { actor: null });
    await gate.reached;
    await quota.put(space, 'other.txt', body('z'.repeat(300)), { actor: null });
    gate.release();
    await expect(replace).rejects.toThrow(/WORKSPACE_QUOTA_BYTES/);
    expect((await quota.stat(space, 'big.txt')).version_id).toBe(before);
    expect((await quota.readAll(space, 'big.txt')).toString()).toBe('x'.repeat(400));
    expect(await store.head('version', `${space}/${before}`)).toBeUndefined();
    // The next replace keeps it as a version all the same.
    await quota.put(space, 'big.txt', body('w'), { actor: null });
    const { body: kept } = await quota.openVersion(space, 'big.txt', before);
    const chunks: Buffer[] = [];
    for await (const c of kept) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('x'.repeat(400));
  });

  it('a copy made ahead of content another write replaced meanwhile is not taken: each write keeps what it replaced', async () => {
    await files.put(ws, 'race.txt', body('v0'), { actor: null });
    const gate = store.holdNext();
    const slow = files.put(ws, 'race.txt', body('slow'), { actor: null });
    await gate.reached;
    // Another save replaces v0 while the first one still copies it.
    await files.put(ws, 'race.txt', body('fast'), { actor: null });
    gate.release();
    await slow;
    expect(await text('race.txt')).toBe('slow');
    expect(await versionTexts('race.txt')).toEqual(['slow', 'fast', 'v0']);
  });

  it('a delete whose object changed during its copy to the trash keeps the new content, under a key of its own', async () => {
    await files.put(ws, 'del.txt', body('old'), { actor: null });
    // Right after the old content is copied to the trash, a save replaces it.
    store.afterNext(async () => void (await files.put(ws, 'del.txt', body('new'), { actor: null })));
    await files.remove(ws, 'del.txt', null);
    const item = (await files.trash(ws, 100, undefined)).items.find((i) => i.path === 'del.txt')!;
    await files.restoreTrash(ws, item.id, null);
    expect(await text('del.txt')).toBe('new');
    // Nothing left in the trash area but the items' own content.
    const items = (await files.trash(ws, 100, undefined)).items.map((i) => `${ws}/${i.id}`).sort();
    expect((await store.list('trash', `${ws}/`, { limit: 1000 })).items.map((o) => o.key).sort()).toEqual(items);
  });

  it('a write whose commit succeeded but whose answer was lost keeps its content (the file is that content now)', async () => {
    // The database as a dropped connection leaves it: the transaction commits, the caller gets an error.
    const db = t.database.db;
    const lost = new Proxy(db, {
      get(target, prop) {
        if (prop !== 'transaction') {
          // (Bound to the real instance: Kysely keeps its state in private fields.)
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        }
        return () => ({
          execute: async <T>(work: Parameters<ReturnType<typeof db.transaction>['execute']>[0]) => {
            await db.transaction().execute(work);
            throw new Error('Connection terminated unexpectedly');
            return undefined as T;
          },
        });
      },
    });
    const flaky = new WorkspaceFiles(lost, store);
    await expect(flaky.put(ws, 'lost.txt', body('saved'), { actor: null })).rejects.toThrow(/Connection terminated/);
    expect(await text('lost.txt')).toBe('saved');
    await expect(flaky.put(ws, 'lost.txt', body('again'), { actor: null })).rejects.toThrow(/Connection terminated/);
    expect(await text('lost.txt')).toBe('again');
    expect(await versionTexts('lost.txt')).toEqual(['again', 'saved']);
    await expect(flaky.remove(ws, 'lost.txt', null)).rejects.toThrow(/Connection terminated/);
    const item = (await files.trash(ws, 100, undefined)).items.find((i) => i.path === 'lost.txt')!;
    await expect(flaky.restoreTrash(ws, item.id, null)).rejects.toThrow(/Connection terminated/);
    expect(await text('lost.txt')).toBe('again');
    const saved = (await files.versions(ws, 'lost.txt', 100)).items.at(-1)!;
    await expect(flaky.restoreVersion(ws, 'lost.txt', saved.version_id, null)).rejects.toThrow(/Connection terminated/);
    expect(await text('lost.txt')).toBe('saved');
  });

  it('a copy removed after it was made (a failed write cleaning up) is made again under the lock', async () => {
    await files.put(ws, 'gone.txt', body('first'), { actor: null });
    const first = (await files.stat(ws, 'gone.txt')).version_id;
    store.afterNext(() => store.delete('version', `${ws}/${first}`));
    await files.put(ws, 'gone.txt', body('second'), { actor: null });
    expect(await versionTexts('gone.txt')).toEqual(['second', 'first']);
  });
});
