import type { Kysely } from 'kysely';
import type { DB, UserRow } from './schema.js';

/**
 * The user a verified token names, unless that token was revoked at logout (one round trip).
 * Every service that accepts user tokens uses this after verifying the signature.
 */
export async function findActiveTokenUser(db: Kysely<DB>, userId: string, jti: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('id', '=', userId)
    .where((eb) => eb.not(eb.exists(eb.selectFrom('revoked_tokens').select('jti').where('jti', '=', jti))))
    .executeTakeFirst();
}

/** The platform role whose holders are system administrators (SEED §2.4). */
export const ADMIN_ROLE_ID = 'admin';

/** `is_system_admin` is derived from the role, never stored. */
export function isSystemAdmin(user: Pick<UserRow, 'platform_role_id'>): boolean {
  return user.platform_role_id === ADMIN_ROLE_ID;
}
