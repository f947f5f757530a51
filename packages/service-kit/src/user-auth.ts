import '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { findActiveTokenUser, isSystemAdmin, type DB, type UserRow } from '@codeagent/db';
import { parseBearer, verifyUserToken, InvalidTokenError, type UserTokenClaims } from '@codeagent/auth';
import { ForbiddenError, UnauthorizedError } from './errors.js';

export const SESSION_COOKIE = 'codeagent_session';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `requireUser`. */
    user: UserRow;
    tokenClaims: UserTokenClaims;
  }
  interface FastifyInstance {
    requireUser: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    requireSystemAdmin: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A write authenticated by the session cookie alone must come from our own origin
 * (SPEC §4.1): browsers send Sec-Fetch-Site, older ones at least Origin.
 */
function isSameOrigin(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none';
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  try {
    const host = (req.headers['x-forwarded-host'] as string | undefined) ?? req.headers.host;
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

export interface UserAuthOptions {
  db: Kysely<DB>;
  jwtSecret: string;
}

/**
 * User authentication of every service that users call (backend, bridge): Bearer JWT, or the
 * session cookie holding the same token; signature, expiry, revocation and the user's existence
 * are checked. Register @fastify/cookie first.
 */
export const userAuth = fp<UserAuthOptions>(
  async (app, opts) => {
    app.decorateRequest('user', null as unknown as UserRow);
    app.decorateRequest('tokenClaims', null as unknown as UserTokenClaims);

    app.decorate('requireUser', async (req: FastifyRequest) => {
      const bearer = parseBearer(req.headers.authorization);
      const cookie = req.cookies[SESSION_COOKIE] ?? '';
      const token = bearer !== '' ? bearer : cookie;
      if (token === '') throw new UnauthorizedError('log in first: send Authorization: Bearer <token> or the session cookie');
      let claims: UserTokenClaims;
      try {
        claims = await verifyUserToken(token, opts.jwtSecret);
      } catch (err) {
        if (err instanceof InvalidTokenError) throw new UnauthorizedError(`${err.message}; log in again`);
        throw err;
      }
      const user = await findActiveTokenUser(opts.db, claims.sub, claims.jti);
      if (!user) throw new UnauthorizedError('token is no longer valid; log in again');
      if (bearer === '' && !SAFE_METHODS.has(req.method) && !isSameOrigin(req)) {
        throw new ForbiddenError('cross-site request refused: send the token in the Authorization header');
      }
      req.user = user;
      req.tokenClaims = claims;
    });

    app.decorate('requireSystemAdmin', async (req: FastifyRequest, reply: FastifyReply) => {
      await app.requireUser(req, reply);
      if (!isSystemAdmin(req.user)) throw new ForbiddenError('only system administrators may use the platform administration');
    });
  },
  { name: 'user-auth', dependencies: ['@fastify/cookie'] },
);
