import { createHash, createSecretKey, randomUUID, type webcrypto } from 'node:crypto';
import { SignJWT, jwtVerify, errors } from 'jose';

export interface UserTokenClaims {
  /** user id */
  sub: string;
  /** token id, used to revoke a token at logout */
  jti: string;
  /** issued at, in seconds with millisecond precision: compared with the user's `tokens_valid_after` */
  iat: number;
  exp: number;
  /**
   * The user's `tokens_valid_after` (milliseconds since the epoch, or null) read with the password
   * the login checked: the token stays valid only while the user's row still says so (decision
   * 0248). Absent from tokens issued before that decision, which are judged by `iat`.
   */
  tva?: number | null;
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

/**
 * How many verified tokens a process remembers per secret. A token's signature and claims checked
 * once by jose stay checked for those exact bytes; only its expiry moves (checked on every use).
 * jose verifies HS256 through Web Crypto, whose job goes through libuv's thread pool: 26–29 % of
 * a busy backend's main thread under `/auth/me` load (issue 17, decision 0195); a hit costs a
 * SHA-256 of the token and a map lookup. Revocation (logout, sessions revoked, a disabled user)
 * is not this cache's business: every request still passes the token check after it.
 */
const VERIFIED_MAX = 4096;

interface SecretState {
  key: webcrypto.CryptoKey;
  /** SHA-256 of a token (so that no lookup compares a stored token byte by byte with a presented one) → its claims. */
  verified: Map<string, Readonly<UserTokenClaims>>;
}

const secrets = new Map<string, SecretState>();

/**
 * The HMAC key of a secret, made once, as the Web Crypto key jose works with: jose turns a
 * KeyObject (or raw bytes) into one on every call, which cost more than the verification itself
 * (a `/auth/me` spent 110–160 µs in `jwtVerify` with a KeyObject, 75 µs with this; issue 17).
 */
function stateOf(secret: string): SecretState {
  let state = secrets.get(secret);
  if (!state) {
    const key = createSecretKey(Buffer.from(secret, 'utf8')).toCryptoKey({ name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    state = { key, verified: new Map() };
    secrets.set(secret, state);
  }
  return state;
}

/**
 * `validAfter`: the user's `tokens_valid_after` as the login read it, with the password hash it
 * checked (decision 0248); omitted (tests), the token is judged by its issue time.
 */
export async function issueUserToken(userId: string, secret: string, ttlSeconds: number, validAfter?: Date | null): Promise<IssuedToken> {
  const jti = randomUUID();
  // iat keeps milliseconds (RFC 7519 NumericDate may be fractional): revoking every session of
  // a user compares it with the revocation time, and a token issued a moment later must pass.
  const issuedAtMs = Date.now();
  const now = Math.floor(issuedAtMs / 1000);
  const exp = now + ttlSeconds;
  const token = await new SignJWT(validAfter === undefined ? {} : { tva: validAfter === null ? null : validAfter.getTime() })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(userId)
    .setJti(jti)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(issuedAtMs / 1000)
    .setExpirationTime(exp)
    .sign(stateOf(secret).key);
  return { token, jti, issuedAt: new Date(issuedAtMs), expiresAt: new Date(exp * 1000) };
}

/**
 * Verifies signature (HS256 only), issuer, audience and expiry; throws InvalidTokenError
 * otherwise. A token verified before is recognised by its SHA-256 and only its expiry checked
 * again (`VERIFIED_MAX`).
 */
export async function verifyUserToken(token: string, secret: string): Promise<UserTokenClaims> {
  if (token === '') throw new InvalidTokenError('missing token');
  const state = stateOf(secret);
  const digest = createHash('sha256').update(token).digest('base64');
  const known = state.verified.get(digest);
  if (known !== undefined) {
    // jose's rule: expired once `exp` is not after the current second.
    if (known.exp > Math.floor(Date.now() / 1000)) return known;
    state.verified.delete(digest);
    throw new InvalidTokenError('token expired');
  }
  let claims: Readonly<UserTokenClaims>;
  try {
    const { payload } = await jwtVerify(token, state.key, {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
    });
    if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string' || typeof payload.exp !== 'number' || typeof payload.iat !== 'number') {
      throw new InvalidTokenError('incomplete claims');
    }
    const tva = payload.tva;
    if (tva !== undefined && tva !== null && !Number.isSafeInteger(tva)) throw new InvalidTokenError('incomplete claims');
    claims = Object.freeze({
      sub: payload.sub,
      jti: payload.jti,
      iat: payload.iat,
      exp: payload.exp,
      ...(tva === undefined ? {} : { tva: tva as number | null }),
    });
  } catch (err) {
    if (err instanceof InvalidTokenError) throw err;
    if (err instanceof errors.JWTExpired) throw new InvalidTokenError('token expired');
    throw new InvalidTokenError('invalid token');
  }
  // The oldest entry makes room (a Map keeps insertion order).
  if (state.verified.size >= VERIFIED_MAX) state.verified.delete(state.verified.keys().next().value!);
  state.verified.set(digest, claims);
  return claims;
}

/** How many verified tokens the process remembers for `secret` (tests). */
export function verifiedTokensKept(secret: string): number {
  return secrets.get(secret)?.verified.size ?? 0;
}
