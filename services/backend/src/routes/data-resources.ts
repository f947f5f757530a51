import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import {
  AppError,
  BadRequestError,
  isOutOfSpace,
  KeyedSlots,
  ListQuery,
  PayloadTooLargeError,
  RangeNotSatisfiableError,
  TooManyRequestsError,
  UnsupportedMediaTypeError,
  listResponse,
  requestBody,
} from '@codeagent/service-kit';
import { InvalidPathError, validateObjectPath, type ByteRange } from '@codeagent/storage';
import {
  ListedFolderSchema,
  ObjectSchema,
  TrashItemSchema,
  VersionSchema,
  entityTag,
  noneMatchHits,
  writeConditionsOf,
  type ObjectDto,
  type WorkspaceFiles,
} from '@codeagent/files';
import { errors } from './schemas.js';
import { objectContentHeaders, refuseAsCode } from './object-headers.js';
import { writeStillAllowed } from './access.js';
import { refuseMarkerName } from '../domain/dav.js';

export interface DataResourcesOptions {
  db: Kysely<DB>;
  files: WorkspaceFiles;
  maxUploadBytes: number;
}

const WsPath = Type.Object({ ws: Type.String({ maxLength: 64 }), '*': Type.String() });
const Ws = Type.Object({ ws: Type.String({ maxLength: 64 }) });
const WsId = Type.Object({ ws: Type.String({ maxLength: 64 }), id: Type.String({ maxLength: 64 }) });

/** The wildcard segment, checked by the one path rule; a violation is a 400 naming the rule. */
function pathOf(params: { '*': string }): string {
  try {
    return validateObjectPath(params['*']);
  } catch (err) {
    if (err instanceof InvalidPathError) throw new BadRequestError(err.message, { path: err.reason });
    throw err;
  }
}

/** Parses a single-range `Range` header against `size`; undefined = whole object, 'unsatisfiable' = 416. */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined; // malformed or multi-range: ignore (RFC 9110)
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

/**
 * An object's answer to GET and HEAD (docs/contract/spec.md §4.3), the same for the API and
 * WebDAV: its headers, then the checks in the order RFC 9110 §13.2.2 gives them:
 * `If-None-Match` (304) before `Range` (206, or 416 when the range lies outside the object).
 * HEAD answers the whole object's headers (a `Range` is for the body).
 */
/**
 * Downloads of stored content that one user (or one workspace's mount) has under way at once.
 * Each holds a connection from the gateway to the backend (and a store stream) for as long as
 * its client reads: a viewer reading a hundred large files at a trickle held every connection of
 * the gateway's pool, and everyone's API waited behind them.
 */
export const DOWNLOADS_PER_USER = 16;
/**
 * Only larger downloads count: a smaller answer fits in the sockets' buffers on its way, so it
 * frees its connection at once whoever reads it, and parallel reads of small files stay free.
 */
export const COUNTED_DOWNLOAD_BYTES = 1024 * 1024;
const downloads = new KeyedSlots(DOWNLOADS_PER_USER);

export async function sendObject(req: FastifyRequest, reply: FastifyReply, files: WorkspaceFiles, workspace: string, path: string, object: ObjectDto) {
  refuseAsCode(req.headers);
  objectHeaders(reply, object);
  if (noneMatchHits(req.headers['if-none-match'], object.sha256)) return reply.code(304).send();
  if (req.method === 'HEAD') return reply.header('content-length', object.size).send();
  const range = parseRange(req.headers.range, object.size);
  if (range === 'unsatisfiable') throw new RangeNotSatisfiableError(object.size);
  const length = range ? range.end - range.start + 1 : object.size;
  const release =
    length > COUNTED_DOWNLOAD_BYTES
      ? downloads.take(req.mountWorkspace !== undefined ? `mount:${req.mountWorkspace}` : `user:${req.user.id}`)
      : () => undefined;
  if (release === undefined) throw new TooManyRequestsError(`you have ${DOWNLOADS_PER_USER} large downloads under way already: wait until one has ended`);
  reply.raw.once('close', release);
  // (A client gone while the request waited for the database closed the response already: no
  // 'close' comes any more.)
  if (reply.raw.closed) release();
  let opened;
  try {
    opened = await files.open(workspace, path, range);
  } catch (err) {
    release();
    throw err;
  }
  if (range) {
    reply
      .code(206)
      .header('content-range', `bytes ${range.start}-${range.end}/${object.size}`)
      .header('content-length', range.end - range.start + 1);
  } else {
    reply.header('content-length', object.size);
  }
  return reply.send(opened.body);
}

export function objectHeaders(reply: FastifyReply, object: ObjectDto): void {
  reply.header('etag', entityTag(object.sha256));
  reply.header('last-modified', new Date(object.updated_at).toUTCString());
  reply.header('accept-ranges', 'bytes');
  reply.header('x-version-id', object.version_id);
  reply.headers(objectContentHeaders(object.path, object.content_type));
}

/**
 * Checks an upload's headers before reading a byte of its body: a declared body over the limit
 * (413), and a content coding (`Content-Encoding: gzip`), which the store would keep as the
 * object's bytes, still encoded, while the client meant the decoded content (415, RFC 9110
 * §15.5.16: answered with `Accept-Encoding: identity`).
 */
export function checkUploadHeaders(req: FastifyRequest, max: number): void {
  const coding = req.headers['content-encoding']?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    const refused = new UnsupportedMediaTypeError(`uploads are stored as sent, so they take no Content-Encoding (${coding}); send the content itself`);
    refused.headers['accept-encoding'] = 'identity';
    throw refused;
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) {
    throw new PayloadTooLargeError(`the upload is ${declared} bytes; MAX_UPLOAD_BYTES is ${max}`);
  }
}

/**
 * A form the multipart parser gave up on: 400 naming what it said. The parser's own refusals
 * (limits 413, a part name that would pollute a prototype 400) carry their status and keep it.
 */
function malformedForm(err: unknown): never {
  // (A full disk fails the file's stream too: the server's fault, answered 507 by the service-kit.)
  if (typeof (err as { statusCode?: unknown }).statusCode === 'number' || isOutOfSpace(err)) throw err;
  const said = err instanceof Error ? err.message : String(err);
  throw new BadRequestError(`the body is not a whole multipart/form-data form (${said}); send a field \`path\` and then a field \`file\``, {
    file: 'malformed form',
  });
}

/**
 * Data resources (docs/contract/spec.md §4.3). Content streams from the request to storage and from storage to
 * the response, never whole in memory.
 */
export const dataResourcesRoutes: FastifyPluginAsyncTypebox<DataResourcesOptions> = async (app, { files, maxUploadBytes }) => {
  const tags = ['data-resources'];

  // Raw uploads: every content type reaches the handler as the untouched request stream.
  // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
  await app.register(async (instance) => {
    const raw = instance.withTypeProvider<TypeBoxTypeProvider>();
    // The handler reads the request stream itself: no parser may consume it first.
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_req, _payload, done) => done(null));
    raw.put(
      '/:ws/objects/*',
      {
        config: { access: 'workspace-editor' },
        schema: {
          tags,
          summary: 'Store the raw request body at the path (201 new, 200 replaced; the replaced content becomes a version)',
          params: WsPath,
          response: { 200: ObjectSchema, 201: ObjectSchema, ...errors(400, 401, 403, 404, 409, 412, 413, 415, 429) },
        },
      },
      async (req, reply) => {
        const path = pathOf(req.params);
        refuseMarkerName(path);
        checkUploadHeaders(req, maxUploadBytes);
        // (Before the body is taken: a malformed condition is refused unread.)
        const conditions = writeConditionsOf(req.headers);
        const { object, created } = await files.put(req.params.ws, path, requestBody(req.raw), {
          contentType: req.headers['content-type'],
          actor: req.user.id,
          maxBytes: maxUploadBytes,
          stillAllowed: writeStillAllowed(req, req.params.ws),
          conditions,
        });
        return reply.code(created ? 201 : 200).send(object);
      },
    );
  });

  await app.register(async (instance) => {
    const form = instance.withTypeProvider<TypeBoxTypeProvider>();
    // One byte over the limit reaches the store, whose count refuses it before anything is
    // recorded: at `fileSize` itself busboy ends the file's stream as if it were whole (only
    // `truncated` says otherwise), and the cut-off content would replace the file.
    await form.register(multipart, { limits: { fileSize: maxUploadBytes + 1, files: 1, fields: 5 } });
    form.post(
      '/:ws/uploads',
      {
        config: { access: 'workspace-editor' },
        schema: {
          tags,
          summary: 'Upload a file as multipart/form-data: field `path`, then field `file`',
          params: Ws,
          consumes: ['multipart/form-data'],
          response: { 201: ObjectSchema, ...errors(400, 401, 403, 404, 409, 412, 413, 415, 429) },
        },
      },
      async (req, reply) => {
        checkUploadHeaders(req, maxUploadBytes + 64 * 1024);
        const conditions = writeConditionsOf(req.headers);
        if (!req.isMultipart()) throw new BadRequestError('send multipart/form-data with a field `path` and then a field `file`', { file: 'missing' });
        let path: string | undefined;
        const parts = req.parts();
        for (;;) {
          const next = await parts.next().catch(malformedForm);
          if (next.done) break;
          const part = next.value;
          if (part.type === 'field') {
            if (part.fieldname === 'path') path = String(part.value);
            continue;
          }
          if (part.fieldname !== 'file') {
            part.file.resume();
            continue;
          }
          if (path === undefined) throw new BadRequestError('the field `path` must come before the field `file`', { path: 'missing before file' });
          const target = pathOf({ '*': path });
          refuseMarkerName(target);
          // The parser fails the file's stream when the form breaks off inside it (a last boundary
          // missing): the client's fault, whatever the store makes of it. A refusal of the files'
          // own (too large, over the quota) fails that stream too, and is the answer.
          let broken: unknown;
          part.file.once('error', (err) => (broken = err));
          let stored: Awaited<ReturnType<WorkspaceFiles['put']>>;
          try {
            stored = await files.put(req.params.ws, target, part.file, {
              contentType: part.mimetype,
              actor: req.user.id,
              maxBytes: maxUploadBytes,
              stillAllowed: writeStillAllowed(req, req.params.ws),
              conditions,
            });
          } catch (err) {
            if (broken === undefined || err instanceof AppError) throw err;
            malformedForm(broken);
          }
          return reply.code(201).send(stored.object);
        }
        throw new BadRequestError('no field `file` in the form', { file: 'missing' });
      },
    );
  });

  app.get(
    '/:ws/objects/*',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags,
        summary: 'Read an object (Range → 206)',
        params: WsPath,
        headers: Type.Object({ range: Type.Optional(Type.String()), 'if-none-match': Type.Optional(Type.String()) }),
      },
      exposeHeadRoute: false,
    },
    async (req, reply) => {
      const path = pathOf(req.params);
      return sendObject(req, reply, files, req.params.ws, path, await files.stat(req.params.ws, path));
    },
  );

  app.head(
    '/:ws/objects/*',
    { config: { access: 'workspace-viewer' }, schema: { tags, summary: 'Headers of an object', params: WsPath } },
    async (req, reply) => {
      const path = pathOf(req.params);
      return sendObject(req, reply, files, req.params.ws, path, await files.stat(req.params.ws, path));
    },
  );

  app.get(
    '/:ws/objects',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags,
        summary: 'List objects by prefix',
        description:
          "With `delimiter=/` (decision 0199), a page lists what lies directly under the prefix: the objects whose path has no `/` after it in `items`, and for the others one entry per folder in `folders` (the prefix up to that `/`, as S3's common prefixes) with the number of objects under it; `limit` counts both. With `kind=notebook` (decision 0203), only the notebooks: objects named `*.ipynb` outside the `.runs/` folders where runs keep their executed copies (not with `delimiter`).",
        params: Ws,
        querystring: Type.Composite([
          ListQuery,
          Type.Object({
            prefix: Type.Optional(Type.String({ maxLength: 1024 })),
            delimiter: Type.Optional(Type.Literal('/')),
            kind: Type.Optional(Type.Literal('notebook')),
          }),
        ]),
        response: {
          200: Type.Composite([listResponse(ObjectSchema), Type.Object({ folders: Type.Optional(Type.Array(ListedFolderSchema)) })]),
          ...errors(400, 401, 404),
        },
      },
    },
    async (req) => {
      const { ws } = req.params;
      const { prefix = '', limit = 100, cursor, kind } = req.query;
      if (kind !== undefined && req.query.delimiter !== undefined)
        throw new BadRequestError('kind=notebook lists notebooks anywhere under the prefix: it does not take delimiter', { kind: 'not with delimiter' });
      try {
        return req.query.delimiter === undefined
          ? await files.list(ws, prefix, limit, cursor, { notebooks: kind === 'notebook' })
          : await files.listByFolder(ws, prefix, limit, cursor);
      } catch (err) {
        if (err instanceof InvalidPathError) throw new BadRequestError(err.message, { prefix: err.reason });
        throw err;
      }
    },
  );

  app.delete(
    '/:ws/objects/*',
    {
      config: { access: 'workspace-editor' },
      schema: { tags, summary: 'Move an object to the trash', params: WsPath, response: { 204: Type.Null(), ...errors(400, 401, 403, 404, 412) } },
    },
    async (req, reply) => {
      const path = pathOf(req.params);
      await files.remove(req.params.ws, path, req.user.id, writeConditionsOf(req.headers));
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/:ws/versions/*',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags,
        summary: 'List the versions of a path, newest first (the current content first), in pages; with version_id, that version’s content',
        params: WsPath,
        querystring: Type.Object({ ...ListQuery.properties, version_id: Type.Optional(Type.String({ maxLength: 64 })) }),
        response: {
          // The list is JSON; with version_id the 200 is that version's raw content in its own content type
          // (a stream: Fastify sends it past the serializer, whatever its content type).
          200: {
            content: {
              'application/json': { schema: listResponse(VersionSchema) },
              '*/*': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary', description: 'with version_id: that version’s content' }) },
            },
          },
          ...errors(400, 401, 404),
        },
      },
    },
    async (req, reply) => {
      const path = pathOf(req.params);
      // A path keeps a version per save, without bound: paged like every list (limit, cursor).
      if (req.query.version_id === undefined) return files.versions(req.params.ws, path, req.query.limit, req.query.cursor);
      refuseAsCode(req.headers);
      const { version, body } = await files.openVersion(req.params.ws, path, req.query.version_id);
      reply
        .header('etag', entityTag(version.sha256))
        .header('content-length', version.size)
        .header('x-version-id', version.version_id)
        .headers(objectContentHeaders(path, version.content_type));
      return reply.send(body);
    },
  );

  app.post(
    '/:ws/versions/*',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Restore a version (POST …/versions/{path}/restore); the current content becomes a version',
        params: WsPath,
        body: Type.Object({ version_id: Type.String({ maxLength: 64 }) }, { additionalProperties: false }),
        response: { 200: ObjectSchema, ...errors(400, 401, 403, 404, 409, 412) },
      },
    },
    async (req) => {
      const raw = req.params['*'];
      if (!raw.endsWith('/restore')) throw new BadRequestError('POST …/versions/{path}/restore restores a version', { path: 'must end with /restore' });
      const path = pathOf({ '*': raw.slice(0, -'/restore'.length) });
      return files.restoreVersion(req.params.ws, path, req.body.version_id, req.user.id, writeConditionsOf(req.headers));
    },
  );

  app.get(
    '/:ws/trash',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags,
        summary: 'List the trash, newest first',
        params: Ws,
        querystring: ListQuery,
        response: { 200: listResponse(TrashItemSchema), ...errors(400, 401, 404) },
      },
    },
    async (req) => {
      return files.trash(req.params.ws, req.query.limit ?? 100, req.query.cursor);
    },
  );

  app.post(
    '/:ws/trash/:id/restore',
    {
      config: { access: 'workspace-editor' },
      schema: {
        tags,
        summary: 'Restore a trashed object to its path (409 if the path is live, or a folder now, or below a file)',
        params: WsId,
        response: { 200: ObjectSchema, ...errors(401, 403, 404, 409) },
      },
    },
    async (req) => {
      return files.restoreTrash(req.params.ws, req.params.id, req.user.id);
    },
  );

  app.delete(
    '/:ws/trash/:id',
    {
      config: { access: 'workspace-editor' },
      schema: { tags, summary: 'Purge a trash item for good', params: WsId, response: { 204: Type.Null(), ...errors(401, 403, 404) } },
    },
    async (req, reply) => {
      await files.purgeTrash(req.params.ws, req.params.id);
      return reply.code(204).send(null);
    },
  );
};
