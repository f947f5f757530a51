import type { Kysely, Transaction, Updateable } from 'kysely';
import {
  ADMIN_ROLE_ID,
  isForeignKeyViolation,
  notifyUserChanged,
  isSystemAdmin,
  isUniqueViolation,
  withRetry,
  type DB,
  type UserRow,
  type UsersTable,
} from '@codeagent/db';
import { hashPassword, verifyPassword, equalizeTimingForUnknownUser } from '@codeagent/auth';
import { BadRequestError, ConflictError, NotFoundError, UnauthorizedError, decodeCursor, isUuid, keysetPage } from '@codeagent/service-kit';
import type { UserDto } from './schemas.js';

export { isSystemAdmin };

export const DEFAULT_ROLE_ID = 'user';

export type { UserDto };

export function toUserDto(user: UserRow): UserDto {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    platform_role_id: user.platform_role_id,
    is_system_admin: isSystemAdmin(user),
    created_at: user.created_at.toISOString(),
    disabled_at: user.disabled_at ? user.disabled_at.toISOString() : null,
  };
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export interface NewUserInput {
  email: string;
  name: string;
  password: string;
  platform_role_id?: string | undefined;
}

/** 400 naming the existing roles unless `roleId` is one of them. */
async function assertRoleExists(db: Kysely<DB>, roleId: string): Promise<void> {
  const role = await db.selectFrom('platform_roles').select('id').where('id', '=', roleId).executeTakeFirst();
  if (!role) {
    const roles = await db.selectFrom('platform_roles').select('id').orderBy('id').execute();
    throw new BadRequestError(`platform_role_id ${JSON.stringify(roleId)} does not exist`, {
      platform_role_id: `must be one of ${roles.map((r) => r.id).join(', ')}`,
    });
  }
}

export async function createUser(db: Kysely<DB>, input: NewUserInput): Promise<UserRow> {
  const roleId = input.platform_role_id ?? DEFAULT_ROLE_ID;
  await assertRoleExists(db, roleId);
  const passwordHash = await hashPassword(input.password);
  try {
    return await db
      .insertInto('users')
      .values({ email: normalizeEmail(input.email), name: input.name, password_hash: passwordHash, platform_role_id: roleId })
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError(`a user with email ${normalizeEmail(input.email)} already exists`);
    throw err;
  }
}

export async function findUserById(db: Kysely<DB>, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Checks a login. Unknown email, wrong password and a disabled user take the same path and
 * similar time (a password hash is verified in each case) and give the same answer: undefined.
 */
export async function authenticate(db: Kysely<DB>, email: string, password: string): Promise<UserRow | undefined> {
  const user = await db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst();
  if (!user) {
    await equalizeTimingForUnknownUser(password);
    return undefined;
  }
  const valid = await verifyPassword(password, user.password_hash);
  return valid && user.disabled_at === null ? user : undefined;
}

export async function listUsers(db: Kysely<DB>, limit: number, cursor: string | undefined) {
  const after = decodeCursor(cursor, ['time', 'uuid']);
  let q = db
    .selectFrom('users')
    .selectAll()
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit + 1);
  if (after) {
    const [at, id] = after;
    q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), '>', eb.tuple(at, id)));
  }
  const rows = await q.execute();
  return keysetPage(rows, limit, (u) => [u.created_at.toISOString(), u.id], toUserDto);
}

/** Creates the bootstrap system administrator when the database has no user at all. */
export async function ensureBootstrapAdmin(db: Kysely<DB>, email: string, password: string): Promise<UserRow | undefined> {
  const any = await db.selectFrom('users').select('id').limit(1).executeTakeFirst();
  if (any) return undefined;
  try {
    return await createUser(db, { email, name: 'Administrator', password, platform_role_id: ADMIN_ROLE_ID });
  } catch (err) {
    // Another backend starting at the same moment created it first.
    if (err instanceof ConflictError) return undefined;
    throw err;
  }
}

/** Revocation list of logged-out tokens (announced to token-check caches); expired entries are pruned on the way. */
export async function revokeToken(db: Kysely<DB>, userId: string, jti: string, expiresAt: Date): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('revoked_tokens')
      .values({ jti, expires_at: expiresAt })
      .onConflict((oc) => oc.doNothing())
      .execute();
    await notifyUserChanged(trx, userId);
  });
  await db.deleteFrom('revoked_tokens').where('expires_at', '<', new Date()).execute();
}

/** Who performs an administrative change on a user, and with which token. */
export interface UserActor {
  userId: string;
  /** The caller's token id: kept valid when the caller revokes their own sessions. */
  jti: string;
}

/** Transactions of this module: retried as a whole on a serialization failure or deadlock. */
function inTransaction<T>(db: Kysely<DB>, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return withRetry(() => db.transaction().execute(work));
}

function userNotFound(id: string): NotFoundError {
  return new NotFoundError(`user ${id} not found`);
}

const isActiveAdmin = (u: Pick<UserRow, 'platform_role_id' | 'disabled_at'>) => isSystemAdmin(u) && u.disabled_at === null;

/**
 * Refuses a change that would leave the platform without an active system administrator.
 * Locks every active administrator row (in id order) first, so two concurrent demotions,
 * disablings or deletions of the last two administrators cannot both pass: the second one
 * waits, then no longer sees the first as an administrator, and is refused.
 */
async function assertAnotherActiveAdmin(trx: Transaction<DB>, userId: string): Promise<void> {
  const admins = await trx
    .selectFrom('users')
    .select('id')
    .where('platform_role_id', '=', ADMIN_ROLE_ID)
    .where('disabled_at', 'is', null)
    .orderBy('id')
    .forUpdate()
    .execute();
  if (!admins.some((a) => a.id !== userId.toLowerCase())) {
    throw new ConflictError('this is the last active system administrator of the platform; make another user admin first', 'last_admin');
  }
}

/** The user row, locked for the rest of the transaction. */
async function lockUser(trx: Transaction<DB>, id: string): Promise<UserRow> {
  const user = isUuid(id) ? await trx.selectFrom('users').selectAll().where('id', '=', id).forUpdate().executeTakeFirst() : undefined;
  if (!user) throw userNotFound(id);
  return user;
}

export interface UserPatch {
  name?: string | undefined;
  platform_role_id?: string | undefined;
  disabled?: boolean | undefined;
}

/**
 * PATCH /platform/users/{id} (docs/contract/spec.md §4.5). Disabling revokes every session of the user at once
 * (and re-enabling does not bring them back). Neither the last active system administrator may
 * be demoted or disabled (409 last_admin), nor may an administrator disable themselves
 * (409 self_removal).
 */
export async function updateUser(db: Kysely<DB>, userId: string, patch: UserPatch, actor: UserActor): Promise<UserRow> {
  if (!isUuid(userId)) throw userNotFound(userId);
  // (Compared as PostgreSQL writes a uuid: `ABC…` is the same user as `abc…`, for the rules below too.)
  const id = userId.toLowerCase();
  if (patch.platform_role_id !== undefined) await assertRoleExists(db, patch.platform_role_id);
  if (patch.disabled === true && id === actor.userId) {
    throw new ConflictError('you cannot disable yourself; ask another system administrator', 'self_removal');
  }
  return inTransaction(db, async (trx) => {
    const before = await trx.selectFrom('users').select(['platform_role_id', 'disabled_at']).where('id', '=', id).executeTakeFirst();
    if (!before) throw userNotFound(id);
    const losesAdmin = (patch.platform_role_id !== undefined && patch.platform_role_id !== ADMIN_ROLE_ID) || patch.disabled === true;
    // Lock order everywhere: the administrators' rows, then the target's (which may be one of them).
    if (isActiveAdmin(before) && losesAdmin) await assertAnotherActiveAdmin(trx, id);
    const user = await lockUser(trx, id);
    if (isActiveAdmin(user) && losesAdmin && !isActiveAdmin(before)) await assertAnotherActiveAdmin(trx, id);
    const now = new Date();
    const changes: Updateable<UsersTable> = {};
    if (patch.name !== undefined && patch.name !== user.name) changes.name = patch.name;
    if (patch.platform_role_id !== undefined && patch.platform_role_id !== user.platform_role_id) changes.platform_role_id = patch.platform_role_id;
    if (patch.disabled === true && user.disabled_at === null) {
      changes.disabled_at = now;
      changes.tokens_valid_after = now;
      changes.kept_token_jti = null;
    }
    if (patch.disabled === false && user.disabled_at !== null) changes.disabled_at = null;
    if (Object.keys(changes).length === 0) return user;
    await notifyUserChanged(trx, id);
    return trx
      .updateTable('users')
      .set({ ...changes, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/**
 * Sets a new password and revokes every session of the user at once; when `keepJti` is given
 * (a user changing their own password), that one session stays valid. With `checked` (the row the
 * caller's current password was checked against, for the caller's own change), the change is made
 * only while the user's row still holds what was checked: a reset, a disabling or every session
 * revoked that committed in between wins, and this change is refused (401) instead of undoing it
 * with the caller's own password and session (hostile review: a thief changing the password as an
 * administrator reset it kept both in 8 of 8 races).
 */
async function replacePassword(
  db: Kysely<DB>,
  id: string,
  password: string,
  keepJti: string | null,
  checked?: Pick<UserRow, 'password_hash' | 'tokens_valid_after' | 'kept_token_jti'>,
): Promise<UserRow> {
  // Hash before the transaction: no row stays locked for the 60 ms of scrypt.
  const passwordHash = await hashPassword(password);
  return inTransaction(db, async (trx) => {
    const locked = await lockUser(trx, id);
    if (checked !== undefined) {
      const revoked = keepJti !== null && (await trx.selectFrom('revoked_tokens').select('jti').where('jti', '=', keepJti).executeTakeFirst()) !== undefined;
      const moved =
        locked.password_hash !== checked.password_hash ||
        (locked.tokens_valid_after?.getTime() ?? null) !== (checked.tokens_valid_after?.getTime() ?? null) ||
        locked.kept_token_jti !== checked.kept_token_jti;
      if (revoked || moved || locked.disabled_at !== null) {
        throw new UnauthorizedError('your session ended while the password was being changed (it was reset, or your sessions were revoked); log in again');
      }
    }
    const now = new Date();
    await notifyUserChanged(trx, id);
    return trx
      .updateTable('users')
      .set({ password_hash: passwordHash, tokens_valid_after: now, kept_token_jti: keepJti, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/** POST /platform/users/{id}/password: an administrator sets a user's password; the user's sessions end. */
export async function resetPassword(db: Kysely<DB>, userId: string, password: string, actor: UserActor): Promise<UserRow> {
  if (!isUuid(userId)) throw userNotFound(userId);
  const id = userId.toLowerCase();
  // Resetting one's own password here keeps the caller's session, like POST /auth/password.
  return replacePassword(db, id, password, id === actor.userId ? actor.jti : null);
}

/**
 * POST /auth/password: the caller changes their own password, proving the current one; every
 * other session of theirs ends, the caller's stays. Returns false for a wrong current password.
 */
export async function changeOwnPassword(db: Kysely<DB>, user: UserRow, current: string, next: string, jti: string): Promise<boolean> {
  if (!(await verifyPassword(current, user.password_hash))) return false;
  await replacePassword(db, user.id, next, jti, user);
  return true;
}

/**
 * DELETE /platform/users/{id} (docs/contract/spec.md §4.5): removes the user and all their memberships in one
 * transaction. Refused for oneself (409 self_removal), for the last admin of a live workspace
 * (409 last_admin) and for the last active system administrator (409 last_admin). What the user
 * wrote or ran stays; its references to them become null.
 *
 * Locks are taken in the order every membership change uses: the workspaces (by id, as
 * `lockLiveWorkspace` does), then user rows, so concurrent removals of a workspace's last two
 * admins, by deletion or membership change, leave one.
 */
export async function deleteUser(db: Kysely<DB>, userId: string, actor: UserActor): Promise<void> {
  if (!isUuid(userId)) throw userNotFound(userId);
  const id = userId.toLowerCase();
  if (id === actor.userId) throw new ConflictError('you cannot delete yourself; ask another system administrator', 'self_removal');
  await inTransaction(db, async (trx) => {
    const target = await trx.selectFrom('users').select(['platform_role_id', 'disabled_at']).where('id', '=', id).executeTakeFirst();
    if (!target) throw userNotFound(id);
    const adminOf = async () =>
      (
        await trx
          .selectFrom('workspace_members as m')
          .innerJoin('workspaces as w', 'w.id', 'm.workspace_id')
          .select('m.workspace_id')
          .where('m.user_id', '=', id)
          .where('m.role', '=', 'admin')
          .where('m.deleted_at', 'is', null)
          .where('w.deleted_at', 'is', null)
          .orderBy('m.workspace_id')
          .execute()
      ).map((r) => r.workspace_id);
    const locked = new Set<string>();
    const lockWorkspaces = async (ids: string[]) => {
      for (const ws of ids.filter((w) => !locked.has(w)).sort()) {
        await trx.selectFrom('workspaces').select('id').where('id', '=', ws).forUpdate().executeTakeFirst();
        locked.add(ws);
      }
    };
    await lockWorkspaces(await adminOf());
    if (isActiveAdmin(target)) await assertAnotherActiveAdmin(trx, id);
    const user = await lockUser(trx, id);
    if (isActiveAdmin(user) && !isActiveAdmin(target)) await assertAnotherActiveAdmin(trx, id);
    // With the user row locked no membership of theirs can be added any more; an admin role
    // granted meanwhile shows up here and its workspace is locked too.
    const workspaces = await adminOf();
    await lockWorkspaces(workspaces);
    for (const ws of workspaces) {
      const { n } = await trx
        .selectFrom('workspace_members')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('workspace_id', '=', ws)
        .where('role', '=', 'admin')
        .where('deleted_at', 'is', null)
        .executeTakeFirstOrThrow();
      if (Number(n) <= 1) {
        throw new ConflictError(`the user is the last admin of workspace ${ws}; make another member admin first`, 'last_admin');
      }
    }
    await trx.deleteFrom('workspace_members').where('user_id', '=', id).execute();
    // Their schedules stop with them (decision 0254): the reference to them becomes null below.
    await trx.updateTable('schedules').set({ enabled: false, updated_at: new Date() }).where('created_by', '=', id).where('enabled', '=', true).execute();
    await notifyUserChanged(trx, id);
    try {
      await trx.deleteFrom('users').where('id', '=', id).execute();
    } catch (err) {
      // A table added later that references users without ON DELETE: refuse, change nothing.
      if (isForeignKeyViolation(err)) throw new ConflictError('the user is still referenced by other records and cannot be deleted; disable the user instead');
      throw err;
    }
  });
}
