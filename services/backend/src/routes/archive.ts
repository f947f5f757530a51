import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { PassThrough, Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ZipFile } from '../zip.js';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { BadRequestError, KeyedSlots, NotFoundError, TooManyRequestsError } from '@codeagent/service-kit';
import { InvalidPathError, mediaTypeOf, validatePrefix } from '@codeagent/storage';
import type { ObjectDto, WorkspaceFiles } from '@codeagent/files';
import { FOLDER_MARKER } from '../domain/dav.js';
import { getWorkspace } from '../domain/workspaces.js';
import { contentDisposition } from './object-headers.js';
import { errors } from './schemas.js';

export interface ArchiveRoutesOptions {
  db: Kysely<DB>;
  files: WorkspaceFiles;
}

/** The most files one archive holds (decision 0226): a larger folder is downloaded in parts, or over WebDAV. */
export const ARCHIVE_MAX_FILES = 10_000;
/** Archives one user may be downloading from one backend at once. */
export const ARCHIVES_PER_USER = 2;

/**
 * zlib's fastest level (decision 0228; nginx's gzip default too): varied CSV deflates at about
 * 70 MB/s to 35 % of its size here, against 23 MB/s to 31 % at zlib's default 6, which would make
 * the archive, not the network, what a member waits for, and hold a core per download meanwhile.
 */
const DEFLATE_LEVEL = 1;

/** Content worth deflating (text compresses several times over); the rest is stored as it is. */
function compressible(contentType: string): boolean {
  const type = mediaTypeOf(contentType) ?? '';
  return type.startsWith('text/') || /[/+](json|xml|csv|x-ipynb\+json|javascript|x-yaml|yaml|sql)$/.test(type) || type === 'image/svg+xml';
}

/**
 * A name inside the archive: the path below the folder, with a first segment that an unzip on
 * Windows would read as a drive (`C:`) made plain (`C_`); yazl refuses such names, and the
 * platform's path rule already keeps out `..`, backslashes and leading slashes.
 */
export function entryName(relative: string): string {
  return relative.replace(/^([A-Za-z]):/, '$1_');
}

const Ws = Type.Object({ ws: Type.String({ maxLength: 64 }) });

/**
 * A folder of a workspace, or the whole workspace, as one zip file (decision 0226): streamed as
 * it is made, each file read once from storage (the version listed when the download began), text
 * deflated, the rest stored; empty folders kept. Any member may download what they may read.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const archiveRoutes: FastifyPluginAsyncTypebox<ArchiveRoutesOptions> = async (app, { db, files }) => {
  /** Archives under way, by user. */
  const running = new KeyedSlots(ARCHIVES_PER_USER);

  /** The folder a request names: `prefix` with its closing `/` (empty: the whole workspace); 400 for a bad one. */
  const folderOf = (given: string | undefined): string => {
    const prefix = given === undefined || given === '' || given.endsWith('/') ? (given ?? '') : `${given}/`;
    try {
      validatePrefix(prefix);
    } catch (err) {
      if (err instanceof InvalidPathError) throw new BadRequestError(err.message, { prefix: err.reason });
      throw err;
    }
    return prefix;
  };

  /**
   * What the folder holds now (pages of 1 000, in path order, at most one file past the limit)
   * and the archive's name; 404 for no files, 400 for more than ARCHIVE_MAX_FILES.
   */
  const contentsOf = async (ws: string, prefix: string): Promise<{ objects: ObjectDto[]; name: string }> => {
    const objects: ObjectDto[] = [];
    let cursor: string | undefined;
    do {
      const page = await files.list(ws, prefix, 1000, cursor);
      objects.push(...page.items);
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined && objects.length <= ARCHIVE_MAX_FILES);
    if (objects.length === 0) throw new NotFoundError(prefix === '' ? 'the workspace holds no files' : `no files under ${prefix}`);
    if (objects.length > ARCHIVE_MAX_FILES) {
      throw new BadRequestError(
        `${prefix || 'the workspace'} holds more than ${ARCHIVE_MAX_FILES} files: download its sub-folders one by one, or copy it over WebDAV (rclone)`,
        { prefix: `more than ${ARCHIVE_MAX_FILES} files` },
      );
    }
    const name = prefix === '' ? (await getWorkspace(db, ws)).name : prefix.slice(0, -1).split('/').pop()!;
    return { objects, name };
  };

  const busy = () => new TooManyRequestsError(`you are downloading ${ARCHIVES_PER_USER} folders already: wait until one has finished`);
  const zipHeaders = (reply: FastifyReply, name: string) =>
    reply
      .header('content-type', 'application/zip')
      .header('content-disposition', contentDisposition('attachment', `${name}.zip`))
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'private, no-cache');

  const querystring = Type.Object({ prefix: Type.Optional(Type.String({ maxLength: 1024 })) });

  // What a GET would answer, without making the archive (the web app asks before it downloads, so
  // that a refusal is said on the page instead of saved as a file): no place is taken.
  app.head(
    '/:ws/archive',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags: ['data-resources'],
        summary: 'Whether a folder can be downloaded as a zip now: the status and headers of the GET, no archive made',
        params: Ws,
        querystring,
        response: { 200: Type.Null({ description: 'the GET would send the zip' }), ...errors(400, 401, 404, 429) },
      },
    },
    async (req, reply) => {
      const prefix = folderOf(req.query.prefix);
      if (running.inUse(req.user.id) >= ARCHIVES_PER_USER) throw busy();
      const { name } = await contentsOf(req.params.ws, prefix);
      return zipHeaders(reply, name).send();
    },
  );

  app.get(
    '/:ws/archive',
    {
      config: { access: 'workspace-viewer' },
      schema: {
        tags: ['data-resources'],
        summary: `Download a folder (\`prefix\`, e.g. \`reports/\`; empty: the whole workspace) as a zip file, streamed; at most ${ARCHIVE_MAX_FILES} files`,
        params: Ws,
        querystring,
        response: {
          // (A stream: Fastify sends it past the serializer.)
          200: { content: { 'application/zip': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary', description: 'the zip file' }) } } },
          ...errors(400, 401, 404, 429),
        },
      },
      // (The HEAD above is its own: Fastify's would run this handler and start an archive nobody reads.)
      exposeHeadRoute: false,
    },
    async (req, reply) => {
      const ws = req.params.ws;
      const prefix = folderOf(req.query.prefix);
      // The place is taken before anything is awaited: requests sent together cannot all pass the check.
      const release = running.take(req.user.id);
      if (release === undefined) throw busy();

      let objects: ObjectDto[];
      let name: string;
      try {
        ({ objects, name } = await contentsOf(ws, prefix));
      } catch (err) {
        release();
        throw err;
      }

      const zip = new ZipFile();
      // (yazl's output is a PassThrough; its types say only "a readable stream".)
      const output = zip.outputStream as PassThrough;
      /** The file being read into the archive: closed with it when the download ends early. */
      let reading: Readable | undefined;
      /** Ends the archive early (a failure, or the client gone): the file being read and the output close. */
      const stop = (err?: Error) => {
        reading?.destroy();
        if (!output.readableEnded) output.destroy(err);
        release();
      };
      zip.on('error', (err: Error) => {
        req.log.warn({ err, workspace_id: ws, prefix }, 'the archive broke off');
        stop(err);
      });
      reply.raw.once('close', () => stop());
      for (const o of objects) {
        const relative = entryName(o.path.slice(prefix.length));
        if (relative === FOLDER_MARKER || relative.endsWith(`/${FOLDER_MARKER}`)) {
          const folder = relative.slice(0, -FOLDER_MARKER.length);
          if (folder !== '') zip.addEmptyDirectory(folder, { mtime: new Date(o.updated_at) });
          continue;
        }
        zip.addReadStreamLazy(
          relative,
          { size: o.size, mtime: new Date(o.updated_at), compressionLevel: compressible(o.content_type) ? DEFLATE_LEVEL : 0 },
          (done) => {
            // The version listed: a file saved again meanwhile is the content the listing named.
            files.openVersion(ws, o.path, o.version_id).then(
              ({ body }) => {
                reading = body;
                // (yazl pipes the stream and leaves its errors alone: a storage failure ends the archive.)
                body.once('error', (err: Error) => zip.emit('error', err));
                done(null, body);
              },
              // (Gone since the listing, say: the archive ends there; the download fails rather than lack a file unsaid.)
              (err: unknown) => done(err instanceof Error ? err : new Error(String(err)), undefined as unknown as Readable),
            );
          },
        );
      }
      zip.end();
      output.once('end', release);
      return zipHeaders(reply, name).send(output);
    },
  );
};
