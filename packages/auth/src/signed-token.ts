import { createHmac, timingSafeEqual } from 'node:crypto';
import { InvalidTokenError } from './jwt.js';

/**
 * The platform's own short tokens: `<prefix><payload>.<HMAC-SHA256>`, the payload base64url JSON.
 * Never a JWT (each kind has its prefix), so no user-token check takes one for another.
 */
export function signToken(prefix: string, key: Buffer, claims: object): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${prefix}${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`;
}

/** The claims of a token `signToken` made with `key` (the signature compared in constant time); throws InvalidTokenError otherwise. */
export function openToken(prefix: string, key: Buffer, token: string, what: string): Record<string, unknown> {
  if (!token.startsWith(prefix)) throw new InvalidTokenError(`not a ${what}`);
  const [payload, signature, ...rest] = token.slice(prefix.length).split('.');
  if (!payload || !signature || rest.length > 0) throw new InvalidTokenError(`malformed ${what}`);
  const given = Buffer.from(signature, 'base64url');
  const expected = createHmac('sha256', key).update(payload).digest();
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new InvalidTokenError(`invalid ${what} signature`);
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidTokenError(`malformed ${what}`);
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new InvalidTokenError(`malformed ${what}`);
  return claims as Record<string, unknown>;
}
