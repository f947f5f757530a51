import { createHmac, randomBytes } from 'node:crypto';
import { InvalidTokenError } from './jwt.js';
import { openToken, signToken } from './signed-token.js';

/** Every mount token starts with this: never a JWT, so no user-token check can take one. */
export const MOUNT_TOKEN_PREFIX = 'mnt.';
/** A mount token lives this long at most (decision 0140). */
export const MOUNT_TOKEN_MAX_SECONDS = 15 * 60;

export interface MountTokenClaims {
  /** The one workspace whose WebDAV tree the token opens. */
  ws: string;
  /** Expiry, seconds since the epoch. */
  exp: number;
  /** Token id (random), for logs. */
  jti: string;
}

/**
 * The key of mount tokens, derived from INTERNAL_SERVICE_TOKEN (as JUPYTERLAB_TOKEN is): the
 * runtime mints with it, the backend checks with it, and the internal token itself never leaves.
 */
export function mountTokenKey(internalServiceToken: string): Buffer {
  if (!internalServiceToken) throw new Error('mount tokens need INTERNAL_SERVICE_TOKEN');
  return createHmac('sha256', internalServiceToken).update('codeagent mount token').digest();
}

/** A token for the platform's own mount of one workspace: `mnt.<payload>.<HMAC-SHA256>`. */
export function issueMountToken(key: Buffer, workspaceId: string, ttlSeconds = MOUNT_TOKEN_MAX_SECONDS, now = Date.now()): { token: string; expiresAt: Date } {
  const ttl = Math.min(Math.max(1, Math.floor(ttlSeconds)), MOUNT_TOKEN_MAX_SECONDS);
  const claims: MountTokenClaims = { ws: workspaceId.toLowerCase(), exp: Math.floor(now / 1000) + ttl, jti: randomBytes(12).toString('base64url') };
  return { token: signToken(MOUNT_TOKEN_PREFIX, key, claims), expiresAt: new Date(claims.exp * 1000) };
}

export function isMountToken(token: string): boolean {
  return token.startsWith(MOUNT_TOKEN_PREFIX);
}

/** Checks the signature (constant time), the shape and the expiry; throws InvalidTokenError otherwise. */
export function verifyMountToken(key: Buffer, token: string, now = Date.now()): MountTokenClaims {
  const claims = openToken(MOUNT_TOKEN_PREFIX, key, token, 'mount token') as Partial<MountTokenClaims>;
  if (typeof claims.ws !== 'string' || typeof claims.exp !== 'number' || typeof claims.jti !== 'string') throw new InvalidTokenError('malformed mount token');
  if (claims.exp * 1000 <= now) throw new InvalidTokenError('mount token expired');
  // A token that claims to live longer than any token may was not made by this platform's rule.
  if (claims.exp * 1000 > now + (MOUNT_TOKEN_MAX_SECONDS + 60) * 1000) throw new InvalidTokenError('mount token lives too long');
  return { ws: claims.ws, exp: claims.exp, jti: claims.jti };
}
