import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import {
  ACCESS_HEADER,
  LAB_STATE_HASH_HEADER,
  SESSION_COOKIE,
  USER_ID_HEADER,
  WORKSPACE_HEADER,
  admitPasswordCheck,
  issueLabPass,
  issueLabTicket,
  issueUserToken,
  isLabStateHash,
  labTokenKey,
  sessionCookieOptions,
} from '@codeagent/auth';
import { BadRequestError, ForbiddenError, NotFoundError, UnauthorizedError } from '@codeagent/service-kit';
import { authenticate, changeOwnPassword, isSystemAdmin, normalizeEmail, revokeToken, toUserDto } from '../domain/users.js';
import { throttleKeys, type LoginThrottle } from '../domain/login-throttle.js';
import { firstUseOfLabTicket } from '../domain/lab-tickets.js';
import { MemberRole, Password, User, errors } from './schemas.js';

export interface AuthRoutesOptions {
  db: Kysely<DB>;
  jwtSecret: string;
  jwtTtlSeconds: number;
  throttle: LoginThrottle;
}

/**
 * The largest body of a login or password change: its fields fit in a few KiB (e-mail 320,
 * password 1,024 characters). The default 1 MiB let 20 logged-out logins at once hold 300 MB.
 */
export const AUTH_BODY_LIMIT = 16 * 1024;

// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, opts) => {
  // `Secure` follows the scheme the client used (docs/contract/spec.md §4.1, §4.5). The gateway, the only ingress,
  // always reports it in X-Forwarded-Proto, believing an outer proxy's header only from
  // TRUSTED_PROXIES; whoever reaches the backend without it can change only their own cookie.
  const secureCookie = (req: FastifyRequest) => req.protocol === 'https' || req.headers['x-forwarded-proto'] === 'https';

  app.post(
    '/auth/login',
    {
      config: { access: 'public' },
      bodyLimit: AUTH_BODY_LIMIT,
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
          ...errors(400, 401, 413, 429),
        },
      },
    },
    async (req, reply) => {
      // Admitted only while password checks have room (else 429 at once, no database work);
      // then throttled per account and per client address before any password is checked (docs/contract/spec.md §4.5).
      const keys = throttleKeys(normalizeEmail(req.body.email), req.ip);
      const user = await admitPasswordCheck(async () => {
        await opts.throttle.check(keys);
        const found = await authenticate(opts.db, req.body.email, req.body.password);
        if (found) await opts.throttle.recordSuccess(keys);
        else await opts.throttle.recordFailure(keys);
        return found;
      });
      if (!user) throw new UnauthorizedError('email or password is wrong', 'invalid_credentials');
      // Valid while the user's sessions are as they were when the password was checked (decision 0248).
      const issued = await issueUserToken(user.id, opts.jwtSecret, opts.jwtTtlSeconds, user.tokens_valid_after);
      reply.setCookie(SESSION_COOKIE, issued.token, { ...sessionCookieOptions(secureCookie(req)), maxAge: opts.jwtTtlSeconds });
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
    {
      config: { access: 'user' },
      schema: { tags: ['auth'], summary: 'Log out: revoke the token, clear the cookie', response: { 204: Type.Null(), ...errors(401) } },
    },
    async (req, reply) => {
      await revokeToken(opts.db, req.user.id, req.tokenClaims.jti, new Date(req.tokenClaims.exp * 1000));
      await app.userChanged(req.user.id);
      reply.clearCookie(SESSION_COOKIE, sessionCookieOptions(secureCookie(req)));
      return reply.code(204).send(null);
    },
  );

  // What the gateway asks on every /jupyter request and websocket upgrade, as nginx's
  // auth_request would: the same checks as every user route (signature, expiry, revocation,
  // a disabled or deleted user): one indexed query, or none while the check is cached (a
  // logout, revocation or disabling is announced to every backend at once; decision 0082).
  // With LAB_ORIGIN (decision 0263) it also makes a session's ticket to a workspace's lab (with
  // `X-Codeagent-Lab-State-Hash`) and, asked with that ticket and the same state, the lab's pass.
  const labKey = labTokenKey(opts.jwtSecret);
  app.get(
    '/auth/session',
    {
      config: { access: 'lab' },
      schema: {
        tags: ['auth'],
        summary:
          'Check a session: 200 with the user id and whether a system administrator, or 401. With `X-Codeagent-Workspace` (a workspace id) also the membership: ' +
          '404 for a non-member or an unknown workspace, 403 for a viewer when `X-Codeagent-Access: write`, else `workspace_role`. ' +
          'With a workspace and `X-Codeagent-Lab-State-Hash`, also a ticket to its lab (`lab_ticket`); asked with a lab ticket (Bearer) and the same state, the lab’s pass (`lab_pass`)',
        response: {
          200: Type.Object({
            user_id: Type.String(),
            is_system_admin: Type.Boolean(),
            workspace_role: Type.Optional(MemberRole),
            lab_ticket: Type.Optional(Type.String()),
            lab_pass: Type.Optional(Type.String()),
            lab_pass_expires_in: Type.Optional(Type.Integer()),
          }),
          ...errors(400, 401, 403, 404),
        },
      },
    },
    async (req, reply) => {
      reply.header('cache-control', 'no-store');
      const admin = isSystemAdmin(req.user);
      // For nginx's auth_request, which sees only the status and headers: who the user is (the
      // ingress keeps one user on one Jupyter instance), and a 403 when the ingress requires a
      // system administrator (`X-Codeagent-Require: system_admin`; it only ever narrows).
      reply.header(USER_ID_HEADER, req.user.id);
      if (req.headers['x-codeagent-require'] === 'system_admin' && !admin) {
        throw new ForbiddenError('JupyterLab is open to system administrators only until each workspace has its own JupyterLab server');
      }
      // A workspace's JupyterLab (/jupyter/<id>/): the membership rule of every workspace route,
      // asked by the ingress on each request and upgrade (a websocket or a change is a write).
      const workspace = req.headers[WORKSPACE_HEADER];
      if (typeof workspace === 'string') {
        const access = req.headers[ACCESS_HEADER] === 'read' ? 'read' : 'write';
        const role = await app.requireWorkspaceAccess(req.user.id, workspace, access).catch((err: unknown) => {
          // nginx's auth_request passes on only 401 and 403: a non-member is a 403 marked `not_found`.
          if (err instanceof NotFoundError && req.headers['x-codeagent-require'] === 'member') {
            reply.header('x-codeagent-refusal', 'not_found');
            throw new ForbiddenError('not a member of this workspace');
          }
          throw err;
        });
        reply.header('x-codeagent-workspace-role', role);
        const answer = { user_id: req.user.id, is_system_admin: admin, workspace_role: role };
        const lab = req.labCredential;
        if (lab?.kind === 'ticket') {
          // Once: a ticket seen again (a log, a history, a script that read the address) opens nothing.
          if (!(await firstUseOfLabTicket(opts.db, lab.ticketId!, lab.ticketExpiresAt!))) {
            throw new UnauthorizedError('this link to the lab has been used; open the lab again from the platform');
          }
          const { pass, expiresAt } = issueLabPass(labKey, lab);
          return { ...answer, lab_pass: pass, lab_pass_expires_in: Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000)) };
        }
        const stateHash = req.headers[LAB_STATE_HASH_HEADER];
        if (stateHash !== undefined) {
          // (A ticket is made for a session only: a pass does not make another.)
          if (lab !== undefined) throw new UnauthorizedError('a lab pass makes no ticket; open the lab from the platform');
          if (typeof stateHash !== 'string' || !isLabStateHash(stateHash))
            throw new BadRequestError('the lab state hash is malformed (43 base64url characters)');
          return { ...answer, lab_ticket: issueLabTicket(labKey, req.tokenClaims, workspace, stateHash) };
        }
        return answer;
      }
      return { user_id: req.user.id, is_system_admin: admin };
    },
  );

  app.post(
    '/auth/password',
    {
      config: { access: 'user' },
      bodyLimit: AUTH_BODY_LIMIT,
      schema: {
        tags: ['auth'],
        summary: 'Change your own password; every other session of yours ends',
        body: Type.Object({ current_password: Type.String({ minLength: 1, maxLength: 1024 }), new_password: Password }, { additionalProperties: false }),
        response: { 204: Type.Null(), ...errors(400, 401, 413, 429) },
      },
    },
    async (req, reply) => {
      // A stolen session must not become a password oracle: wrong current passwords count
      // against the account like failed logins.
      const keys = throttleKeys(req.user.email, req.ip);
      const changed = await admitPasswordCheck(async () => {
        await opts.throttle.check(keys);
        const ok = await changeOwnPassword(opts.db, req.user, req.body.current_password, req.body.new_password, req.tokenClaims.jti);
        if (ok) await opts.throttle.recordSuccess(keys);
        else await opts.throttle.recordFailure(keys);
        return ok;
      });
      if (!changed) throw new UnauthorizedError('the current password is wrong', 'invalid_credentials');
      await app.userChanged(req.user.id);
      req.log.info({ user_id: req.user.id }, 'password changed; the other sessions of the user are revoked');
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/auth/me',
    {
      config: { access: 'user' },
      schema: {
        tags: ['auth'],
        summary: 'The logged-in user and their workspaces',
        response: {
          200: Type.Composite([User, Type.Object({ workspaces: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), role: MemberRole })) })]),
          ...errors(401),
        },
      },
    },
    async (req) => ({ ...toUserDto(req.user), workspaces: [...(await app.workspacesOf(req.user.id))] }),
  );
};
