import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay from 'find-my-way';
import { lingerOnEarlyAnswers } from './linger.js';
import { HashingBusyError } from '@codeagent/auth';
import { AppError, BadRequestError, isOutOfSpace } from './errors.js';
import { MAX_JSON_DEPTH, ambiguousPathReason, jsonTextExceedsDepth } from './request-guards.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** PostgreSQL's codes for a U+0000 in text (22021, invalid byte sequence) and in jsonb (22P05, unsupported escape). */
const NUL_REFUSED = new Set(['22021', '22P05']);
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** A request's id: the caller's well-formed `x-request-id`, else a new one. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Fastify options for request ids (`requestIdOf`). */
export function requestIdOptions(): Pick<FastifyServerOptions, 'genReqId' | 'requestIdHeader'> {
  return { requestIdHeader: false, genReqId: requestIdOf };
}

export interface ServiceKitOptions {
  /** Extra fields added to 404 bodies (none by default). */
  notFoundBody?: Record<string, unknown>;
  /**
   * The `error` of a schema violation's 400 (default `invalid_request`, docs/contract/spec.md §3); the cluster
   * service answers §8's `validation failed` for its schemas as for its own body rules.
   */
  validationError?: string;
  /**
   * Whether JSON bodies are parsed here, their depth checked first (default true); false for the
   * gateway, which passes every body on unread (its proxy routes bring their own parsers).
   */
  parseJson?: boolean;
}

/** A value a schema allows, as a person would type it. */
function allowedText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * One message per field of a failed schema validation. A field limited to fixed values (a union
 * of literals, which ajv reports as one `const` error per branch and an `anyOf`, or an `enum`)
 * says which: "must be one of viewer, editor, admin".
 */
export function validationFields(err: Pick<FastifyError, 'validation' | 'validationContext'>): Record<string, string> {
  const fields: Record<string, string> = {};
  const allowed = new Map<string, string[]>();
  for (const v of err.validation ?? []) {
    const params = v.params;
    const missing = typeof params.missingProperty === 'string' ? params.missingProperty : undefined;
    const extra = typeof params.additionalProperty === 'string' ? params.additionalProperty : undefined;
    const path = (v.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
    const key = [path, missing ?? extra].filter(Boolean).join('.') || err.validationContext || 'body';
    if (v.keyword === 'const' || v.keyword === 'enum') {
      const values = v.keyword === 'const' ? [params.allowedValue] : Array.isArray(params.allowedValues) ? (params.allowedValues as unknown[]) : [];
      const list = allowed.get(key) ?? [];
      for (const value of values.map(allowedText)) if (!list.includes(value)) list.push(value);
      allowed.set(key, list);
      continue;
    }
    fields[key] ??= extra ? 'unknown field' : (v.message ?? 'invalid');
  }
  // The allowed values say more than the `anyOf` (or a sibling branch's type error) at the same field.
  for (const [key, values] of allowed) fields[key] = values.length === 1 ? `must be ${values[0]}` : `must be one of ${values.join(', ')}`;
  return fields;
}

/**
 * The error mapping of docs/contract/spec.md §3, in one place for every service: AppError subclasses,
 * schema violations and malformed JSON (400 invalid_request with fields), unknown routes
 * (404 not_found), known routes with another method (405), and `x-request-id` on every answer;
 * and the request guards of docs/contract/spec.md §4.3/§4.5: no `.`/`..` path segment in any encoding, no JSON
 * body nested deeper than MAX_JSON_DEPTH (400 invalid_request, never a stack overflow later).
 * Register it before any route so that it sees all of them.
 */
export const serviceKit = fp<ServiceKitOptions>(
  // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
  async (app: FastifyInstance, opts) => {
    const known = FindMyWay({ ignoreTrailingSlash: false });
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const m of methods) {
        try {
          known.on(m as 'GET', route.url, () => undefined);
        } catch {
          // duplicate (e.g. the HEAD twin of a GET route): already known
        }
      }
    });

    app.addHook('onRequest', (req, reply, done) => {
      reply.header('x-request-id', req.id);
      const problem = ambiguousPathReason(req.url);
      if (problem !== undefined) return done(new BadRequestError(`request path ${problem}`, { path: problem }));
      done();
    });

    // A JSON body nests at most MAX_JSON_DEPTH levels, so nothing downstream (JSON.stringify,
    // the driver) recurses too deep: checked on the text, before it is parsed (a deep body costs
    // the parser far more than its size says), then parsed by Fastify's own parser (its
    // prototype-poisoning rules).
    if (opts.parseJson !== false) {
      const parseJson = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error');
      app.removeContentTypeParser('application/json');
      app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
        const text = typeof body === 'string' ? body : body.toString('utf8');
        if (jsonTextExceedsDepth(text)) {
          const tooDeep = `nested deeper than ${MAX_JSON_DEPTH} levels`;
          return done(new BadRequestError(`request body is ${tooDeep}`, { body: tooDeep }), undefined);
        }
        void parseJson(req, text, done);
      });
    }
    lingerOnEarlyAnswers(app);

    app.setNotFoundHandler(async (req, reply) => {
      const path = req.url.split('?')[0] ?? '/';
      const allowed = METHODS.filter((m) => m !== req.method && known.find(m, path) !== null);
      if (allowed.length > 0) {
        return reply
          .code(405)
          .header('allow', allowed.join(', '))
          .send({ error: 'method_not_allowed', message: `${req.method} is not allowed here; use ${allowed.join(', ')}` });
      }
      return reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${path}`, ...opts.notFoundBody });
    });

    app.setErrorHandler(async (err: FastifyError, req, reply) => {
      if (err instanceof AppError) {
        return reply
          .code(err.statusCode)
          .headers(err.headers)
          .send({ error: err.code, message: err.message, ...err.extra });
      }
      if (err instanceof HashingBusyError) {
        // Password hashing is at its cap (admission control): refuse at once, never queue.
        return reply.code(429).header('retry-after', '1').send({ error: 'too_many_requests', message: err.message });
      }
      if (err.validation) {
        const fields = validationFields(err);
        return reply.code(400).send({
          error: opts.validationError ?? 'invalid_request',
          message: `request ${err.validationContext ?? 'body'} is invalid: ${Object.entries(fields)
            .map(([k, v]) => `${k} ${v}`)
            .join('; ')}`,
          fields,
        });
      }
      switch (err.code) {
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
        case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
          return reply.code(400).send({ error: 'invalid_request', message: 'request body is not valid JSON', fields: {} });
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return reply.code(413).send({
            error: 'payload_too_large',
            message: `request body is larger than the ${req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit} bytes this route accepts`,
          });
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return reply
            .code(415)
            .send({ error: 'unsupported_media_type', message: `content type ${req.headers['content-type'] ?? '(none)'} is not accepted here` });
      }
      if (NUL_REFUSED.has(String(err.code))) {
        // PostgreSQL stores no U+0000 in text or jsonb: a request that carried one (a name, a query
        // parameter, a login's email) could never be stored or matched; said so, not a 500.
        return reply.code(400).send({
          error: opts.validationError ?? 'invalid_request',
          message: 'the request contains the character U+0000 (NUL), which no text of the platform may hold; remove it',
          fields: {},
        });
      }
      if (isOutOfSpace(err)) {
        // The operator's to fix, and said to them in the log; the client learns that nothing was stored.
        req.log.error({ err }, 'the disk is full: a write was refused');
        return reply.code(507).send({
          error: 'insufficient_storage',
          message: "the platform's disk is full: nothing was stored; ask an administrator to free space",
        });
      }
      if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
        return reply.code(err.statusCode).send({ error: 'invalid_request', message: err.message, fields: {} });
      }
      req.log.error({ err }, 'unhandled error');
      return reply.code(500).send({ error: 'internal', message: `internal error; quote request id ${req.id} when reporting it` });
    });
  },
  { name: '@codeagent/service-kit', fastify: '5.x' },
);
