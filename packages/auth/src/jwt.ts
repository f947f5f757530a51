import { createSecretKey, randomUUID, type webcrypto } from 'node:crypto';
import { SignJWT, jwtVerify, errors } from 'jose';

export interface UserTokenClaims {
  /** user id */
  sub: string;
  /** token id, used to revoke a token at logout */
  jti: string;
  /** issued at, in seconds with millisecond precision: compared with the user's `tokens_valid_after` */
  iat: number;
  exp: number;
}

export interface IssuedToken {
  token: string;
  jti: string;
  issuedAt: Date;
  expiresAt: Date;
}

export class InvalidTokenError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'InvalidTokenError';
  }
}

const ISSUER = 'codeagent';
const AUDIENCE = 'codeagent-user';

const keys = new Map<string, webcrypto.CryptoKey>();

/**
 * The HMAC key of a secret, made once, as the Web Crypto key jose works with: jose turns a
 * KeyObject (or raw bytes) into one on every call, which cost more than the verification itself
 * (a `/auth/me` spent 110–160 µs in `jwtVerify` with a KeyObject, 75 µs with this; issue 17).
 */
function keyOf(secret: string): webcrypto.CryptoKey {
  let key = keys.get(secret);
  if (!key) {
    key = createSecretKey(Buffer.from(secret, 'utf8')).toCryptoKey({ name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    keys.set(secret, key);
  }
  return key;
}

export async function issueUserToken(userId: string, secret: string, ttlSeconds: number): Promise<IssuedToken> {
  const jti = randomUUID();
  // iat keeps milliseconds (RFC 7519 NumericDate may be fractional): revoking every session of
  // a user compares it with the revocation time, and a token issued a moment later must pass.
  const issuedAtMs = Date.now();
  const now = Math.floor(issuedAtMs / 1000);
  const exp = now + ttlSeconds;
  const token = await new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(userId)
    .setJti(jti)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(issuedAtMs / 1000)
    .setExpirationTime(exp)
    .sign(keyOf(secret));
  return { token, jti, issuedAt: new Date(issuedAtMs), expiresAt: new Date(exp * 1000) };
}

/** Verifies signature (HS256 only), issuer, audience and expiry; throws InvalidTokenError otherwise. */
export async function verifyUserToken(token: string, secret: string): Promise<UserTokenClaims> {
  if (token === '') throw new InvalidTokenError('missing token');
  try {
    const { payload } = await jwtVerify(token, keyOf(secret), {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
    });
    if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string' || typeof payload.exp !== 'number' || typeof payload.iat !== 'number') {
      throw new InvalidTokenError('incomplete claims');
    }
    return { sub: payload.sub, jti: payload.jti, iat: payload.iat, exp: payload.exp };
  } catch (err) {
    if (err instanceof InvalidTokenError) throw err;
    if (err instanceof errors.JWTExpired) throw new InvalidTokenError('token expired');
    throw new InvalidTokenError('invalid token');
  }
}
