import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { EVERY_USER, type DB } from '@codeagent/db';
import { BadRequestError, ListQuery, listResponse } from '@codeagent/service-kit';
import { bidiControlIn, invisibleCharacterIn } from '@codeagent/storage';
import { createUser, deleteUser, listUsers, resetPassword, toUserDto, updateUser } from '../domain/users.js';
import type { LoginThrottle } from '../domain/login-throttle.js';
import {
  addMember,
  changeMemberRole,
  createWorkspace,
  getWorkspace,
  listMembers,
  listWorkspaces,
  removeMember,
  softDeleteWorkspace,
  updateWorkspace,
} from '../domain/workspaces.js';
import { Email, Member, MemberRole, Name, Password, User, Workspace, errors } from './schemas.js';

export interface PlatformRoutesOptions {
  db: Kysely<DB>;
  throttle: LoginThrottle;
}

const WorkspaceParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
const UserParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
const RoleId = Type.String({ minLength: 1, maxLength: 64 });
const MemberParams = Type.Object({ id: Type.String({ maxLength: 64 }), user_id: Type.String({ maxLength: 64 }) });
const Description = Type.String({ maxLength: 10_000 });

/**
 * Why a user's or a workspace's name cannot be given (decision 0233), or undefined: every member
 * sees these names (the members list, "by Ada" beside each change), so none may hold a
 * bidirectional control (it makes a name display as another) or any other control character
 * (a line break or a tab that breaks the lines it is shown in). Letters of every script pass.
 */
export function nameProblem(name: string): string | undefined {
  const bidi = bidiControlIn(name);
  if (bidi) return `must not contain bidirectional control characters (${bidi}): they make a name display as another`;
  const invisible = invisibleCharacterIn(name);
  if (invisible) return `must not contain invisible characters (${invisible}): they make a name display as another`;
  for (const ch of name) {
    const code = ch.codePointAt(0)!;
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return `must not contain control characters (U+${code.toString(16).toUpperCase().padStart(4, '0')})`;
  }
  if (name.trim() === '') return 'must not be blank';
  return undefined;
}

/** Platform administration (docs/contract/spec.md §4.2): system administrators only. */
// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const platformRoutes: FastifyPluginAsyncTypebox<PlatformRoutesOptions> = async (app, { db, throttle }) => {
  const tags = ['platform'];
  // A name given to a user or a workspace (their create and change routes are the ones here with one).
  app.addHook('preHandler', (req, _reply, done) => {
    const name = (req.body as { name?: unknown } | undefined)?.name;
    const problem = typeof name === 'string' ? nameProblem(name) : undefined;
    done(problem ? new BadRequestError(`name ${problem}`, { name: problem }) : undefined);
  });

  app.post(
    '/users',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Create a user',
        body: Type.Object({ email: Email, name: Name, password: Password, platform_role_id: Type.Optional(RoleId) }, { additionalProperties: false }),
        response: { 201: User, ...errors(400, 401, 403, 409, 429) },
      },
    },
    async (req, reply) => reply.code(201).send(toUserDto(await createUser(db, req.body))),
  );

  app.get(
    '/users',
    {
      config: { access: 'system-admin' },
      schema: { tags, summary: 'List users', querystring: ListQuery, response: { 200: listResponse(User), ...errors(400, 401, 403) } },
    },
    async (req) => listUsers(db, req.query.limit ?? 100, req.query.cursor),
  );

  const actor = (req: { user: { id: string }; tokenClaims: { jti: string } }) => ({ userId: req.user.id, jti: req.tokenClaims.jti });

  app.patch(
    '/users/:id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Change a user: name, platform role, disabled (disabling ends their sessions at once)',
        params: UserParams,
        body: Type.Object(
          { name: Type.Optional(Name), platform_role_id: Type.Optional(RoleId), disabled: Type.Optional(Type.Boolean()) },
          { additionalProperties: false },
        ),
        response: { 200: User, ...errors(400, 401, 403, 404, 409) },
      },
    },
    async (req) => {
      const user = await updateUser(db, req.params.id, req.body, actor(req));
      await app.userChanged(user.id);
      req.log.info({ user_id: user.id, by: req.user.id, changed: Object.keys(req.body) }, 'user changed by a system administrator');
      return toUserDto(user);
    },
  );

  app.post(
    '/users/:id/password',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: "Set a user's password; their sessions end at once",
        params: UserParams,
        body: Type.Object({ password: Password }, { additionalProperties: false }),
        response: { 204: Type.Null(), ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (req, reply) => {
      const user = await resetPassword(db, req.params.id, req.body.password, actor(req));
      await app.userChanged(user.id);
      // A locked-out user whose password was just reset may log in again at once.
      await throttle.forgetAccount(user.email);
      req.log.info({ user_id: user.id, by: req.user.id }, 'password reset by a system administrator; the sessions of the user are revoked');
      return reply.code(204).send(null);
    },
  );

  app.delete(
    '/users/:id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Delete a user and their memberships (not yourself, not the last admin of a workspace or of the platform)',
        params: UserParams,
        response: { 204: Type.Null(), ...errors(401, 403, 404, 409) },
      },
    },
    async (req, reply) => {
      await deleteUser(db, req.params.id, actor(req));
      await app.userChanged(req.params.id);
      req.log.info({ user_id: req.params.id, by: req.user.id }, 'user deleted by a system administrator');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/workspaces',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Create a workspace; its first member (the caller by default) becomes its admin',
        body: Type.Object(
          { name: Name, description: Type.Optional(Description), admin_user_id: Type.Optional(Type.String({ maxLength: 64 })) },
          { additionalProperties: false },
        ),
        response: { 201: Workspace, ...errors(400, 401, 403, 404) },
      },
    },
    async (req, reply) => {
      const adminUserId = req.body.admin_user_id ?? req.user.id;
      const ws = await createWorkspace(db, { name: req.body.name, description: req.body.description, adminUserId });
      await app.userChanged(adminUserId);
      return reply.code(201).send(ws);
    },
  );

  app.get(
    '/workspaces',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'List workspaces (soft-deleted ones only with include_deleted=true)',
        querystring: Type.Composite([ListQuery, Type.Object({ include_deleted: Type.Optional(Type.Boolean({ default: false })) })]),
        response: { 200: listResponse(Workspace), ...errors(400, 401, 403) },
      },
    },
    async (req) => listWorkspaces(db, { includeDeleted: req.query.include_deleted ?? false, limit: req.query.limit ?? 100, cursor: req.query.cursor }),
  );

  app.get(
    '/workspaces/:id',
    {
      config: { access: 'system-admin' },
      schema: { tags, summary: 'Read a workspace', params: WorkspaceParams, response: { 200: Workspace, ...errors(401, 403, 404) } },
    },
    async (req) => getWorkspace(db, req.params.id),
  );

  app.patch(
    '/workspaces/:id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Change a workspace',
        params: WorkspaceParams,
        body: Type.Object({ name: Type.Optional(Name), description: Type.Optional(Description) }, { additionalProperties: false }),
        response: { 200: Workspace, ...errors(400, 401, 403, 404) },
      },
    },
    async (req) => {
      const ws = await updateWorkspace(db, req.params.id, req.body);
      // A new name is announced to every user (their workspace lists hold it).
      if (req.body.name !== undefined) await app.userChanged(EVERY_USER);
      return ws;
    },
  );

  app.delete(
    '/workspaces/:id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Soft-delete a workspace and its members',
        params: WorkspaceParams,
        response: { 204: Type.Null(), ...errors(401, 403, 404) },
      },
    },
    async (req, reply) => {
      await softDeleteWorkspace(db, req.params.id);
      await app.userChanged(EVERY_USER);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/workspaces/:id/members',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Add a member',
        params: WorkspaceParams,
        body: Type.Object({ user_id: Type.String({ maxLength: 64 }), role: MemberRole }, { additionalProperties: false }),
        response: { 201: Member, ...errors(400, 401, 403, 404, 409) },
      },
    },
    async (req, reply) => {
      const member = await addMember(db, req.params.id, req.body.user_id, req.body.role);
      await app.userChanged(member.user_id);
      return reply.code(201).send(member);
    },
  );

  app.get(
    '/workspaces/:id/members',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'List members',
        params: WorkspaceParams,
        querystring: ListQuery,
        response: { 200: listResponse(Member), ...errors(400, 401, 403, 404) },
      },
    },
    async (req) => listMembers(db, req.params.id, req.query.limit ?? 100, req.query.cursor),
  );

  app.patch(
    '/workspaces/:id/members/:user_id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: "Change a member's role (the last admin cannot be demoted)",
        params: MemberParams,
        body: Type.Object({ role: MemberRole }, { additionalProperties: false }),
        response: { 200: Member, ...errors(400, 401, 403, 404, 409) },
      },
    },
    async (req) => {
      const member = await changeMemberRole(db, req.params.id, req.params.user_id, req.body.role);
      await app.userChanged(member.user_id);
      return member;
    },
  );

  app.delete(
    '/workspaces/:id/members/:user_id',
    {
      config: { access: 'system-admin' },
      schema: {
        tags,
        summary: 'Remove a member (not the last admin, not yourself)',
        params: MemberParams,
        response: { 204: Type.Null(), ...errors(401, 403, 404, 409) },
      },
    },
    async (req, reply) => {
      await removeMember(db, req.params.id, req.params.user_id, { userId: req.user.id, isSystemAdmin: true });
      await app.userChanged(req.params.user_id);
      return reply.code(204).send(null);
    },
  );
};
