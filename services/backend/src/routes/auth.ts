import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { issueUserToken } from '@codeagent/auth';
import { UnauthorizedError } from '@codeagent/service-kit';
import { authenticate, isSystemAdmin, revokeToken, toUserDto } from '../domain/users.js';
import { workspacesOfUser } from '../domain/workspaces.js';
import { SESSION_COOKIE } from '@codeagent/service-kit';
import { MemberRole, User, errors } from './schemas.js';

export interface AuthRoutesOptions {
  db: Kysely<DB>;
  jwtSecret: string;
  jwtTtlSeconds: number;
}

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, opts) => {
  const secureCookie = (proto: string | undefined) => proto === 'https';

  app.post(
    '/auth/login',
    {
      schema: {
        tags: ['auth'],
        summary: 'Log in with email and password',
        body: Type.Object({ email: Type.String({ minLength: 1, maxLength: 320 }), password: Type.String({ minLength: 1, maxLength: 1024 }) }),
        response: {
          200: Type.Object({
            access_token: Type.String(),
            token_type: Type.Literal('Bearer'),
            expires_in: Type.Integer(),
            is_system_admin: Type.Boolean(),
            user: User,
          }),
          ...errors(400, 401),
        },
      },
    },
    async (req, reply) => {
      const user = await authenticate(opts.db, req.body.email, req.body.password);
      if (!user) throw new UnauthorizedError('email or password is wrong', 'invalid_credentials');
      const issued = await issueUserToken(user.id, opts.jwtSecret, opts.jwtTtlSeconds);
      reply.setCookie(SESSION_COOKIE, issued.token, {
        httpOnly: true,
        sameSite: 'lax',
        path: '/',
        secure: secureCookie(req.protocol),
        maxAge: opts.jwtTtlSeconds,
      });
      return {
        access_token: issued.token,
        token_type: 'Bearer' as const,
        expires_in: opts.jwtTtlSeconds,
        is_system_admin: isSystemAdmin(user),
        user: toUserDto(user),
      };
    },
  );

  app.post(
    '/auth/logout',
    { onRequest: app.requireUser, schema: { tags: ['auth'], summary: 'Log out: revoke the token, clear the cookie', response: { 204: Type.Null(), ...errors(401) } } },
    async (req, reply) => {
      await revokeToken(opts.db, req.tokenClaims.jti, new Date(req.tokenClaims.exp * 1000));
      reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: secureCookie(req.protocol) });
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/auth/me',
    {
      onRequest: app.requireUser,
      schema: {
        tags: ['auth'],
        summary: 'The logged-in user and their workspaces',
        response: {
          200: Type.Composite([
            User,
            Type.Object({ workspaces: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), role: MemberRole })) }),
          ]),
          ...errors(401),
        },
      },
    },
    async (req) => {
      const workspaces = await workspacesOfUser(opts.db, req.user.id);
      return { ...toUserDto(req.user), workspaces };
    },
  );
};
