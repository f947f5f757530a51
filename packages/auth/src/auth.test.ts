import { afterEach, describe, expect, it, vi } from 'vitest';
import { SignJWT } from 'jose';
import { parseBasicPassword, parseBearer } from './bearer.js';
import { matchesAny, safeEqual, tokenFingerprint } from './compare.js';
import { configurePasswordHashing, hashPassword, passwordHashingStats, verifyPassword } from './password.js';
import { HashingBusyError, HashingGate, defaultHashingLimits } from './hashing-gate.js';
import { InvalidTokenError, issueUserToken, verifiedTokensKept, verifyUserToken } from './jwt.js';

describe('parseBearer (docs/contract/spec.md §8.1)', () => {
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

describe('parseBasicPassword (WebDAV mounts)', () => {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const cases: [string | undefined, string][] = [
    [undefined, ''],
    ['', ''],
    [`Basic ${b64('any:tok.en')}`, 'tok.en'],
    [`basic ${b64('x:tok:with:colons')}`, 'tok:with:colons'],
    [`Basic ${b64(':tok')}`, 'tok'],
    [`Basic ${b64('no-colon')}`, ''],
    [`Basic ${b64('user:')}`, ''],
    ['Basic not base64!', ''],
    ['Basic', ''],
    [`Bearer ${b64('a:b')}`, ''],
  ];
  it.each(cases)('%j → %j', (header, password) => {
    expect(parseBasicPassword(header)).toBe(password);
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
    expect(claims).toMatchObject({ sub: 'u1', jti: issued.jti, iat: expect.any(Number) as unknown });
    expect(claims.tva).toBeUndefined();
    // The sessions' revocation the login read travels with the token (decision 0248).
    expect((await verifyUserToken((await issueUserToken('u1', secret, 60, null)).token, secret)).tva).toBeNull();
    const at = new Date('2026-11-28T20:24:09.584Z');
    expect((await verifyUserToken((await issueUserToken('u1', secret, 60, at)).token, secret)).tva).toBe(at.getTime());
  });
  it('rejects another key, tampering and emptiness', async () => {
    const issued = await issueUserToken('u1', secret, 60);
    await expect(verifyUserToken(issued.token, 't'.repeat(40))).rejects.toBeInstanceOf(InvalidTokenError);
    await expect(verifyUserToken(`${issued.token}x`, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    await expect(verifyUserToken('', secret)).rejects.toBeInstanceOf(InvalidTokenError);
  });
  it('refuses alg none, another HMAC algorithm, claims changed under the old signature, another issuer or audience', async () => {
    const key = new TextEncoder().encode(secret);
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const claims = { sub: 'u1', jti: 'j1', iss: 'codeagent', aud: 'codeagent-user', iat: Date.now() / 1000, exp: Math.floor(Date.now() / 1000) + 60 };
    await expect(verifyUserToken(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    const hs512 = await new SignJWT(claims).setProtectedHeader({ alg: 'HS512' }).sign(key);
    await expect(verifyUserToken(hs512, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    const [header, , signature] = (await issueUserToken('u1', secret, 60)).token.split('.');
    await expect(verifyUserToken(`${header}.${b64({ ...claims, sub: 'admin' })}.${signature}`, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    for (const other of [{ iss: 'elsewhere' }, { aud: 'codeagent-admin' }]) {
      const token = await new SignJWT({ ...claims, ...other }).setProtectedHeader({ alg: 'HS256' }).sign(key);
      await expect(verifyUserToken(token, secret)).rejects.toBeInstanceOf(InvalidTokenError);
    }
    // The same claims, rightly signed, pass: the refusals above are about what was changed.
    expect((await verifyUserToken(await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(key), secret)).sub).toBe('u1');
  });
});

describe('verified tokens remembered (decision 0195)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('checks a token once: the same claims again, one entry per token', async () => {
    const secret = 'a'.repeat(40);
    const issued = await issueUserToken('u1', secret, 60);
    const first = await verifyUserToken(issued.token, secret);
    expect(verifiedTokensKept(secret)).toBe(1);
    expect(await verifyUserToken(issued.token, secret)).toEqual(first);
    expect(verifiedTokensKept(secret)).toBe(1);
  });

  it('a remembered token changes nothing for its tampered copies, nor for another secret', async () => {
    const secret = 'b'.repeat(40);
    const issued = await issueUserToken('u1', secret, 60);
    await verifyUserToken(issued.token, secret);
    const [header, payload, signature] = issued.token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url');
    for (const token of [`${header}.${forged}.${signature}`, `${header}.${payload}.${signature.slice(0, -2)}AA`, `${issued.token}x`, ` ${issued.token}`]) {
      await expect(verifyUserToken(token, secret), token).rejects.toBeInstanceOf(InvalidTokenError);
    }
    await expect(verifyUserToken(issued.token, 'c'.repeat(40))).rejects.toBeInstanceOf(InvalidTokenError);
    expect(verifiedTokensKept(secret)).toBe(1);
  });

  it('a remembered token still expires', async () => {
    const secret = 'd'.repeat(40);
    const issued = await issueUserToken('u1', secret, 60);
    await verifyUserToken(issued.token, secret);
    vi.useFakeTimers({ toFake: ['Date'], now: issued.expiresAt.getTime() - 1000 });
    expect((await verifyUserToken(issued.token, secret)).sub).toBe('u1');
    vi.setSystemTime(issued.expiresAt.getTime());
    await expect(verifyUserToken(issued.token, secret)).rejects.toThrow('token expired');
    // And it is gone: jose itself says so again.
    expect(verifiedTokensKept(secret)).toBe(0);
    await expect(verifyUserToken(issued.token, secret)).rejects.toThrow('token expired');
  });

  it('remembers at most 4096 tokens per secret, the oldest making room', async () => {
    const secret = 'e'.repeat(40);
    const tokens: string[] = [];
    for (let i = 0; i < 4100; i++) tokens.push((await issueUserToken(`u${i}`, secret, 60)).token);
    for (const token of tokens) await verifyUserToken(token, secret);
    expect(verifiedTokensKept(secret)).toBe(4096);
    // The oldest is checked again (and comes back), the newest is still known.
    expect((await verifyUserToken(tokens[0]!, secret)).sub).toBe('u0');
    expect(verifiedTokensKept(secret)).toBe(4096);
  });
});

describe('token issue time', () => {
  it('keeps milliseconds in iat, so a revocation a moment earlier does not cover a new token', async () => {
    const before = Date.now();
    const issued = await issueUserToken('u1', 's'.repeat(40), 60);
    const claims = await verifyUserToken(issued.token, 's'.repeat(40));
    expect(Math.round(claims.iat * 1000)).toBe(issued.issuedAt.getTime());
    expect(issued.issuedAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(Number.isInteger(claims.exp)).toBe(true);
  });
});

describe('password hashing admission (HashingGate)', () => {
  /** A unit of work that finishes when the test says so. */
  const held = () => {
    let release!: () => void;
    const done = new Promise<void>((r) => (release = r));
    return { work: () => done, release };
  };

  it('runs at most `concurrency` at once, queues up to `queue`, refuses the rest at once', async () => {
    const gate = new HashingGate({ concurrency: 2, queue: 1 });
    const jobs = [held(), held(), held()];
    const running = jobs.map((j) => gate.run(j.work));
    expect(gate.stats).toMatchObject({ running: 2, waiting: 1 });
    await expect(gate.run(() => Promise.resolve('never'))).rejects.toBeInstanceOf(HashingBusyError);
    jobs[0]!.release();
    await running[0];
    // The waiter took the freed slot; a new request may queue again.
    expect(gate.stats).toMatchObject({ running: 2, waiting: 0 });
    const late = held();
    const lateRun = gate.run(late.work);
    expect(gate.stats.waiting).toBe(1);
    for (const j of [jobs[1]!, jobs[2]!, late]) j.release();
    await Promise.all([...running, lateRun]);
    expect(gate.stats).toMatchObject({ running: 0, waiting: 0 });
  });

  it('frees the slot when the work fails', async () => {
    const gate = new HashingGate({ concurrency: 1, queue: 0 });
    await expect(gate.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate.run(() => Promise.resolve('ok'))).toBe('ok');
  });

  it('bounds real scrypt hashes: a burst beyond concurrency + queue is refused, the rest verify', async () => {
    configurePasswordHashing({ concurrency: 1, queue: 2 });
    try {
      const results = await Promise.allSettled(Array.from({ length: 6 }, () => hashPassword('burst password')));
      const refused = results.filter((r) => r.status === 'rejected');
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
      expect(refused).toHaveLength(3);
      for (const r of refused) expect(r.reason).toBeInstanceOf(HashingBusyError);
      expect(passwordHashingStats()).toMatchObject({ running: 0, waiting: 0 });
    } finally {
      configurePasswordHashing(defaultHashingLimits());
    }
  });

  it('defaults to half the cores (1 to 4) and a short queue', () => {
    expect(defaultHashingLimits(1)).toEqual({ concurrency: 1, queue: 8 });
    expect(defaultHashingLimits(2)).toEqual({ concurrency: 1, queue: 8 });
    expect(defaultHashingLimits(8)).toEqual({ concurrency: 4, queue: 32 });
    expect(defaultHashingLimits(64)).toEqual({ concurrency: 4, queue: 32 });
  });
});

describe('hashing threads', () => {
  it.runIf(process.platform === 'linux')('run scrypt on a thread of lower priority (nice 10), not on libuv’s pool', async () => {
    await hashPassword('any password');
    const { readdirSync, readFileSync } = await import('node:fs');
    const nices = readdirSync('/proc/self/task').map((tid) => {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which is in parentheses): nice is the 19th field overall.
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    });
    expect(nices).toContain(10);
    expect(nices).toContain(0);
  });
});
