import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { sql, type Kysely, type Transaction } from 'kysely';
import { isUniqueViolation, withRetry, type DB, type ObjectRow } from '@codeagent/db';
import { ConflictError, NotFoundError, PayloadTooLargeError, decodeCursor, keysetPage, isUuid } from '@codeagent/service-kit';
import { validateObjectPath, validatePrefix } from './paths.js';
import { ObjectTooLargeError, type ByteRange, type ObjectStore } from './store.js';

export interface ObjectDto {
  path: string;
  size: number;
  sha256: string;
  content_type: string;
  version_id: string;
  updated_at: string;
  updated_by: string | null;
}

export interface VersionDto {
  version_id: string;
  size: number;
  sha256: string;
  content_type: string;
  created_at: string;
  created_by: string | null;
  current: boolean;
}

export interface TrashItemDto {
  id: string;
  path: string;
  size: number;
  deleted_at: string;
  deleted_by: string | null;
}

export interface OpenedObject {
  object: ObjectDto;
  body: Readable;
}


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

const EXTENSION_TYPES: Record<string, string> = {
  ipynb: 'application/x-ipynb+json',
  json: 'application/json',
  csv: 'text/csv',
  txt: 'text/plain',
  md: 'text/markdown',
  py: 'text/x-python',
  html: 'text/html',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  parquet: 'application/vnd.apache.parquet',
  log: 'text/plain',
};

/** The stored content type: what the client said, else a guess from the extension. */
export function contentTypeFor(path: string, given: string | undefined): string {
  const clean = given?.split(';')[0]?.trim().toLowerCase();
  if (clean && clean !== 'application/octet-stream' && /^[\w.+-]+\/[\w.+-]+$/.test(clean)) return given!.trim();
  const ext = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return (ext && EXTENSION_TYPES[ext]) ?? 'application/octet-stream';
}

const blobKey = (workspaceId: string, id: string) => `${workspaceId}/${id}`;

/**
 * The files of the workspaces (SPEC §4.3): metadata in the database, content in the store.
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
  ) {}

  /** Removes bytes no row points to any more; failures only leave garbage, never damage. */
  private async discard(area: 'workspace' | 'version' | 'trash', key: string): Promise<void> {
    await this.store.delete(area, key).catch((err: unknown) => this.log.warn({ err, area, key }, 'could not remove unreferenced content'));
  }

  private async currentRow(trx: Kysely<DB> | Transaction<DB>, workspaceId: string, path: string, lock = false) {
    let q = trx.selectFrom('objects').selectAll().where('workspace_id', '=', workspaceId).where('path', '=', path);
    if (lock) q = q.forUpdate();
    return q.executeTakeFirst();
  }

  /** Keeps the current content of a locked row as a version (copy to the version area + row). */
  private async keepAsVersion(trx: Transaction<DB>, row: ObjectRow): Promise<void> {
    await this.store.copy('workspace', blobKey(row.workspace_id, row.version_id), 'version', blobKey(row.workspace_id, row.version_id));
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
   * Stores `body` at `path`. Returns the object and whether it was created (201) or replaced (200).
   */
  async put(
    workspaceId: string,
    path: string,
    body: Readable,
    opts: { contentType?: string | undefined; actor: string | null; maxBytes?: number },
  ): Promise<{ object: ObjectDto; created: boolean }> {
    validateObjectPath(path);
    const versionId = randomUUID();
    const key = blobKey(workspaceId, versionId);
    let stored;
    try {
      stored = await this.store.put('workspace', key, body, { contentType: contentTypeFor(path, opts.contentType), ...(opts.maxBytes ? { maxBytes: opts.maxBytes } : {}) });
    } catch (err) {
      if (err instanceof ObjectTooLargeError) throw new PayloadTooLargeError(`the upload is larger than MAX_UPLOAD_BYTES (${err.maxBytes} bytes)`);
      throw err;
    }
    const values = {
      workspace_id: workspaceId,
      path,
      version_id: versionId,
      size: stored.size,
      sha256: stored.sha256,
      content_type: contentTypeFor(path, opts.contentType),
      updated_by: opts.actor,
    };
    let replaced: ObjectRow | undefined;
    try {
      const result = await withRetry(() =>
        this.db.transaction().execute(async (trx) => {
          replaced = undefined;
          const inserted = await trx
            .insertInto('objects')
            .values(values)
            .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
            .returningAll()
            .executeTakeFirst();
          if (inserted) return { row: inserted, created: true };
          const current = await this.currentRow(trx, workspaceId, path, true);
          if (!current) throw Object.assign(new Error('object vanished during replace'), { code: '40001' });
          await this.keepAsVersion(trx, current);
          replaced = current;
          const row = await trx
            .updateTable('objects')
            .set({ ...values, updated_at: new Date() })
            .where('workspace_id', '=', workspaceId)
            .where('path', '=', path)
            .returningAll()
            .executeTakeFirstOrThrow();
          return { row, created: false };
        }),
      );
      if (replaced) await this.discard('workspace', blobKey(workspaceId, replaced.version_id));
      return { object: toObjectDto(result.row), created: result.created };
    } catch (err) {
      await this.discard('workspace', key);
      throw err;
    }
  }

  async stat(workspaceId: string, path: string): Promise<ObjectDto> {
    validateObjectPath(path);
    const row = await this.currentRow(this.db, workspaceId, path);
    if (!row) throw new NotFoundError(`no object at ${path}`);
    return toObjectDto(row);
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

  async list(workspaceId: string, prefix: string, limit: number, cursor: string | undefined) {
    validatePrefix(prefix);
    const after = decodeCursor(cursor, 1);
    let q = this.db.selectFrom('objects').selectAll().where('workspace_id', '=', workspaceId).orderBy('path').limit(limit + 1);
    if (prefix !== '') q = q.where('path', '>=', prefix).where(sql<boolean>`starts_with(path, ${prefix})`);
    if (after) q = q.where('path', '>', String(after[0]));
    const rows = await q.execute();
    return keysetPage(rows, limit, (r) => [r.path], toObjectDto);
  }

  /** Moves the object to the trash (content to the trash area, row to trash_items). */
  async remove(workspaceId: string, path: string, actor: string | null): Promise<void> {
    validateObjectPath(path);
    const trashId = randomUUID();
    let removed: ObjectRow | undefined;
    try {
      await this.db.transaction().execute(async (trx) => {
        const row = await this.currentRow(trx, workspaceId, path, true);
        if (!row) throw new NotFoundError(`no object at ${path}`);
        await this.store.copy('workspace', blobKey(workspaceId, row.version_id), 'trash', blobKey(workspaceId, trashId));
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
      await this.discard('trash', blobKey(workspaceId, trashId));
      throw err;
    }
    if (removed) await this.discard('workspace', blobKey(workspaceId, removed.version_id));
  }

  async versions(workspaceId: string, path: string): Promise<VersionDto[]> {
    validateObjectPath(path);
    const current = await this.currentRow(this.db, workspaceId, path);
    const older = await this.db
      .selectFrom('object_versions')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('path', '=', path)
      .orderBy('replaced_at', 'desc')
      .orderBy('created_at', 'desc')
      .execute();
    if (!current && older.length === 0) throw new NotFoundError(`no object or version at ${path}`);
    const list: VersionDto[] = older
      .filter((v) => v.id !== current?.version_id)
      .map((v) => ({
        version_id: v.id,
        size: Number(v.size),
        sha256: v.sha256,
        content_type: v.content_type,
        created_at: v.created_at.toISOString(),
        created_by: v.created_by,
        current: false,
      }));
    if (current) {
      list.unshift({
        version_id: current.version_id,
        size: Number(current.size),
        sha256: current.sha256,
        content_type: current.content_type,
        created_at: current.updated_at.toISOString(),
        created_by: current.updated_by,
        current: true,
      });
    }
    return list;
  }

  /** Opens one version's content: the current one, or a kept one. */
  async openVersion(workspaceId: string, path: string, versionId: string): Promise<{ version: VersionDto; body: Readable }> {
    const all = await this.versions(workspaceId, path);
    const version = all.find((v) => v.version_id === versionId);
    if (!version) throw new NotFoundError(`version ${versionId} of ${path} not found`);
    const got = await this.store.get(version.current ? 'workspace' : 'version', blobKey(workspaceId, versionId));
    if (!got) throw new NotFoundError(`the content of version ${versionId} is missing from storage`);
    return { version, body: got.body };
  }

  /** Makes a kept version current again; the current content becomes a version. */
  async restoreVersion(workspaceId: string, path: string, versionId: string, actor: string | null): Promise<ObjectDto> {
    validateObjectPath(path);
    if (!isUuid(versionId)) throw new NotFoundError(`version ${versionId} of ${path} not found`);
    const newVersionId = randomUUID();
    let replaced: ObjectRow | undefined;
    try {
      const row = await this.db.transaction().execute(async (trx) => {
        const current = await this.currentRow(trx, workspaceId, path, true);
        if (current?.version_id === versionId) return current;
        const version = await trx
          .selectFrom('object_versions')
          .selectAll()
          .where('id', '=', versionId)
          .where('workspace_id', '=', workspaceId)
          .where('path', '=', path)
          .executeTakeFirst();
        if (!version) throw new NotFoundError(`version ${versionId} of ${path} not found`);
        await this.store.copy('version', blobKey(workspaceId, versionId), 'workspace', blobKey(workspaceId, newVersionId));
        const values = {
          workspace_id: workspaceId,
          path,
          version_id: newVersionId,
          size: version.size,
          sha256: version.sha256,
          content_type: version.content_type,
          updated_by: actor,
          updated_at: new Date(),
        };
        if (current) {
          await this.keepAsVersion(trx, current);
          replaced = current;
          return trx.updateTable('objects').set(values).where('workspace_id', '=', workspaceId).where('path', '=', path).returningAll().executeTakeFirstOrThrow();
        }
        return trx.insertInto('objects').values(values).returningAll().executeTakeFirstOrThrow();
      });
      if (replaced) await this.discard('workspace', blobKey(workspaceId, replaced.version_id));
      return toObjectDto(row);
    } catch (err) {
      await this.discard('workspace', blobKey(workspaceId, newVersionId));
      throw err;
    }
  }

  async trash(workspaceId: string, limit: number, cursor: string | undefined) {
    const after = decodeCursor(cursor, 2);
    let q = this.db.selectFrom('trash_items').selectAll().where('workspace_id', '=', workspaceId).orderBy('deleted_at', 'desc').orderBy('id', 'desc').limit(limit + 1);
    if (after) {
      const [at, id] = after as [string, string];
      q = q.where((eb) => eb.or([eb('deleted_at', '<', new Date(at)), eb.and([eb('deleted_at', '=', new Date(at)), eb('id', '<', id)])]));
    }
    const rows = await q.execute();
    return keysetPage(
      rows,
      limit,
      (t) => [t.deleted_at.toISOString(), t.id],
      (t): TrashItemDto => ({ id: t.id, path: t.path, size: Number(t.size), deleted_at: t.deleted_at.toISOString(), deleted_by: t.deleted_by }),
    );
  }

  /** Puts a trashed object back at its path; 409 when a live object is there again. */
  async restoreTrash(workspaceId: string, trashId: string, actor: string | null): Promise<ObjectDto> {
    if (!isUuid(trashId)) throw new NotFoundError(`trash item ${trashId} not found`);
    const newVersionId = randomUUID();
    let restoredFrom: string | undefined;
    try {
      const row = await this.db.transaction().execute(async (trx) => {
        const item = await trx.selectFrom('trash_items').selectAll().where('id', '=', trashId).where('workspace_id', '=', workspaceId).forUpdate().executeTakeFirst();
        if (!item) throw new NotFoundError(`trash item ${trashId} not found`);
        if (await this.currentRow(trx, workspaceId, item.path, true)) {
          throw new ConflictError(`an object exists at ${item.path} again; delete or rename it first`);
        }
        await this.store.copy('trash', blobKey(workspaceId, trashId), 'workspace', blobKey(workspaceId, newVersionId));
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
      await this.discard('workspace', blobKey(workspaceId, newVersionId));
      throw err;
    }
  }

  /** Removes a trash item and its content for good. */
  async purgeTrash(workspaceId: string, trashId: string): Promise<void> {
    if (!isUuid(trashId)) throw new NotFoundError(`trash item ${trashId} not found`);
    const res = await this.db.deleteFrom('trash_items').where('id', '=', trashId).where('workspace_id', '=', workspaceId).executeTakeFirst();
    if (Number(res.numDeletedRows) === 0) throw new NotFoundError(`trash item ${trashId} not found`);
    await this.discard('trash', blobKey(workspaceId, trashId));
  }
}
