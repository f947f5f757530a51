import type { FastifyInstance, FastifyReply } from 'fastify';
import { BadRequestError, PayloadTooLargeError, internalTokenHook, requestBody } from '@codeagent/service-kit';
import { InvalidPathError, ObjectTooLargeError, isArea, validateObjectPath, type ObjectStore } from '@codeagent/storage';

export interface InternalRoutesOptions {
  store: ObjectStore;
  internalServiceToken: string;
  maxUploadBytes: number;
}

const notFound = async (_req: unknown, reply: FastifyReply) => reply.code(404).send({ error: 'not_found' });

/**
 * `/internal/v1` (docs/contract/spec.md §5.1): exactly one route, `POST /internal/v1/objects`, guarded by
 * `X-Internal-Service-Token`. Every other path and every other method answers 404, with or
 * without a token (so the removed routes reveal nothing). The gateway never routes here.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export async function internalRoutes(app: FastifyInstance, opts: InternalRoutesOptions): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null));

  app.post('/objects', { onRequest: internalTokenHook(opts.internalServiceToken) }, async (req, reply) => {
    const { area, key } = req.query as { area?: unknown; key?: unknown };
    if (!isArea(area)) throw new BadRequestError('area must be one of workspace, version, run_log, trash', { area: 'unknown area' });
    try {
      validateObjectPath(key);
    } catch (err) {
      if (err instanceof InvalidPathError) throw new BadRequestError(err.message, { key: err.reason });
      throw err;
    }
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > opts.maxUploadBytes)
      throw new PayloadTooLargeError(`the body is larger than MAX_UPLOAD_BYTES (${opts.maxUploadBytes} bytes)`);
    try {
      const stored = await opts.store.put(area, key as string, requestBody(req.raw), {
        maxBytes: opts.maxUploadBytes,
        ...(req.headers['content-type'] ? { contentType: req.headers['content-type'] } : {}),
      });
      return reply.code(201).send({ area, key, size: stored.size, sha256: stored.sha256 });
    } catch (err) {
      if (err instanceof ObjectTooLargeError) throw new PayloadTooLargeError(`the body is larger than MAX_UPLOAD_BYTES (${opts.maxUploadBytes} bytes)`);
      throw err;
    }
  });
  // Any other method on /objects, and anything else under /internal/v1: 404, never 405.
  app.route({ method: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'], url: '/objects', handler: notFound });
  app.all('/', notFound);
  app.all('/*', notFound);
}
