import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { sql, type ExpressionBuilder, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { advisoryXactLock, isUniqueViolation, withRetry, type Database, type DB, type Listener, type ObjectRow, type ObjectVersionRow } from '@codeagent/db';
import { ConflictError, NotFoundError, PayloadTooLargeError, QuotaExceededError, decodeCursor, encodeCursor, keysetPage, isUuid } from '@codeagent/service-kit';
import {
  ObjectTooLargeError,
  normalizeContentType,
  validateNewObjectPath,
  validateObjectPath,
  validatePrefix,
  type Area,
  type ByteRange,
  type ObjectStore,
} from '@codeagent/storage';
import { FolderTimes } from './folder-times.js';
import { checkWriteConditions, type WriteConditions } from './conditions.js';
import type { FolderDto, ListedFolderDto, ObjectDto, TrashItemDto, VersionDto } from './schemas.js';

export interface OpenedObject {
  object: ObjectDto;
  body: Readable;
}

/**
 * The least string above every path that starts with `prefix`: `prefix` with its last character
 * raised by one (a last U+10FFFF, the highest, is dropped and the one before it raised; none
 * left: no bound). Paths compare by code point (migration 011), so the paths starting with
 * `prefix` are exactly those in [`prefix`, this): one range of the primary key.
 */
export function prefixEnd(prefix: string): string | undefined {
  const chars = [...prefix];
  while (chars.length > 0) {
    const last = chars.pop()!.codePointAt(0)!;
    // (UTF-8, and so PostgreSQL's text, has no surrogates: after U+D7FF comes U+E000.)
    if (last < 0x10ffff) return chars.join('') + String.fromCodePoint(last === 0xd7ff ? 0xe000 : last + 1);
  }
  return undefined;
}

/**
 * The least path past a listing's entry `key` (SQL): past a folder `f/`, `f0` (`0` follows `/`,
 * and every path under `f/` is below it); past an object, the path with the least character
 * added (no path holds NUL).
 */
function nextAfter(key: RawBuilder<unknown>, folder: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`(CASE WHEN ${folder} THEN ${folderEnd(key)} ELSE ${key} || ${'\u0001'} END)`;
}

/** prefixEnd of a folder `f/` (SQL): `f0`. */
function folderEnd(folder: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`(left(${folder}, -1) || '0')`;
}

/** The objects of a workspace under the folder `folder` (SQL, a key `f/`): one range of the primary key. */
function underFolder(workspaceId: string, folder: RawBuilder<unknown>): RawBuilder<boolean> {
  return sql<boolean>`workspace_id = ${workspaceId} AND path >= ${folder} AND path < ${folderEnd(folder)}`;
}

/** An object of a listing's entries as the API answers it. */
const entryRow = (workspaceId: string, e: FolderPageRow): ObjectRow => ({ ...e, workspace_id: workspaceId, path: e.key });
const entryObject = (workspaceId: string, e: FolderPageRow): ObjectDto => toObjectDto(entryRow(workspaceId, e));

/** The objects whose path starts with `prefix`, as that range of the primary key. */
function pathStartsWith(prefix: string) {
  const end = prefixEnd(prefix);
  return (eb: ExpressionBuilder<DB, 'objects'>) => (end === undefined ? eb('path', '>=', prefix) : eb.and([eb('path', '>=', prefix), eb('path', '<', end)]));
}

/**
 * The statement of `WorkspaceFiles.list` (exported for its tests, which read its plan): `limit + 1`
 * objects under `prefix` after the path `after`, in path order; only the notebooks with `notebooks`
 * (the predicate of migration 013's partial index, as constants, so that the planner can use it).
 */
export function objectPageQuery(db: Kysely<DB>, workspaceId: string, prefix: string, limit: number, after: string | undefined, notebooks: boolean) {
  let q = db
    .selectFrom('objects')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('path')
    .limit(limit + 1);
  if (notebooks) q = q.where(sql<boolean>`path LIKE '%.ipynb' AND path NOT LIKE '%.runs/%'`);
  if (prefix !== '') q = q.where(pathStartsWith(prefix));
  if (after !== undefined) q = q.where('path', '>', after);
  return q;
}

/**
 * The statement of a page of `WorkspaceFiles.versions` (exported for its tests, which read its
 * plan): `rows` kept versions of `path` after the key `after`, newest first, without the current
 * content's own (`currentId`).
 */
export function versionPageQuery(
  db: Kysely<DB>,
  workspaceId: string,
  path: string,
  rows: number,
  after: readonly [Date, Date, string] | undefined,
  currentId: string | undefined,
) {
  let q = db
    .selectFrom('object_versions')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('path', '=', path)
    .orderBy('replaced_at', 'desc')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(rows);
  if (currentId !== undefined) q = q.where('id', '<>', currentId);
  if (after) q = q.where((eb) => eb(eb.refTuple('replaced_at', 'created_at', 'id'), '<', eb.tuple(after[0], after[1], after[2])));
  return q;
}

type FolderPageRow = Omit<ObjectRow, 'workspace_id' | 'path'> & { key: string; folder: boolean; under: string };

/**
 * The statement of `WorkspaceFiles.listByFolder` (exported for its tests, which read its plan):
 * `limit + 1` entries under `prefix` after the entry `after`, in path order; the folders' counts
 * unless `counts` is false (then 0).
 */
export function folderPageQuery(
  workspaceId: string,
  prefix: string,
  limit: number,
  after: string | undefined,
  { counts = true }: { counts?: boolean } = {},
): RawBuilder<FolderPageRow> {
  // The page starts at the prefix, or after the cursor's entry when that is further.
  const start =
    after === undefined
      ? sql`${prefix}::text`
      : sql`greatest(${prefix}::text COLLATE "C", ${nextAfter(sql`${after}::text`, sql`${after.endsWith('/')}`)} COLLATE "C")`;
  const end = prefixEnd(prefix);
  const inRange = end === undefined ? sql`true` : sql`path < ${end}`;
  const inFolder = sql`strpos(substr(path, char_length(${prefix}) + 1), '/') > 0`;
  const objectsOf = sql`objects WHERE workspace_id = ${workspaceId} AND ${inRange}`;
  // walk: each row a place `lo` the walk reached, with `n` entries before it; `folder` is the
  // folder it has just passed (none at the start). spans: the objects from each place to the
  // next folder (or as many as the page still needs).
  return sql<FolderPageRow>`
    WITH RECURSIVE walk(lo, folder, n, under) AS (
      SELECT ${start} COLLATE "C", NULL::text COLLATE "C", 0::bigint, 0::bigint
      UNION ALL
      SELECT ${folderEnd(sql.ref('f.key'))}, f.key, w.n + f.before + 1,
        ${counts ? sql`(SELECT count(*) FROM (SELECT 1 FROM objects WHERE ${underFolder(workspaceId, sql.ref('f.key'))} LIMIT ${FOLDER_COUNT_LIMIT + 1}) u)` : sql`0::bigint`}
      FROM walk w CROSS JOIN LATERAL (
        SELECT left(b.path, char_length(${prefix}) + strpos(substr(b.path, char_length(${prefix}) + 1), '/')) AS key,
          (SELECT count(*) FROM ${objectsOf} AND path >= w.lo AND path < b.path) AS before
        FROM (
          SELECT path FROM (SELECT path FROM ${objectsOf} AND path >= w.lo ORDER BY path LIMIT ${limit + 1} - w.n) p
          WHERE ${inFolder} ORDER BY path LIMIT 1
        ) b
      ) f
      WHERE w.n <= ${limit}
    ),
    spans AS (SELECT lo, n, lead(folder) OVER (ORDER BY n) AS upto FROM walk),
    entries AS (
      SELECT folder AS key, true AS folder, under, NULL::bigint AS size, NULL AS sha256, NULL AS content_type, NULL::uuid AS version_id,
        NULL::timestamptz AS updated_at, NULL::uuid AS updated_by, NULL::timestamptz AS modified_at
      FROM walk WHERE folder IS NOT NULL
      UNION ALL
      SELECT o.path, false, 0, o.size, o.sha256, o.content_type, o.version_id, o.updated_at, o.updated_by, o.modified_at FROM spans s CROSS JOIN LATERAL (
        -- (Two forms, so that the index scan stops at the next folder: an OR would be a filter.)
        SELECT * FROM ${objectsOf} AND path >= s.lo AND path < s.upto ORDER BY path LIMIT ${limit + 1} - s.n
      ) o WHERE s.upto IS NOT NULL
      UNION ALL
      SELECT o.path, false, 0, o.size, o.sha256, o.content_type, o.version_id, o.updated_at, o.updated_by, o.modified_at FROM spans s CROSS JOIN LATERAL (
        SELECT * FROM ${objectsOf} AND path >= s.lo ORDER BY path LIMIT ${limit + 1} - s.n
      ) o WHERE s.upto IS NULL
    )
    SELECT * FROM entries ORDER BY key COLLATE "C" LIMIT ${limit + 1}`;
}

/** The folders a path lies in, outermost first: `a/b/c` → `a`, `a/b`. */
function ancestorsOf(path: string): string[] {
  const segments = path.split('/');
  return segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('/'));
}

/** The depth down to which a write locks each folder it lies in (decision 0246). */
export const TREE_LOCK_DEPTH = 32;

/**
 * The advisory locks that claim `path`'s place in the tree (decisions 0213, 0246): shared on each
 * folder it lies in down to depth TREE_LOCK_DEPTH, exclusive on the path itself; a path deeper
 * than that takes its exclusive lock on its folder at that depth instead (a key of its own), so
 * the writes of one deep subtree wait for each other. Any two paths of which one lies in (or is)
 * the other then ask for one lock in conflicting modes, and a write holds at most
 * TREE_LOCK_DEPTH + 1 locks: 1,024 bytes of path could name 512 segments, and the server's lock
 * table (max_locks_per_transaction × connections) is shared by every transaction of the platform.
 */
export function treeLocks(workspaceId: string, path: string): { shared: string[]; exclusive: string } {
  const key = (p: string) => `codeagent:tree:${workspaceId}:${p}`;
  const segments = path.split('/');
  const ancestors = ancestorsOf(path).slice(0, TREE_LOCK_DEPTH);
  if (segments.length <= TREE_LOCK_DEPTH) return { shared: ancestors.map(key), exclusive: key(path) };
  return { shared: ancestors.map(key), exclusive: `codeagent:tree-below:${workspaceId}:${segments.slice(0, TREE_LOCK_DEPTH).join('/')}` };
}

/** The current content of a path as its newest version. */
function currentVersion(current: ObjectRow): VersionDto {
  return {
    version_id: current.version_id,
    size: Number(current.size),
    sha256: current.sha256,
    content_type: current.content_type,
    created_at: current.updated_at.toISOString(),
    created_by: current.updated_by,
    current: true,
  };
}

/** A kept version as the versions list answers it. */
function keptVersion(v: ObjectVersionRow): VersionDto {
  return {
    version_id: v.id,
    size: Number(v.size),
    sha256: v.sha256,
    content_type: v.content_type,
    created_at: v.created_at.toISOString(),
    created_by: v.created_by,
    current: false,
  };
}

/** The cursor of a versions page that held only the current content: every kept version is after it. */
const VERSIONS_FROM_THE_TOP = ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z', 'ffffffff-ffff-4fff-bfff-ffffffffffff'];

function toObjectDto(r: ObjectRow): ObjectDto {
  return {
    path: r.path,
    size: Number(r.size),
    sha256: r.sha256,
    content_type: r.content_type,
    version_id: r.version_id,
    updated_at: r.updated_at.toISOString(),
    updated_by: r.updated_by,
  };
}

/**
 * An object with the time a mount shows for it (decision 0220): the time its writer's mount
 * client gave (WebDAV `X-OC-Mtime`), else `updated_at`. Not part of the API's object.
 */
export type TimedObject = ObjectDto & { modified_at: string };

function toTimedObject(r: ObjectRow): TimedObject {
  return { ...toObjectDto(r), modified_at: (r.modified_at ?? r.updated_at).toISOString() };
}

/** How far a listing by folder counts the objects under each folder (decision 0199). */
export const FOLDER_COUNT_LIMIT = 1_000;

const blobKey = (workspaceId: string, id: string) => `${workspaceId}/${id}`;

export interface WorkspaceFilesOptions {
  /**
   * WORKSPACE_QUOTA_BYTES: the bytes a workspace may store, counting current objects, kept
   * versions and the trash (all of it occupies storage). Undefined: no quota.
   */
  quotaBytes?: number | undefined;
}

/**
 * A workspace's rows of `workspace_usage` (migration 012) beyond which a quota check folds them
 * into one: its reads stay a few rows, its folds rare.
 */
const FOLD_ABOVE_ROWS = 64;

/**
 * The stored bytes of a workspace: current objects + versions + trash, from the running total of
 * migration 012 (a sum over the rows the writes since its last fold appended, not over its files;
 * decision 0200).
 */
export async function storedBytes(db: Kysely<DB>, workspaceId: string): Promise<number> {
  return (await usage(db, workspaceId)).bytes;
}

async function usage(db: Kysely<DB>, workspaceId: string): Promise<{ bytes: number; rows: number }> {
  const row = await db
    .selectFrom('workspace_usage')
    .select([sql<string>`coalesce(sum(bytes), 0)`.as('bytes'), sql<string>`count(*)`.as('rows')])
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return { bytes: Number(row.bytes), rows: Number(row.rows) };
}

/** The advisory lock (held to the transaction's end) under which a workspace's quota checks and folds run. */
const usageLock = (trx: Transaction<DB>, workspaceId: string) => advisoryXactLock(trx, `codeagent:quota:${workspaceId}`);

/**
 * Folds a workspace's rows of `workspace_usage` into one (their sum), in one statement. Each row
 * is deleted by one fold only, so a total never changes by folding; the caller holds the
 * workspace's `usageLock`, so that two folds of a workspace never wait for each other's rows.
 */
async function fold(trx: Transaction<DB>, workspaceId: string): Promise<void> {
  await sql`
    WITH gone AS (DELETE FROM workspace_usage WHERE workspace_id = ${workspaceId} RETURNING bytes)
    INSERT INTO workspace_usage (workspace_id, bytes) SELECT ${workspaceId}, sum(bytes) FROM gone HAVING sum(bytes) <> 0`.execute(trx);
}

/**
 * Folds the rows of `workspace_usage` of up to `limit` workspaces that have several (most rows
 * first), each in a transaction of its own: what keeps the running totals of workspaces without
 * a quota (which no write folds) a few rows each. Run by the worker's maintenance. Returns how
 * many workspaces it folded.
 */
export async function foldUsage(db: Kysely<DB>, limit: number): Promise<number> {
  const many = await db
    .selectFrom('workspace_usage')
    .select('workspace_id')
    .groupBy('workspace_id')
    .having(sql`count(*)`, '>', 1)
    .orderBy(sql`count(*)`, 'desc')
    .limit(limit)
    .execute();
  for (const { workspace_id } of many) {
    await db.transaction().execute(async (trx) => {
      await usageLock(trx, workspace_id);
      await fold(trx, workspace_id);
    });
  }
  return many.length;
}

/**
 * The files of the workspaces (docs/contract/spec.md §4.3): metadata in the database, content in the store.
 * Content is written first under a fresh key, then one transaction makes it current (the
 * replaced content becomes a version); the old bytes are removed only after the commit. A
 * failed or cut-off upload therefore changes nothing, and concurrent writes of one path
 * serialise on its row: one ends current, the other a version.
 */
export class WorkspaceFiles {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly store: ObjectStore,
    private readonly log: { warn(obj: object, msg: string): void } = { warn: () => undefined },
    private readonly options: WorkspaceFilesOptions = {},
  ) {}

  /** Folder times of the listings, kept while followChanges follows the changes (decision 0237). */
  private folderTimes: FolderTimes | undefined;

  /**
   * Keeps the folder times of listFolder (WebDAV listings) while following the changes of
   * workspace files (LISTEN workspace_files) until the listener is closed (decision 0237).
   */
  followChanges(listen: Database['listen']): Listener {
    this.folderTimes ??= new FolderTimes();
    return this.folderTimes.follow(listen);
  }

  /**
   * Admits a write that adds `delta` stored bytes, or throws QuotaExceededError. Counts under a
   * per-workspace lock held until the transaction ends, so parallel writes are admitted one
   * after another against committed totals: two cannot both squeeze under the quota. Call it
   * first in the transaction (before any row lock), so the lock order is always the same.
   */
  private async admit(trx: Transaction<DB>, workspaceId: string, delta: number): Promise<void> {
    const quota = this.options.quotaBytes;
    if (quota === undefined || delta <= 0) return;
    await usageLock(trx, workspaceId);
    const { bytes: used, rows } = await usage(trx, workspaceId);
    if (used + delta > quota) throw quotaExceeded(used, delta, quota);
    // (Writes without a check only append rows, and never wait for a fold.)
    if (rows > FOLD_ABOVE_ROWS) await fold(trx, workspaceId);
  }

  /** Bytes an upload may still add before the final check refuses it; undefined without a quota. */
  private async room(workspaceId: string): Promise<number | undefined> {
    const quota = this.options.quotaBytes;
    return quota === undefined ? undefined : Math.max(0, quota - (await storedBytes(this.db, workspaceId)));
  }

  /** Removes bytes no row points to any more; failures only leave garbage, never damage. */
  private async discard(area: 'workspace' | 'version' | 'trash', key: string): Promise<void> {
    await this.store.delete(area, key).catch((err: unknown) => this.log.warn({ err, area, key }, 'could not remove unreferenced content'));
  }

  /**
   * After a failed write: removes the content it stored under `id` (a new version, or a trash
   * item), unless a committed row points to it. A commit can succeed and its answer be lost with
   * the connection; the content of such a write is the file's now. When that cannot be asked
   * (the database gone), the content stays: garbage, never damage.
   */
  private async discardNew(workspaceId: string, area: 'workspace' | 'trash', id: string): Promise<void> {
    let recorded: boolean;
    try {
      if (area === 'trash') recorded = (await this.db.selectFrom('trash_items').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
      else {
        const { rows } = await sql<{ recorded: boolean }>`SELECT EXISTS (SELECT 1 FROM objects WHERE version_id = ${id})
          OR EXISTS (SELECT 1 FROM object_versions WHERE id = ${id}) AS recorded`.execute(this.db);
        recorded = rows[0]?.recorded === true;
      }
    } catch (err) {
      this.log.warn({ err, area, key: blobKey(workspaceId, id) }, 'a write failed and whether it was recorded is unknown: its content stays');
      return;
    }
    if (!recorded) await this.discard(area, blobKey(workspaceId, id));
  }

  private async currentRow(trx: Kysely<DB> | Transaction<DB>, workspaceId: string, path: string, lock = false) {
    let q = trx.selectFrom('objects').selectAll().where('workspace_id', '=', workspaceId).where('path', '=', path);
    if (lock) q = q.forUpdate();
    return q.executeTakeFirst();
  }

  /**
   * Copies `from` to `to` ahead of the transaction that records the copy (decision 0235): on S3
   * a copy takes seconds for a large object, and inside the transaction it held a database
   * connection, the object's row lock and the tree locks the whole time. False when it failed
   * (the content gone meanwhile, the store down): the transaction then copies, as before.
   */
  private async copyAhead(from: Area, fromKey: string, to: Area, toKey: string): Promise<boolean> {
    try {
      await this.store.copy(from, fromKey, to, toKey);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Before a transaction that may replace the object `current` (read unlocked; the transaction
   * checks it is still the one it replaces): copies its content to the version area. Returns
   * the version copied, which the caller passes to keepAsVersion; `copied` collects every one
   * (a transaction run again copies again), which the caller passes to dropUnkept at the end.
   */
  private async keepAhead(current: ObjectRow | undefined, copied: Set<string>): Promise<string | undefined> {
    if (!current) return undefined;
    const key = blobKey(current.workspace_id, current.version_id);
    if (!(await this.copyAhead('workspace', key, 'version', key))) return undefined;
    copied.add(current.version_id);
    return current.version_id;
  }

  /**
   * Keeps the current content of a locked row as a version (content in the version area + row).
   * The content is copied here unless `ahead` (keepAhead) is this row's version and its copy is
   * still there: an operation that copied it ahead and then failed removes it (dropUnkept) under
   * this row's lock, so what this transaction finds under the lock stays.
   */
  private async keepAsVersion(trx: Transaction<DB>, row: ObjectRow, ahead?: string): Promise<void> {
    const key = blobKey(row.workspace_id, row.version_id);
    if (row.version_id !== ahead || (await this.store.head('version', key)) === undefined) await this.store.copy('workspace', key, 'version', key);
    await trx
      .insertInto('object_versions')
      .values({
        id: row.version_id,
        workspace_id: row.workspace_id,
        path: row.path,
        size: row.size,
        sha256: row.sha256,
        content_type: row.content_type,
        created_at: row.updated_at,
        created_by: row.updated_by,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  /**
   * At the end of an operation that copied versions ahead (keepAhead): removes each copy but the
   * one it committed as a kept version (`kept`), unless a version row holds it anyway (another
   * replace of the same content committed it). Under the lock of the object still holding that
   * version, if one does, so a transaction replacing it meanwhile either finds the copy gone
   * (and copies) or has committed its row.
   */
  private async dropUnkept(workspaceId: string, copied: ReadonlySet<string>, kept: string | undefined): Promise<void> {
    for (const versionId of copied) {
      if (versionId === kept) continue;
      const key = blobKey(workspaceId, versionId);
      try {
        await this.db.transaction().execute(async (trx) => {
          await trx.selectFrom('objects').select('path').where('version_id', '=', versionId).forUpdate().execute();
          const row = await trx.selectFrom('object_versions').select('id').where('id', '=', versionId).executeTakeFirst();
          if (!row) await this.store.delete('version', key);
        });
      } catch (err) {
        this.log.warn({ err, area: 'version', key }, 'could not remove content copied ahead of a write that did not keep it');
      }
    }
  }

  /**
   * Claims `path`'s place in the tree for a write that may create it (decision 0213): a name is
   * never both a file and a folder, so a new object may not lie below a file nor take the name of
   * a folder (409). Replacing the object already at `path` always may. Locks (treeLocks): shared on
   * each ancestor, exclusive on the path itself, until the transaction ends, so that writes below one
   * folder never wait for each other while a write of the folder's own name waits for them (and
   * they for it): two parallel writes cannot make `a` a file and a folder. Take it first in the
   * transaction (before `admit` and any row lock): the lock order is then the same everywhere.
   */
  private async claimPlace(trx: Transaction<DB>, workspaceId: string, path: string): Promise<void> {
    const ancestors = ancestorsOf(path);
    const locks = treeLocks(workspaceId, path);
    if (locks.shared.length > 0) {
      await sql`SELECT pg_advisory_xact_lock_shared(hashtextextended(k, 0)) FROM unnest(${locks.shared}::text[]) k`.execute(trx);
    }
    await advisoryXactLock(trx, locks.exclusive);
    const { rows } = await sql<{ here: boolean; file: string | null; folder: boolean }>`
      SELECT EXISTS (SELECT 1 FROM objects WHERE workspace_id = ${workspaceId} AND path = ${path}) AS here,
        (SELECT path FROM objects WHERE workspace_id = ${workspaceId} AND path = ANY(${ancestors}::text[]) ORDER BY char_length(path) DESC LIMIT 1) AS file,
        EXISTS (SELECT 1 FROM objects WHERE ${underFolder(workspaceId, sql`${`${path}/`}::text`)}) AS folder`.execute(trx);
    const place = rows[0]!;
    if (place.here) return;
    if (place.file !== null) throw new ConflictError(`${place.file} is a file, so nothing can be stored below it (${path}); rename or delete it first`);
    if (place.folder) throw new ConflictError(`${path} is a folder, so a file cannot take its name; choose another name or delete the folder first`);
  }

  /**
   * Stores `body` at `path`. Returns the object and whether it was created (201) or replaced (200).
   */
  async put(
    workspaceId: string,
    path: string,
    body: Readable,
    opts: {
      contentType?: string | undefined;
      actor: string | null;
      maxBytes?: number;
      modifiedAt?: Date | undefined;
      /**
       * Asked again in the write's transaction, after the body has arrived (which may take long):
       * throws when the writer may no longer write (a member removed, a user disabled while the
       * upload ran); nothing is stored then (decision 0261).
       */
      stillAllowed?: ((trx: Transaction<DB>) => Promise<void>) | undefined;
      /** `If-Match`/`If-None-Match`, met by the path's content under the write's lock, or 412 (decision 0262). */
      conditions?: WriteConditions | undefined;
    },
  ): Promise<{ object: ObjectDto; created: boolean }> {
    validateNewObjectPath(path);
    const versionId = randomUUID();
    const key = blobKey(workspaceId, versionId);
    // Stop reading early once the upload cannot fit; the check in the transaction decides.
    const room = await this.room(workspaceId);
    const quotaBinds = room !== undefined && (opts.maxBytes === undefined || room < opts.maxBytes);
    const limit = quotaBinds ? room : opts.maxBytes;
    const contentType = normalizeContentType(path, opts.contentType);
    let stored;
    try {
      stored = await this.store.put('workspace', key, body, { contentType, ...(limit !== undefined ? { maxBytes: limit } : {}) });
    } catch (err) {
      if (err instanceof ObjectTooLargeError) {
        if (quotaBinds) throw quotaExceeded(this.options.quotaBytes! - room, err.maxBytes + 1, this.options.quotaBytes!, 'at least ');
        throw new PayloadTooLargeError(`the upload is larger than MAX_UPLOAD_BYTES (${err.maxBytes} bytes)`);
      }
      throw err;
    }
    const values = {
      workspace_id: workspaceId,
      path,
      version_id: versionId,
      size: stored.size,
      sha256: stored.sha256,
      content_type: contentType,
      updated_by: opts.actor,
      // A mount client's own time of the file (decision 0220); any other write: none.
      modified_at: opts.modifiedAt ?? null,
    };
    let replaced: ObjectRow | undefined;
    const copied = new Set<string>();
    let kept: string | undefined;
    try {
      const result = await withRetry(async () => {
        const ahead = await this.keepAhead(await this.currentRow(this.db, workspaceId, path), copied);
        return this.db.transaction().execute(async (trx) => {
          replaced = undefined;
          await opts.stillAllowed?.(trx);
          await this.claimPlace(trx, workspaceId, path);
          // (claimPlace holds the path's lock: no other write changes it until this one ends.)
          if (opts.conditions !== undefined) checkWriteConditions(await this.currentRow(trx, workspaceId, path, true), opts.conditions, path);
          // Replacing keeps the old content as a version: the workspace grows by the new size.
          await this.admit(trx, workspaceId, Number(stored.size));
          const inserted = await trx
            .insertInto('objects')
            .values(values)
            .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
            .returningAll()
            .executeTakeFirst();
          if (inserted) return { row: inserted, created: true };
          const current = await this.currentRow(trx, workspaceId, path, true);
          if (!current) throw Object.assign(new Error('object vanished during replace'), { code: '40001' });
          await this.keepAsVersion(trx, current, ahead);
          replaced = current;
          const row = await trx
            .updateTable('objects')
            .set({ ...values, updated_at: new Date() })
            .where('workspace_id', '=', workspaceId)
            .where('path', '=', path)
            .returningAll()
            .executeTakeFirstOrThrow();
          return { row, created: false };
        });
      });
      kept = replaced?.version_id;
      if (replaced) await this.discard('workspace', blobKey(workspaceId, replaced.version_id));
      return { object: toObjectDto(result.row), created: result.created };
    } catch (err) {
      await this.discardNew(workspaceId, 'workspace', versionId);
      throw err;
    } finally {
      await this.dropUnkept(workspaceId, copied, kept);
    }
  }

  async stat(workspaceId: string, path: string): Promise<ObjectDto> {
    return toObjectDto(await this.currentOrMissing(workspaceId, path));
  }

  /** `stat` with the file's modification time for a mount (decision 0220). */
  async statTimed(workspaceId: string, path: string): Promise<TimedObject> {
    return toTimedObject(await this.currentOrMissing(workspaceId, path));
  }

  private async currentOrMissing(workspaceId: string, path: string): Promise<ObjectRow> {
    validateObjectPath(path);
    const row = await this.currentRow(this.db, workspaceId, path);
    if (!row) throw new NotFoundError(`no object at ${path}`);
    return row;
  }

  /** Opens the current content (or a byte range of it). */
  async open(workspaceId: string, path: string, range?: ByteRange): Promise<OpenedObject> {
    const object = await this.stat(workspaceId, path);
    const got = await this.store.get('workspace', blobKey(workspaceId, object.version_id), range);
    if (!got) throw new NotFoundError(`the content of ${path} is missing from storage`);
    return { object, body: got.body };
  }

  /** Reads a whole object into memory: for notebooks, not for data files. */
  async readAll(workspaceId: string, path: string): Promise<Buffer> {
    const { body } = await this.open(workspaceId, path);
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /**
   * A page of the objects under `prefix`, in path order. `notebooks`: only the notebooks (decision
   * 0203: `*.ipynb` outside the `.runs/` folders of executed copies), read from their own index.
   */
  async list(workspaceId: string, prefix: string, limit: number, cursor: string | undefined, opts: { notebooks?: boolean } = {}) {
    validatePrefix(prefix);
    const after = decodeCursor(cursor, ['text'])?.[0];
    const rows = await objectPageQuery(this.db, workspaceId, prefix, limit, after, opts.notebooks === true).execute();
    return keysetPage(rows, limit, (r) => [r.path], toObjectDto);
  }

  /**
   * A listing by `delimiter=/` (decision 0199): what lies directly under `prefix`, in path order,
   * a page of at most `limit` entries (objects and folders together): the objects whose path
   * has no `/` after the prefix, and for the others one folder each, the prefix up to that `/`
   * (as S3's common prefixes), with the number of objects under it (up to FOLDER_COUNT_LIMIT).
   *
   * One statement walks the primary key from folder to folder: from where it stands, it reads
   * paths in order (no more than the page still needs) up to the first one in a folder, then
   * goes on past that folder's range (`folder/` ends before `folder0`). The paths it read on the
   * way are the page's objects; the folders' contents are never read but to count them. A page
   * costs its entries and the counts, never the rest of the subtree. The cursor is the last
   * entry's key (a folder's ends in `/`, which no object path does).
   */
  async listByFolder(
    workspaceId: string,
    prefix: string,
    limit: number,
    cursor: string | undefined,
  ): Promise<{ items: ObjectDto[]; folders: ListedFolderDto[]; next_cursor: string | null }> {
    validatePrefix(prefix);
    const after = decodeCursor(cursor, ['text'])?.[0];
    const { rows } = await folderPageQuery(workspaceId, prefix, limit, after).execute(this.db);
    const page = rows.slice(0, limit);
    const items: ObjectDto[] = [];
    const folders: ListedFolderDto[] = [];
    for (const r of page) {
      if (r.folder) {
        const count = Number(r.under);
        folders.push({ path: r.key, object_count: Math.min(count, FOLDER_COUNT_LIMIT), object_count_capped: count > FOLDER_COUNT_LIMIT });
      } else items.push(entryObject(workspaceId, r));
    }
    const last = page[page.length - 1];
    return { items, folders, next_cursor: rows.length > limit && last !== undefined ? encodeCursor([last.key]) : null };
  }

  /**
   * What lies directly in a folder (`folder` is '' for the root, else a prefix ending in `/`):
   * its objects and the names of its sub-folders, at most `limit` of each, by name.
   */
  async listFolder(workspaceId: string, folder: string, limit: number): Promise<{ objects: TimedObject[]; folders: FolderDto[] }> {
    validatePrefix(folder);
    // The entries by the walk of listByFolder, which never reads inside the sub-folders (room for
    // `limit` of each kind); then each folder's newest time, which needs every object below it
    // (one range of the key per folder).
    const { rows: entries } = await folderPageQuery(workspaceId, folder, 2 * limit, undefined, { counts: false }).execute(this.db);
    const objects = entries
      .filter((e) => !e.folder)
      .slice(0, limit)
      .map((e) => toTimedObject(entryRow(workspaceId, e)));
    const keys = entries
      .filter((e) => e.folder)
      .slice(0, limit)
      .map((e) => e.key);
    if (keys.length === 0) return { objects, folders: [] };
    const kept = this.folderTimes;
    const stamp = kept?.stamp() ?? 0;
    const newest = new Map<string, string>();
    for (const key of keys) {
      const at = kept?.get(workspaceId, key);
      if (at !== undefined) newest.set(key, at);
    }
    const missing = keys.filter((key) => !newest.has(key));
    if (missing.length > 0) {
      const { rows: times } = await sql<{ key: string; updated_at: Date | null }>`
        SELECT k AS key, (SELECT max(updated_at) FROM objects WHERE ${underFolder(workspaceId, sql.ref('k'))}) AS updated_at
        FROM unnest(${missing}::text[]) k`.execute(this.db);
      for (const t of times) {
        if (t.updated_at === null) continue;
        const at = new Date(t.updated_at).toISOString();
        newest.set(t.key, at);
        kept?.set(workspaceId, t.key, at, stamp);
      }
    }
    // (A folder emptied since the walk has no time left: it is no longer there.)
    const folders = keys.flatMap((key) => {
      const at = newest.get(key);
      return at ? [{ name: key.slice(folder.length, -1), updated_at: at }] : [];
    });
    return { objects, folders };
  }

  /** Whether `path` names an object, a folder (objects live under `path/`), or nothing. */
  async kindOf(workspaceId: string, path: string): Promise<'object' | 'folder' | undefined> {
    validateObjectPath(path);
    // Two probes of the primary key: the path itself, then the first path of the range below it.
    const objects = this.db
      .selectFrom('objects')
      .select(sql`1`.as('one'))
      .where('workspace_id', '=', workspaceId);
    const row = await this.db
      .selectNoFrom((eb) => [eb.exists(objects.where('path', '=', path)).as('object'), eb.exists(objects.where(pathStartsWith(`${path}/`))).as('folder')])
      .executeTakeFirstOrThrow();
    if (row.object) return 'object';
    return row.folder ? 'folder' : undefined;
  }

  /** The paths of `path` itself (when an object) and of every object under `path/`, by name. */
  async pathsAt(workspaceId: string, path: string): Promise<string[]> {
    validateObjectPath(path);
    const rows = await this.db
      .selectFrom('objects')
      .select('path')
      .where('workspace_id', '=', workspaceId)
      .where((eb) => eb.or([eb('path', '=', path), pathStartsWith(`${path}/`)(eb)]))
      .orderBy('path')
      .execute();
    return rows.map((r) => r.path);
  }

  /** The bytes of the objects at `path` and below it (a file, or a folder's files). */
  async sizeAt(workspaceId: string, path: string): Promise<number> {
    validateObjectPath(path);
    const row = await this.db
      .selectFrom('objects')
      .select(sql<string>`coalesce(sum(size), 0)::text`.as('bytes'))
      .where('workspace_id', '=', workspaceId)
      .where((eb) => eb.or([eb('path', '=', path), pathStartsWith(`${path}/`)(eb)]))
      .executeTakeFirstOrThrow();
    return Number(row.bytes);
  }

  /**
   * Refuses (507 quota_exceeded) a write of `bytes` that cannot fit under the quota now, before
   * anything is changed: for an operation that would change something first (a WebDAV COPY
   * deletes what its Destination holds). Each write still checks in its own transaction.
   */
  async assertRoom(workspaceId: string, bytes: number): Promise<void> {
    const room = await this.room(workspaceId);
    const quota = this.options.quotaBytes;
    if (room !== undefined && quota !== undefined && bytes > room) throw quotaExceeded(quota - room, bytes, quota);
  }

  /** The nearest ancestor of `path` that is an object (a file cannot also be a folder), if any. */
  async objectAncestor(workspaceId: string, path: string): Promise<string | undefined> {
    validateObjectPath(path);
    const ancestors = ancestorsOf(path);
    if (ancestors.length === 0) return undefined;
    const row = await this.db
      .selectFrom('objects')
      .select('path')
      .where('workspace_id', '=', workspaceId)
      .where('path', 'in', ancestors)
      .orderBy(sql`char_length(path)`, 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.path;
  }

  /**
   * Moves the object at `from` to `to` with its versions (the content stays where it is: keys
   * do not name paths). An object at `to` is replaced the way a save replaces it: its content
   * becomes a version of `to`. No bytes are added, so the quota never refuses a rename.
   */
  async rename(
    workspaceId: string,
    from: string,
    to: string,
    actor: string | null,
    /** As `put`'s: asked again in the transaction (a folder's move renames file by file, for as long as that takes). */
    stillAllowed?: (trx: Transaction<DB>) => Promise<void>,
  ): Promise<{ object: ObjectDto; created: boolean }> {
    validateObjectPath(from);
    validateNewObjectPath(to);
    if (from === to) throw new ConflictError(`${from} cannot be moved onto itself`);
    let replaced: ObjectRow | undefined;
    const copied = new Set<string>();
    let kept: string | undefined;
    try {
      const result = await withRetry(async () => {
        // Only onto a file, and only when there is something to move (a rename that will be 404
        // copies nothing); a move onto a free name, most of a folder's, probes once.
        const onto = await this.currentRow(this.db, workspaceId, to);
        const ahead = onto && (await this.currentRow(this.db, workspaceId, from)) ? await this.keepAhead(onto, copied) : undefined;
        return this.db.transaction().execute(async (trx) => {
          replaced = undefined;
          await stillAllowed?.(trx);
          await this.claimPlace(trx, workspaceId, to);
          // Renames onto one path wait for each other (editors that save by renaming a temporary
          // file over the original): the next one then sees the row the previous one left there.
          await advisoryXactLock(trx, `codeagent:rename:${workspaceId}:${to}`);
          // Both rows locked in path order, as every other writer that takes two of them would.
          const rows = await trx
            .selectFrom('objects')
            .selectAll()
            .where('workspace_id', '=', workspaceId)
            .where('path', 'in', [from, to])
            .orderBy('path')
            .forUpdate()
            .execute();
          const source = rows.find((r) => r.path === from);
          if (!source) throw new NotFoundError(`no object at ${from}`);
          const target = rows.find((r) => r.path === to);
          if (target) {
            await this.keepAsVersion(trx, target, ahead);
            await trx.deleteFrom('objects').where('workspace_id', '=', workspaceId).where('path', '=', to).execute();
            replaced = target;
          }
          await trx.updateTable('object_versions').set({ path: to }).where('workspace_id', '=', workspaceId).where('path', '=', from).execute();
          try {
            const row = await trx
              .updateTable('objects')
              .set({ path: to, updated_by: actor, updated_at: new Date() })
              .where('workspace_id', '=', workspaceId)
              .where('path', '=', from)
              .returningAll()
              .executeTakeFirstOrThrow();
            return { row, created: target === undefined };
          } catch (err) {
            // A save created `to` after the lock above: run again, now replacing it.
            if (isUniqueViolation(err)) throw Object.assign(new Error('object appeared during rename'), { code: '40001' });
            throw err;
          }
        });
      });
      kept = replaced?.version_id;
      if (replaced) await this.discard('workspace', blobKey(workspaceId, replaced.version_id));
      return { object: toObjectDto(result.row), created: result.created };
    } finally {
      await this.dropUnkept(workspaceId, copied, kept);
    }
  }

  /** Moves the object to the trash (content to the trash area, row to trash_items). */
  async remove(workspaceId: string, path: string, actor: string | null, conditions?: WriteConditions): Promise<void> {
    validateObjectPath(path);
    // The trash key copied to ahead, and the one the trash item gets: another, fresh, when the
    // object changed meanwhile, so that a late copy of the old content (S3 carrying out a request
    // its client saw fail) can never land on the key of the item committed.
    const aheadId = randomUUID();
    let trashId = aheadId;
    let removed: ObjectRow | undefined;
    try {
      // The content goes to the trash before the transaction (decision 0235), which copies again
      // only if the object changed meanwhile.
      const seen = await this.currentRow(this.db, workspaceId, path);
      if (!seen) throw new NotFoundError(`no object at ${path}`);
      const ahead = (await this.copyAhead('workspace', blobKey(workspaceId, seen.version_id), 'trash', blobKey(workspaceId, aheadId)))
        ? seen.version_id
        : undefined;
      await this.db.transaction().execute(async (trx) => {
        const row = await this.currentRow(trx, workspaceId, path, true);
        if (!row) throw new NotFoundError(`no object at ${path}`);
        checkWriteConditions(row, conditions, path);
        if (row.version_id !== ahead) {
          trashId = randomUUID();
          await this.store.copy('workspace', blobKey(workspaceId, row.version_id), 'trash', blobKey(workspaceId, trashId));
        }
        await trx
          .insertInto('trash_items')
          .values({
            id: trashId,
            workspace_id: workspaceId,
            path,
            version_id: row.version_id,
            size: row.size,
            sha256: row.sha256,
            content_type: row.content_type,
            updated_at: row.updated_at,
            updated_by: row.updated_by,
            deleted_by: actor,
          })
          .execute();
        await trx.deleteFrom('objects').where('workspace_id', '=', workspaceId).where('path', '=', path).execute();
        removed = row;
      });
    } catch (err) {
      await this.discardNew(workspaceId, 'trash', trashId);
      if (trashId !== aheadId) await this.discard('trash', blobKey(workspaceId, aheadId));
      throw err;
    }
    if (trashId !== aheadId) await this.discard('trash', blobKey(workspaceId, aheadId));
    if (removed) await this.discard('workspace', blobKey(workspaceId, removed.version_id));
  }

  /**
   * The versions of `path`, newest first, in pages (docs/contract/spec.md §3): the current content
   * first (on the first page), then the kept ones by when they were replaced. A path can keep
   * any number of versions (every save is one), so no page reads more than `limit` of them
   * (migration 014's index is the order). 404 when the path has neither.
   */
  async versions(workspaceId: string, path: string, limit = 100, cursor?: string): Promise<{ items: VersionDto[]; next_cursor: string | null }> {
    validateObjectPath(path);
    const after = decodeCursor(cursor, ['time', 'time', 'uuid']);
    const current = await this.currentRow(this.db, workspaceId, path);
    const first = after === undefined && current !== undefined;
    // Room for the kept versions on this page; one more row says whether another page follows.
    const room = limit - (first ? 1 : 0);
    const older = await versionPageQuery(this.db, workspaceId, path, room + 1, after, current?.version_id).execute();
    if (!current && older.length === 0 && after === undefined) throw new NotFoundError(`no object or version at ${path}`);
    const items: VersionDto[] = older.slice(0, room).map(keptVersion);
    if (first) items.unshift(currentVersion(current));
    const last = older[room - 1];
    // More kept versions than room: the next page starts after the last one shown (or, when the
    // page held only the current content, at the newest kept one).
    const next = older.length > room ? (last ? [last.replaced_at.toISOString(), last.created_at.toISOString(), last.id] : VERSIONS_FROM_THE_TOP) : undefined;
    return { items, next_cursor: next ? encodeCursor(next) : null };
  }

  /** Opens one version's content: the current one, or a kept one. */
  async openVersion(workspaceId: string, path: string, versionId: string): Promise<{ version: VersionDto; body: Readable }> {
    validateObjectPath(path);
    if (!isUuid(versionId)) throw new NotFoundError(`version ${versionId} of ${path} not found`);
    const current = await this.currentRow(this.db, workspaceId, path);
    let version: VersionDto | undefined;
    if (current?.version_id === versionId) version = currentVersion(current);
    else {
      const v = await this.db
        .selectFrom('object_versions')
        .selectAll()
        .where('id', '=', versionId)
        .where('workspace_id', '=', workspaceId)
        .where('path', '=', path)
        .executeTakeFirst();
      if (v) version = keptVersion(v);
    }
    if (!version) throw new NotFoundError(`version ${versionId} of ${path} not found`);
    const got = await this.store.get(version.current ? 'workspace' : 'version', blobKey(workspaceId, versionId));
    if (!got) throw new NotFoundError(`the content of version ${versionId} is missing from storage`);
    return { version, body: got.body };
  }

  async restoreVersion(workspaceId: string, path: string, versionId: string, actor: string | null, conditions?: WriteConditions): Promise<ObjectDto> {
    validateObjectPath(path);
    if (!isUuid(versionId)) throw new NotFoundError(`version ${versionId} of ${path} not found`);
    const newVersionId = randomUUID();
    let replaced: ObjectRow | undefined;
    const copied = new Set<string>();
    let kept: string | undefined;
    try {
      // Both copies before the transaction (decision 0235): the version to restore, under a key
      // of its own (the transaction copies again only if this failed), and the current content.
      const seen = await this.db
        .selectFrom('object_versions')
        .select('size')
        .where('id', '=', versionId)
        .where('workspace_id', '=', workspaceId)
        .where('path', '=', path)
        .executeTakeFirst();
      // (Not when the quota would refuse it: the transaction then refuses without a copy.)
      const room = seen === undefined ? undefined : await this.room(workspaceId);
      const worth = seen !== undefined && (room === undefined || Number(seen.size) <= room);
      const copiedVersion = worth && (await this.copyAhead('version', blobKey(workspaceId, versionId), 'workspace', blobKey(workspaceId, newVersionId)));
      const ahead = worth ? await this.keepAhead(await this.currentRow(this.db, workspaceId, path), copied) : undefined;
      const row = await this.db.transaction().execute(async (trx) => {
        await this.claimPlace(trx, workspaceId, path);
        // Version rows never change (retention only deletes them): read before the quota lock.
        const version = await trx
          .selectFrom('object_versions')
          .selectAll()
          .where('id', '=', versionId)
          .where('workspace_id', '=', workspaceId)
          .where('path', '=', path)
          .forShare() // retention waits until this transaction ends: the row restored from stays until then
          .executeTakeFirst();
        if (version) await this.admit(trx, workspaceId, Number(version.size));
        const current = await this.currentRow(trx, workspaceId, path, true);
        checkWriteConditions(current, conditions, path);
        if (current?.version_id === versionId) return current;
        if (!version) throw new NotFoundError(`version ${versionId} of ${path} not found`);
        if (!copiedVersion) await this.store.copy('version', blobKey(workspaceId, versionId), 'workspace', blobKey(workspaceId, newVersionId));
        const values = {
          workspace_id: workspaceId,
          path,
          version_id: newVersionId,
          size: version.size,
          sha256: version.sha256,
          content_type: version.content_type,
          updated_by: actor,
          updated_at: new Date(),
          modified_at: null,
        };
        if (current) {
          await this.keepAsVersion(trx, current, ahead);
          replaced = current;
          return trx
            .updateTable('objects')
            .set(values)
            .where('workspace_id', '=', workspaceId)
            .where('path', '=', path)
            .returningAll()
            .executeTakeFirstOrThrow();
        }
        return trx.insertInto('objects').values(values).returningAll().executeTakeFirstOrThrow();
      });
      kept = replaced?.version_id;
      if (replaced) await this.discard('workspace', blobKey(workspaceId, replaced.version_id));
      return toObjectDto(row);
    } catch (err) {
      await this.discardNew(workspaceId, 'workspace', newVersionId);
      throw err;
    } finally {
      await this.dropUnkept(workspaceId, copied, kept);
    }
  }

  async trash(workspaceId: string, limit: number, cursor: string | undefined) {
    const after = decodeCursor(cursor, ['time', 'uuid']);
    let q = this.db
      .selectFrom('trash_items')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .orderBy('deleted_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1);
    if (after) {
      const [at, id] = after;
      q = q.where((eb) => eb(eb.refTuple('deleted_at', 'id'), '<', eb.tuple(at, id)));
    }
    const rows = await q.execute();
    return keysetPage(
      rows,
      limit,
      (t) => [t.deleted_at.toISOString(), t.id],
      (t): TrashItemDto => ({ id: t.id, path: t.path, size: Number(t.size), deleted_at: t.deleted_at.toISOString(), deleted_by: t.deleted_by }),
    );
  }

  /**
   * Puts a trashed object back at its path; 409 when a live object is there again. The quota
   * counts the trash, so a restore moves bytes without adding any: never refused for quota.
   */
  async restoreTrash(workspaceId: string, trashId: string, actor: string | null): Promise<ObjectDto> {
    if (!isUuid(trashId)) throw new NotFoundError(`trash item ${trashId} not found`);
    const newVersionId = randomUUID();
    let restoredFrom: string | undefined;
    try {
      // The content goes back before the transaction (decision 0235), under a key of its own;
      // the transaction copies only if this failed.
      const seen = await this.db.selectFrom('trash_items').select('path').where('id', '=', trashId).where('workspace_id', '=', workspaceId).executeTakeFirst();
      if (!seen) throw new NotFoundError(`trash item ${trashId} not found`);
      // (Not when an object holds the path again: the transaction then refuses without a copy.)
      const copiedAhead =
        (await this.currentRow(this.db, workspaceId, seen.path)) === undefined &&
        (await this.copyAhead('trash', blobKey(workspaceId, trashId), 'workspace', blobKey(workspaceId, newVersionId)));
      const row = await this.db.transaction().execute(async (trx) => {
        const item = await trx
          .selectFrom('trash_items')
          .selectAll()
          .where('id', '=', trashId)
          .where('workspace_id', '=', workspaceId)
          .forUpdate()
          .executeTakeFirst();
        if (!item) throw new NotFoundError(`trash item ${trashId} not found`);
        await this.claimPlace(trx, workspaceId, item.path);
        if (await this.currentRow(trx, workspaceId, item.path, true)) {
          throw new ConflictError(`an object exists at ${item.path} again; delete or rename it first`);
        }
        if (!copiedAhead) await this.store.copy('trash', blobKey(workspaceId, trashId), 'workspace', blobKey(workspaceId, newVersionId));
        let restored: ObjectRow;
        try {
          restored = await trx
            .insertInto('objects')
            .values({
              workspace_id: workspaceId,
              path: item.path,
              version_id: newVersionId,
              size: item.size,
              sha256: item.sha256,
              content_type: item.content_type,
              updated_by: actor,
            })
            .returningAll()
            .executeTakeFirstOrThrow();
        } catch (err) {
          if (isUniqueViolation(err)) throw new ConflictError(`an object exists at ${item.path} again; delete or rename it first`);
          throw err;
        }
        await trx.deleteFrom('trash_items').where('id', '=', trashId).execute();
        restoredFrom = trashId;
        return restored;
      });
      if (restoredFrom) await this.discard('trash', blobKey(workspaceId, restoredFrom));
      return toObjectDto(row);
    } catch (err) {
      await this.discardNew(workspaceId, 'workspace', newVersionId);
      throw err;
    }
  }

  /**
   * Deletes the objects at `paths` and all their versions for good (no trash): retention of
   * the executed notebooks of old runs. Missing paths are skipped. Returns how many objects went.
   */
  async purgePaths(workspaceId: string, paths: string[]): Promise<number> {
    if (paths.length === 0) return 0;
    const { objects, versions } = await this.db.transaction().execute(async (trx) => ({
      objects: await trx.deleteFrom('objects').where('workspace_id', '=', workspaceId).where('path', 'in', paths).returning('version_id').execute(),
      versions: await trx.deleteFrom('object_versions').where('workspace_id', '=', workspaceId).where('path', 'in', paths).returning('id').execute(),
    }));
    for (const o of objects) await this.discard('workspace', blobKey(workspaceId, o.version_id));
    for (const v of versions) await this.discard('version', blobKey(workspaceId, v.id));
    return objects.length;
  }

  /**
   * Version retention: deletes up to `limit` kept versions that are beyond the newest
   * `keepCount` of their path (0 = no count limit) or were replaced before `replacedBefore`,
   * with their content. The current content of an object is never touched. Returns how many went.
   */
  async pruneVersions(opts: { keepCount: number; replacedBefore?: Date | undefined; limit: number }): Promise<number> {
    const { keepCount, replacedBefore, limit } = opts;
    if (keepCount <= 0 && replacedBefore === undefined) return 0;
    const ranked = this.db
      .selectFrom('object_versions')
      .select(['id', 'replaced_at', sql<number>`row_number() OVER (PARTITION BY workspace_id, path ORDER BY replaced_at DESC, created_at DESC, id)`.as('rank')])
      .as('v');
    const doomed = this.db
      .selectFrom(ranked)
      .select('v.id')
      .where((eb) => eb.or([...(keepCount > 0 ? [eb('v.rank', '>', keepCount)] : []), ...(replacedBefore ? [eb('v.replaced_at', '<', replacedBefore)] : [])]))
      .limit(limit);
    const gone = await this.db.deleteFrom('object_versions').where('id', 'in', doomed).returning(['workspace_id', 'id']).execute();
    for (const v of gone) await this.discard('version', blobKey(v.workspace_id, v.id));
    return gone.length;
  }

  /** Removes a trash item and its content for good. */
  async purgeTrash(workspaceId: string, trashId: string): Promise<void> {
    if (!isUuid(trashId)) throw new NotFoundError(`trash item ${trashId} not found`);
    const res = await this.db.deleteFrom('trash_items').where('id', '=', trashId).where('workspace_id', '=', workspaceId).executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) throw new NotFoundError(`trash item ${trashId} not found`);
    await this.discard('trash', blobKey(workspaceId, trashId));
  }
}

function quotaExceeded(used: number, delta: number, quota: number, approx = ''): QuotaExceededError {
  return new QuotaExceededError(
    `the workspace stores ${used} bytes (files, versions and trash); writing ${approx}${delta} more would pass WORKSPACE_QUOTA_BYTES (${quota}). ` +
      'Nothing was written: delete files or purge the trash first',
  );
}
