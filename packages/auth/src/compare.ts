import { createHash, timingSafeEqual } from 'node:crypto';

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * Constant-time string equality. Both sides are hashed first so that inputs of
 * different lengths take the same time and the length of the secret does not leak.
 * An empty secret never matches (an unset token must not open a route).
 */
export function safeEqual(given: string, expected: string): boolean {
  const same = timingSafeEqual(digest(given), digest(expected));
  return same && expected.length > 0;
}

/** True when `given` equals one of `candidates`; every entry is compared, whatever matched. */
export function matchesAny(given: string, candidates: readonly string[]): boolean {
  let found = false;
  for (const candidate of candidates) {
    // No early exit: the time taken does not depend on which entry matched.
    found = safeEqual(given, candidate) || found;
  }
  return found;
}

/** Stable, non-reversible name for a token (audit actor): first 12 hex chars of its SHA-256. */
export function tokenFingerprint(token: string): string {
  return digest(token).toString('hex').slice(0, 12);
}
