import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { HashingGate, defaultHashingLimits, type HashingLimits } from './hashing-gate.js';
import { HashWorkerPool } from './hash-workers.js';

/** scrypt cost parameters: N=2^15, r=8, p=1 uses 32 MiB and ~60 ms per hash on one core. */
const N = 32768;
const R = 8;
const P = 1;
const KEY_LEN = 32;
const MAXMEM = 64 * 1024 * 1024;

/** Every hash of the process goes through this gate (see hashing-gate.ts) … */
const gate = new HashingGate(defaultHashingLimits());
/** … and runs on one of these low-priority threads (see hash-workers.ts), one per gate slot. */
const workers = new HashWorkerPool(defaultHashingLimits().concurrency);
/** Where hashes run: the worker pool, or libuv's thread pool (for benchmarks that compare). */
let executor: 'workers' | 'threadpool' = 'workers';

/**
 * Whole password checks (a login: throttle lookup, user lookup, hash, bookkeeping) in flight at
 * once: as many as the hashing gate runs and queues, and no more. A flood beyond that is refused
 * before it costs a database query, so it cannot crowd out other requests' queries either.
 */
const checks = new HashingGate(checkLimits(defaultHashingLimits()));

function checkLimits(limits: HashingLimits): HashingLimits {
  return { concurrency: limits.concurrency + limits.queue, queue: 0 };
}

/** Changes the hashing limits of this process (tests, benchmarks); the defaults suit a server. */
export function configurePasswordHashing(limits: HashingLimits & { executor?: 'workers' | 'threadpool' }): void {
  gate.configure(limits);
  checks.configure(checkLimits(limits));
  workers.resize(Math.min(limits.concurrency, 4));
  if (limits.executor) executor = limits.executor;
}

/**
 * Runs a whole password check (`work` hashes at most once or twice) if there is room; throws
 * HashingBusyError at once otherwise, before `work` starts.
 */
export function admitPasswordCheck<T>(work: () => Promise<T>): Promise<T> {
  return checks.run(work);
}

/** Current use of the hashing gate, for tests and benchmarks. */
export function passwordHashingStats() {
  return gate.stats;
}

/** scrypt through the gate: throws HashingBusyError at once when the queue is full. */
function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  const normalized = password.normalize('NFKC');
  return gate.run(() =>
    executor === 'workers'
      ? workers.scrypt(normalized, salt, keylen, options)
      : new Promise((resolve, reject) => {
          scryptCb(normalized, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key)));
        }),
  );
}

/** Hash format: `scrypt$N$r$p$<salt b64>$<hash b64>`, so the parameters can be raised later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LEN, { N, r: R, p: P, maxmem: MAXMEM });
  return ['scrypt', N, R, P, salt.toString('base64'), key.toString('base64')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, saltB64, hashB64] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(hashB64, 'base64');
  const key = await scrypt(password, Buffer.from(saltB64, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: MAXMEM,
  });
  return timingSafeEqual(key, expected);
}

let dummyHash: Promise<string> | undefined;

/**
 * Spends the same work as a real verification, for logins with an unknown email,
 * so that response time does not tell which emails exist.
 */
export async function equalizeTimingForUnknownUser(password: string): Promise<void> {
  // A refused or failed first hash (a full gate) must not stay cached: the next call tries again.
  dummyHash ??= hashPassword(randomBytes(16).toString('hex')).catch((err: unknown) => {
    dummyHash = undefined;
    throw err;
  });
  await verifyPassword(password, await dummyHash);
}
