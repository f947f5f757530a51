import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { INTERNAL_TOKEN_HEADER, safeEqual } from '@codeagent/auth';
import { UnauthorizedError } from './errors.js';

export { INTERNAL_TOKEN_HEADER };

export interface InternalTokenOptions {
  /** Requests this says yes to pass without the token (the runtime's probes and metrics). */
  skip?: (req: FastifyRequest) => boolean;
}

/**
 * The one check of the internal service token: a Fastify `onRequest` hook (for `addHook` or a
 * route's `onRequest` option) that answers 401 unless `X-Internal-Service-Token` equals `token`,
 * compared in constant time (`safeEqual`, where an empty token never matches).
 */
export function internalTokenHook(token: string, options: InternalTokenOptions = {}): onRequestHookHandler {
  return (req, _reply, done) => {
    if (options.skip?.(req)) return done();
    const given = req.headers[INTERNAL_TOKEN_HEADER];
    if (typeof given !== 'string' || !safeEqual(given, token)) {
      return done(new UnauthorizedError('send the internal service token in X-Internal-Service-Token'));
    }
    done();
  };
}
