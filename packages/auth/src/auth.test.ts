import { describe, expect, it } from 'vitest';
import { parseBearer } from './bearer.js';
import { matchesAny, safeEqual, tokenFingerprint } from './compare.js';
import { hashPassword, verifyPassword } from './password.js';
import { InvalidTokenError, issueUserToken, verifyUserToken } from './jwt.js';

describe('parseBearer (SPEC §8.1)', () => {
  const cases: [string | undefined, string][] = [
    [undefined, ''],
    ['', ''],
    ['Bearer abc', 'abc'],
    ['Bearer   abc  ', 'abc'],
    ['Bearer \tabc\t', 'abc'],
    ['Bearer', ''],
    ['Bearer ', ''],
    ['Bearer      ', ''],
    ['bearer abc', ''],
    ['BEARER abc', ''],
    ['Basic abc', ''],
    ['Token abc', ''],
    [' Bearer abc', ''],
    ['Bearerabc', ''],
    ['Bearer a b', 'a b'],
  ];
  it.each(cases)('%j → %j', (header, token) => {
    expect(parseBearer(header)).toBe(token);
  });
  it('takes the first of repeated headers', () => {
    expect(parseBearer(['Bearer one', 'Bearer two'])).toBe('one');
  });
});

describe('constant-time comparison', () => {
  it('compares equal and unequal strings of any length', () => {
    expect(safeEqual('secret', 'secret')).toBe(true);
    expect(safeEqual('secret', 'secreT')).toBe(false);
    expect(safeEqual('secret', 'secret-longer')).toBe(false);
    expect(safeEqual('', '')).toBe(false);
  });
  it('matches any entry of a list, including the last', () => {
    expect(matchesAny('b', ['a', 'b', 'c'])).toBe(true);
    expect(matchesAny('c', ['a', 'b', 'c'])).toBe(true);
    expect(matchesAny('d', ['a', 'b', 'c'])).toBe(false);
    expect(matchesAny('', [])).toBe(false);
  });
  it('fingerprints a token as 12 hex chars of its SHA-256', () => {
    expect(tokenFingerprint('abc')).toBe('ba7816bf8f01');
  });
});

describe('password hashing (scrypt)', () => {
  it('verifies the right password only, with a fresh salt each time', async () => {
    const a = await hashPassword('correct horse');
    const b = await hashPassword('correct horse');
    expect(a).not.toBe(b);
    expect(a).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(await verifyPassword('correct horse', a)).toBe(true);
    expect(await verifyPassword('correct horsE', a)).toBe(false);
    expect(await verifyPassword('correct horse', 'garbage')).toBe(false);
  });
});

describe('user tokens', () => {
  const secret = 's'.repeat(40);
  it('round-trips subject and id', async () => {
    const issued = await issueUserToken('u1', secret, 60);
    const claims = await verifyUserToken(issued.token, secret);
    expect(claims).toMatchObject({ sub: 'u1', jti: issued.jti });
  });
  it('rejects another key, tampering and emptiness', async () => {
    const issued = await issueUserToken('u1', secret, 60);
    await expect(verifyUserToken(issued.token, 't'.repeat(40))).rejects.toBeInstanceOf(InvalidTokenError);
    await expect(verifyUserToken(`${issued.token}x`, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    await expect(verifyUserToken('', secret)).rejects.toBeInstanceOf(InvalidTokenError);
  });
});
