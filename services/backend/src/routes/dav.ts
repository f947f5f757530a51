import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import {
  AppError,
  BadRequestError,
  ConflictError,
  ForbiddenError,
  KeyedSlots,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  TooManyRequestsError,
  UnsupportedMediaTypeError,
  requestBody,
} from '@codeagent/service-kit';
import { InvalidPathError } from '@codeagent/storage';
import { checkWriteConditions, writeConditionsOf, type TimedObject, type WorkspaceFiles } from '@codeagent/files';
import { requireMountAccess } from '../domain/workspaces.js';
import {
  DAV_METHODS,
  DAV_REFUSED_METHODS,
  FOLDER_MARKER,
  refuseMarkerName,
  clientModTime,
  davError,
  davHref,
  isWithin,
  multistatus,
  parseDavPath,
  parseDestination,
  type DavEntry,
  type DavTarget,
} from '../domain/dav.js';
import { checkUploadHeaders, sendObject } from './data-resources.js';
import { writeStillAllowed } from './access.js';

export interface DavOptions {
  db: Kysely<DB>;
  files: WorkspaceFiles;
  maxUploadBytes: number;
}

/** Entries of one PROPFIND Depth 1 answer at most (objects and folders each). */
const LISTING_LIMIT = 10_000;
/** A PROPFIND body is read (and otherwise ignored: every answer is allprop) up to this size. */
const MAX_PROPFIND_BODY = 64 * 1024;
/**
 * Operations on many files at once (a folder's DELETE, MOVE or COPY, or one that replaces a
 * folder) one user may have under way on one backend (decision 0227): each is a loop of one
 * write per file that goes on when its client has gone, so a burst of them would keep the
 * database busy for everyone.
 */
export const DAV_FOLDER_OPERATIONS_PER_USER = 2;
/** The realm users see in their client's password prompt. */
export const DAV_REALM = 'codeagent';

const ALLOW = DAV_METHODS.join(', ');

/** Who a write is attributed to: the user, or the platform (null) for the runtime's own mount. */
function actorOf(req: FastifyRequest): string | null {
  return req.mountWorkspace !== undefined ? null : req.user.id;
}

/** Whose folder operations a request counts among: the user's, or the runtime's mount of its workspace. */
function operatorOf(req: FastifyRequest): string {
  return req.mountWorkspace !== undefined ? `mount:${req.mountWorkspace}` : `user:${req.user.id}`;
}

/** The target of the request: the raw path, decoded once per segment by the tree's own rule. */
function targetOf(req: FastifyRequest): DavTarget {
  const urlPath = req.url.split('?')[0] ?? '';
  try {
    const target = parseDavPath(urlPath);
    if (!target) throw new NotFoundError(`no route ${req.method} ${urlPath}`);
    return target;
  } catch (err) {
    if (err instanceof InvalidPathError) throw new BadRequestError(err.message, { path: err.reason });
    throw err;
  }
}

function nameOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

async function readPropfindBody(req: FastifyRequest): Promise<void> {
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > MAX_PROPFIND_BODY) throw new PayloadTooLargeError(`a PROPFIND body may have ${MAX_PROPFIND_BODY} bytes at most`);
  }
}

function hasBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * Workspace files as a WebDAV tree (DAV class 1), on the storage code of the data-resources API:
 * a PUT is a save (the replaced content becomes a version), a DELETE moves to the trash, the
 * quota and MAX_UPLOAD_BYTES hold, and roles are the same (viewers read only, non-members 404).
 * Folders are prefixes. See docs/decisions/0070-webdav-tree.md.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const davRoutes: FastifyPluginAsync<DavOptions> = async (app, { db, files, maxUploadBytes }) => {
  // Bodies reach the handlers as the untouched request stream (PUT streams it to storage).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null));
  // Mount clients ask for credentials only when challenged.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (reply.statusCode === 401) reply.header('www-authenticate', `Basic realm="${DAV_REALM}", charset="UTF-8"`);
    done(null, payload);
  });

  // A file's time is its writer's own when a mount client gave one (decision 0220).
  const entryOfObject = (workspace: string, object: TimedObject): DavEntry => ({
    href: davHref(workspace, object.path, false),
    name: nameOf(object.path),
    folder: false,
    updatedAt: object.modified_at,
    object,
  });

  /** What is at a target: the root, a folder, an object, or nothing. */
  const resolve = async (t: DavTarget): Promise<'folder' | 'object' | undefined> => (t.path === '' ? 'folder' : files.kindOf(t.workspace, t.path));

  /** The entries directly in a folder; `found` = anything at all lies under it (the marker too). */
  const folderChildren = async (t: DavTarget): Promise<{ found: boolean; entries: DavEntry[] }> => {
    const prefix = t.path === '' ? '' : `${t.path}/`;
    const { objects, folders } = await files.listFolder(t.workspace, prefix, LISTING_LIMIT);
    if (objects.length === LISTING_LIMIT || folders.length === LISTING_LIMIT) {
      app.log.warn({ workspace: t.workspace, folder: t.path, limit: LISTING_LIMIT }, 'WebDAV listing cut at the limit');
    }
    const entries = [
      ...folders.map((f) => ({ href: davHref(t.workspace, `${prefix}${f.name}`, true), name: f.name, folder: true, updatedAt: f.updated_at })),
      ...objects.filter((o) => nameOf(o.path) !== FOLDER_MARKER).map((o) => entryOfObject(t.workspace, o)),
    ];
    return { found: objects.length + folders.length > 0, entries };
  };

  const options = async (_req: FastifyRequest, reply: FastifyReply) =>
    reply.code(200).header('dav', '1').header('allow', ALLOW).header('ms-author-via', 'DAV').header('content-length', 0).send();

  const propfind = async (req: FastifyRequest, reply: FastifyReply, t: DavTarget) => {
    const depth = req.headers.depth ?? 'infinity';
    if (depth !== '0' && depth !== '1') {
      return reply.code(403).type('application/xml; charset=utf-8').send(davError('propfind-finite-depth'));
    }
    await readPropfindBody(req);
    // Depth 1 lists first: a folder with anything in it needs no second query to exist.
    const listing = depth === '1' ? await folderChildren(t) : undefined;
    const kind = t.path === '' || listing?.found ? 'folder' : await files.kindOf(t.workspace, t.path);
    if (!kind) throw new NotFoundError(`nothing at ${t.path}`);
    let entries: DavEntry[];
    if (kind === 'object') {
      entries = [entryOfObject(t.workspace, await files.statTimed(t.workspace, t.path))];
    } else {
      const children = listing?.entries ?? [];
      const newest = children.reduce((max, c) => (c.updatedAt > max ? c.updatedAt : max), '');
      const self: DavEntry = {
        href: davHref(t.workspace, t.path, true),
        name: t.path === '' ? t.workspace : nameOf(t.path),
        folder: true,
        updatedAt: newest || new Date().toISOString(),
      };
      entries = [self, ...children];
    }
    return reply.code(207).type('application/xml; charset=utf-8').send(multistatus(entries));
  };

  const get = async (req: FastifyRequest, reply: FastifyReply, t: DavTarget) => {
    const kind = await resolve(t);
    if (!kind) throw new NotFoundError(`nothing at ${t.path}`);
    if (kind === 'folder') {
      // A browser opening a folder gets its names; mount clients use PROPFIND.
      const names = (await folderChildren(t)).entries.map((e) => (e.folder ? `${e.name}/` : e.name));
      return reply
        .code(200)
        .type('text/plain; charset=utf-8')
        .send(req.method === 'HEAD' ? undefined : `${names.join('\n')}\n`);
    }
    const object = await files.stat(t.workspace, t.path);
    return sendObject(req, reply, files, t.workspace, t.path, object);
  };

  /** A file cannot also be a folder: refuse a target below an object (RFC 4918: 409). */
  const refuseUnderObject = async (t: DavTarget) => {
    const ancestor = await files.objectAncestor(t.workspace, t.path);
    if (ancestor !== undefined) throw new ConflictError(`${ancestor} is a file, not a folder`);
  };

  const put = async (req: FastifyRequest, reply: FastifyReply, t: DavTarget) => {
    if (t.path === '' || (await files.kindOf(t.workspace, t.path)) === 'folder') {
      throw new AppError(405, 'method_not_allowed', 'a folder is here: PUT stores a file');
    }
    refuseMarkerName(t.path);
    await refuseUnderObject(t);
    checkUploadHeaders(req, maxUploadBytes);
    const modifiedAt = clientModTime(req.headers['x-oc-mtime']);
    const conditions = writeConditionsOf(req.headers);
    const { object, created } = await files.put(t.workspace, t.path, requestBody(req.raw), {
      contentType: req.headers['content-type'],
      actor: actorOf(req),
      maxBytes: maxUploadBytes,
      modifiedAt,
      stillAllowed: writeStillAllowed(req, t.workspace),
      conditions,
    });
    // (ownCloud's answer that the time was kept.)
    if (modifiedAt !== undefined) reply.header('x-oc-mtime', 'accepted');
    return reply
      .code(created ? 201 : 204)
      .header('etag', `"${object.sha256}"`)
      .header('x-version-id', object.version_id)
      .send();
  };

  /** Folder operations under way, by user (decision 0227). */
  const folderOperations = new KeyedSlots(DAV_FOLDER_OPERATIONS_PER_USER);
  /**
   * Runs `work`, an operation on many files (or on one file's bytes), once the user holds one of
   * their places for such operations (429 while every place is taken). Taken before the files are
   * listed: a refused request costs a few probes of the key, not the folder's paths.
   */
  const asFolderOperation = async <T>(req: FastifyRequest, work: () => Promise<T>): Promise<T> => {
    const release = folderOperations.take(operatorOf(req));
    if (release === undefined) {
      throw new TooManyRequestsError(
        `you have ${DAV_FOLDER_OPERATIONS_PER_USER} folder operations under way already (a folder deleted or moved, or anything copied): wait until one has finished`,
        1,
      );
    }
    try {
      return await work();
    } finally {
      release();
    }
  };

  /** Moves everything at `path` (the object and what lies under it) to the trash. */
  const trashAll = async (workspace: string, paths: readonly string[], actor: string | null) => {
    for (const p of paths) {
      try {
        await files.remove(workspace, p, actor);
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err; // removed meanwhile: what we wanted
      }
    }
  };

  const remove = async (req: FastifyRequest, reply: FastifyReply, t: DavTarget) => {
    if (t.path === '') throw new ForbiddenError('the workspace root cannot be deleted; delete the files and folders in it');
    const kind = await files.kindOf(t.workspace, t.path);
    if (!kind) throw new NotFoundError(`nothing at ${t.path}`);
    const conditions = writeConditionsOf(req.headers);
    if (kind === 'object' && conditions !== undefined) {
      // Checked under the object's lock as it goes to the trash (decision 0262).
      await files.remove(t.workspace, t.path, actorOf(req), conditions);
      return reply.code(204).send();
    }
    // A folder has no entity tag: `If-Match: *` holds, a list of tags does not.
    checkWriteConditions({ sha256: undefined }, conditions, t.path);
    const trash = async () => {
      const paths = await files.pathsAt(t.workspace, t.path);
      if (paths.length === 0) throw new NotFoundError(`nothing at ${t.path}`);
      await trashAll(t.workspace, paths, actorOf(req));
    };
    await (kind === 'folder' ? asFolderOperation(req, trash) : trash());
    return reply.code(204).send();
  };

  const mkcol = async (req: FastifyRequest, reply: FastifyReply, t: DavTarget) => {
    if (hasBody(req)) throw new UnsupportedMediaTypeError('MKCOL takes no body');
    if (t.path === '' || (await files.kindOf(t.workspace, t.path)) !== undefined) {
      throw new AppError(405, 'method_not_allowed', `${t.path || 'the root'} exists already`);
    }
    await refuseUnderObject(t);
    await files.put(t.workspace, `${t.path}/${FOLDER_MARKER}`, Readable.from([]), { actor: actorOf(req) });
    return reply.code(201).send();
  };

  const copyOrMove = async (req: FastifyRequest, reply: FastifyReply, source: DavTarget) => {
    const move = req.method === 'MOVE';
    let dest: DavTarget | 'malformed' | 'other_server';
    try {
      dest = parseDestination([req.headers.destination].flat()[0], req.host);
    } catch (err) {
      if (err instanceof InvalidPathError) throw new BadRequestError(`Destination: ${err.message}`, { destination: err.reason });
      throw err;
    }
    if (dest === 'malformed')
      throw new BadRequestError('send a Destination header with the URL of the new place in this tree', { destination: 'missing or malformed' });
    if (dest === 'other_server') throw new AppError(502, 'bad_gateway', 'the Destination names another server; copy through your client instead');
    if (dest.workspace !== source.workspace) {
      throw new ForbiddenError('the Destination is in another workspace; copy or move within one workspace (download and upload to cross workspaces)');
    }
    const overwriteHeader = req.headers.overwrite ?? 'T';
    if (overwriteHeader !== 'T' && overwriteHeader !== 'F') throw new BadRequestError('Overwrite is T or F', { overwrite: 'must be T or F' });
    const overwrite = overwriteHeader === 'T';
    if (source.path === '' || dest.path === '') throw new ForbiddenError('the workspace root cannot be copied, moved or replaced');
    if (isWithin(dest.path, source.path) || isWithin(source.path, dest.path)) {
      throw new ForbiddenError('the source and the Destination are the same or one lies inside the other');
    }
    refuseMarkerName(dest.path);
    const kind = await files.kindOf(source.workspace, source.path);
    if (!kind) throw new NotFoundError(`nothing at ${source.path}`);
    // The conditions are the request's, about its own URL: the source (RFC 9110 §13, RFC 4918).
    // Checked before anything changes (not under the write's lock, as PUT's and DELETE's are).
    const conditions = writeConditionsOf(req.headers);
    if (conditions !== undefined)
      checkWriteConditions(kind === 'object' ? await files.stat(source.workspace, source.path) : { sha256: undefined }, conditions, source.path);
    await refuseUnderObject(dest);
    // A folder moved or deleted, or anything copied (a copy reads and writes every byte), holds
    // one of the user's places (decision 0227); a file moved onto a file does not.
    const many = !move || kind === 'folder' || (await files.kindOf(dest.workspace, dest.path)) === 'folder';
    const stillAllowed = writeStillAllowed(req, dest.workspace);
    const work = async () => {
      const existing = await files.pathsAt(dest.workspace, dest.path);
      if (existing.length > 0 && !overwrite) {
        throw new PreconditionFailedError(`${dest.path} exists and Overwrite is F`);
      }
      // A folder COPY with Depth 0 copies the folder alone (an empty folder).
      const depth = req.headers.depth ?? 'infinity';
      const sources = kind === 'folder' && !move && depth === '0' ? [] : await files.pathsAt(source.workspace, source.path);
      const targetOf = (p: string) => `${dest.path}${p.slice(source.path.length)}`;
      const targets = new Set(sources.map(targetOf));
      // A copy that cannot fit is refused before the Destination is emptied (a 507 after it had
      // left the Destination's files in the trash, though it said nothing was written).
      if (!move && sources.length > 0) await files.assertRoom(dest.workspace, await files.sizeAt(source.workspace, source.path));
      // What the Destination held and the source does not replace goes to the trash (RFC 4918:
      // the Destination is deleted first); what it replaces becomes a version, as a save does.
      const trashed = existing.filter((p) => !targets.has(p));
      await trashAll(dest.workspace, trashed, actorOf(req));
      let done = 0;
      try {
        for (const p of sources) {
          if (move) {
            await files.rename(source.workspace, p, targetOf(p), actorOf(req), stillAllowed);
          } else {
            const { object, body } = await files.open(source.workspace, p);
            try {
              // (Each file asks again: a member removed while a large folder copies stops it.)
              await files.put(dest.workspace, targetOf(p), body, { contentType: object.content_type, actor: actorOf(req), stillAllowed });
            } finally {
              body.destroy();
            }
          }
          done++;
        }
      } catch (err) {
        // Stopped part way (the quota reached by a write that raced this one, a member removed):
        // the answer says what did change, not the single write's "nothing was written".
        if (err instanceof AppError && (done > 0 || trashed.length > 0)) {
          const changed = [
            ...(done > 0 ? [`${done} of ${sources.length} files were ${move ? 'moved' : 'copied'}`] : []),
            ...(trashed.length > 0 ? [`what the Destination held (${trashed.length} files) is in the trash, where it can be restored`] : []),
          ];
          const note = `The ${move ? 'move' : 'copy'} stopped part way (${changed.join(', and ')})`;
          err.message = err.message.includes('Nothing was written')
            ? err.message.replace('Nothing was written', note)
            : `${err.message.replace(/\.?$/, '')}. ${note}`;
        }
        throw err;
      }
      if (sources.length === 0 && kind === 'folder') {
        await files.put(dest.workspace, `${dest.path}/${FOLDER_MARKER}`, Readable.from([]), { actor: actorOf(req) });
      }
      return existing.length > 0;
    };
    const replaced = await (many ? asFolderOperation(req, work) : work());
    return reply.code(replaced ? 204 : 201).send();
  };

  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const t = targetOf(req);
    if ((DAV_REFUSED_METHODS as readonly string[]).includes(req.method)) {
      reply.header('allow', ALLOW);
      throw new AppError(405, 'method_not_allowed', `${req.method} is not offered: the tree has no locks and no dead properties (DAV class 1); use ${ALLOW}`);
    }
    const write = !['OPTIONS', 'PROPFIND', 'GET', 'HEAD'].includes(req.method);
    if (req.mountWorkspace !== undefined) await requireMountAccess(db, t.workspace, req.mountWorkspace);
    else await app.requireWorkspaceAccess(req.user.id, t.workspace, write ? 'write' : 'read');
    switch (req.method) {
      case 'OPTIONS':
        return options(req, reply);
      case 'PROPFIND':
        return propfind(req, reply, t);
      case 'GET':
      case 'HEAD':
        return get(req, reply, t);
      case 'PUT':
        return put(req, reply, t);
      case 'DELETE':
        return remove(req, reply, t);
      case 'MKCOL':
        return mkcol(req, reply, t);
      default:
        return copyOrMove(req, reply, t);
    }
  };

  const route = {
    method: [...DAV_METHODS, ...DAV_REFUSED_METHODS],
    handler,
    exposeHeadRoute: false,
    schema: { hide: true },
    config: { access: 'dav' as const },
  };
  app.route({ ...route, url: '/:ws' });
  app.route({ ...route, url: '/:ws/*' });
};
