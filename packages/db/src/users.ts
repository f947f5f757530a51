import { sql, type Kysely } from 'kysely';
import type { DB, UserRow } from './schema.js';

/** What a verified user token says about itself (the claims `findActiveTokenUser` needs). */
export interface TokenIdentity {
  /** user id */
  sub: string;
  /** token id */
  jti: string;
  /** issued at, seconds since the epoch (with milliseconds) */
  iat: number;
  /** The user's `tokens_valid_after` when the token was issued (milliseconds, or null); absent from older tokens. */
  tva?: number | null | undefined;
}

/** The instant a token was issued, to the millisecond, from its `iat` claim. */
export function tokenIssuedAt(token: Pick<TokenIdentity, 'iat'>): Date {
  return new Date(Math.round(token.iat * 1000));
}

/**
 * The user a verified token names, unless the token is no longer valid: the user was deleted or
 * disabled, every session of the user was revoked since the token was issued (password change
 * or reset, disabling; the session that changed its own password is kept), or the token itself
 * was revoked at logout. One round trip, so revocation is immediate in every service that
 * accepts user tokens (backend, bridge) at no extra cost.
 *
 * "Since": a token that carries the `tokens_valid_after` its login read (with the password hash
 * it checked) is valid while the row still holds that value, so a login that checked the old
 * password while a reset committed gets a token that is refused, whatever the clocks say
 * (decision 0248); an older token, issued without it, by its issue time.
 */
export async function findActiveTokenUser(db: Kysely<DB>, token: TokenIdentity): Promise<UserRow | undefined> {
  const tva = token.tva;
  return db
    .selectFrom('users')
    .selectAll()
    .where('id', '=', token.sub)
    .where('disabled_at', 'is', null)
    .where((eb) =>
      eb.or([
        tva === undefined
          ? eb.or([eb('tokens_valid_after', 'is', null), eb('tokens_valid_after', '<=', tokenIssuedAt(token))])
          : tva === null
            ? eb('tokens_valid_after', 'is', null)
            : eb('tokens_valid_after', '=', new Date(tva)),
        eb('kept_token_jti', '=', token.jti),
      ]),
    )
    .where((eb) => eb.not(eb.exists(eb.selectFrom('revoked_tokens').select('jti').where('jti', '=', token.jti))))
    .executeTakeFirst();
}

/** The platform role whose holders are system administrators (docs/contract/seed.md §2.4). */
export const ADMIN_ROLE_ID = 'admin';

/** `is_system_admin` is derived from the role, never stored. */
export function isSystemAdmin(user: Pick<UserRow, 'platform_role_id'>): boolean {
  return user.platform_role_id === ADMIN_ROLE_ID;
}

/**
 * The channel on which a change of a user's sessions is announced (logout, every session revoked,
 * disabled, deleted, role or name changed, a membership added, changed or removed), the user id as payload: services that cache token
 * checks (service-kit's userAuth) forget that user's entries (docs/decisions/0082-token-check-cache.md).
 */
export const USERS_CHANNEL = 'codeagent_users';

/** The payload of a change that concerns every user (a workspace renamed or deleted): listeners forget everything. */
export const EVERY_USER = '';

/** A user id as the users' channel carries it: as PostgreSQL writes a uuid (lower case), whatever case a request used. */
export function announcedUserId(userId: string): string {
  return userId.toLowerCase();
}

/**
 * Announces a change of `userId`'s sessions, record or memberships (EVERY_USER: of everyone's);
 * inside the writing transaction (sent at commit).
 */
export async function notifyUserChanged(db: Kysely<DB>, userId: string): Promise<void> {
  // Listeners match the id exactly.
  await sql`SELECT pg_notify(${USERS_CHANNEL}, ${announcedUserId(userId)})`.execute(db);
}
