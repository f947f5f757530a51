import type { Kysely } from 'kysely';
import { ADMIN_ROLE_ID, isSystemAdmin, isUniqueViolation, type DB, type UserRow } from '@codeagent/db';

export { isSystemAdmin };
import { hashPassword, verifyPassword, equalizeTimingForUnknownUser } from '@codeagent/auth';
import { BadRequestError, ConflictError, decodeCursor, keysetPage } from '@codeagent/service-kit';

export const DEFAULT_ROLE_ID = 'user';

export interface UserDto {
  id: string;
  email: string;
  name: string;
  platform_role_id: string;
  is_system_admin: boolean;
  created_at: string;
}


export function toUserDto(user: UserRow): UserDto {
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    platform_role_id: user.platform_role_id,
    is_system_admin: isSystemAdmin(user),
    created_at: user.created_at.toISOString(),
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

export async function createUser(db: Kysely<DB>, input: NewUserInput): Promise<UserRow> {
  const roleId = input.platform_role_id ?? DEFAULT_ROLE_ID;
  const role = await db.selectFrom('platform_roles').select('id').where('id', '=', roleId).executeTakeFirst();
  if (!role) {
    const roles = await db.selectFrom('platform_roles').select('id').orderBy('id').execute();
    throw new BadRequestError(`platform_role_id ${JSON.stringify(roleId)} does not exist`, {
      platform_role_id: `must be one of ${roles.map((r) => r.id).join(', ')}`,
    });
  }
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
 * Checks a login. Unknown email and wrong password take the same path and similar time
 * (a password hash is verified in both cases) and give the same answer: undefined.
 */
export async function authenticate(db: Kysely<DB>, email: string, password: string): Promise<UserRow | undefined> {
  const user = await db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst();
  if (!user) {
    await equalizeTimingForUnknownUser(password);
    return undefined;
  }
  return (await verifyPassword(password, user.password_hash)) ? user : undefined;
}

export async function listUsers(db: Kysely<DB>, limit: number, cursor: string | undefined) {
  const after = decodeCursor(cursor, 2);
  let q = db.selectFrom('users').selectAll().orderBy('created_at').orderBy('id').limit(limit + 1);
  if (after) {
    const [at, id] = after as [string, string];
    q = q.where((eb) => eb.or([eb('created_at', '>', new Date(at)), eb.and([eb('created_at', '=', new Date(at)), eb('id', '>', id)])]));
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

/** Revocation list of logged-out tokens; expired entries are pruned on the way. */
export async function revokeToken(db: Kysely<DB>, jti: string, expiresAt: Date): Promise<void> {
  await db.insertInto('revoked_tokens').values({ jti, expires_at: expiresAt }).onConflict((oc) => oc.doNothing()).execute();
  await db.deleteFrom('revoked_tokens').where('expires_at', '<', new Date()).execute();
}

