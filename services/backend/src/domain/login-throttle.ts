import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { TooManyRequestsError } from '@codeagent/service-kit';

/**
 * Login throttling (docs/contract/spec.md §4.5), kept in PostgreSQL so that it holds across several backends.
 * Each key (the account, the client address) gets `free` failures; every further failure
 * locks the key for base·2^k seconds (k = failures beyond the free ones, minus one), at most
 * `maxDelaySeconds`. While a key is locked every attempt, right or wrong, answers 429 with
 * `Retry-After`, before any password is checked: no oracle, and no hashing cost. A key's count
 * starts again after `windowSeconds` without failures (counted from the end of its last lock).
 */
export interface LoginThrottlePolicy {
  accountFreeFailures: number;
  addressFreeFailures: number;
  baseDelaySeconds: number;
  maxDelaySeconds: number;
  windowSeconds: number;
  /** How often a backend drops quiet keys. */
  pruneIntervalSeconds: number;
}

export const DEFAULT_LOGIN_THROTTLE: LoginThrottlePolicy = {
  // An owner mistyping their password a few times is never slowed down.
  accountFreeFailures: 5,
  // Many people may share one address (an office, a NAT): more room before it is slowed.
  addressFreeFailures: 50,
  baseDelaySeconds: 1,
  maxDelaySeconds: 15 * 60,
  windowSeconds: 15 * 60,
  pruneIntervalSeconds: 60,
};

export interface ThrottleKeys {
  account: string;
  address: string;
}

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;

/** The eight hextets of an IPv6 address, expanded (`::` filled with zeros). */
function ipv6Hextets(address: string): string[] {
  const [head = '', tail] = address.split('::') as [string, string | undefined];
  const split = (s: string) => (s === '' ? [] : s.split(':'));
  const left = split(head);
  const right = tail === undefined ? [] : split(tail);
  const fill = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((h) => h.toLowerCase().replace(/^0+(?=.)/, ''));
}

/**
 * The throttling unit of a client address: an IPv4 address as it is (also when written as an
 * IPv4-mapped IPv6 address), an IPv6 address by its /64 prefix (one subscriber usually holds a
 * whole /64 and could otherwise rotate through it).
 */
export function addressKey(ip: string): string {
  const bare = ip.replace(/%.*$/, '');
  const mapped = IPV4_MAPPED.exec(bare);
  if (mapped) return mapped[1]!;
  if (isIP(bare) === 6 && !bare.includes('.')) return `${ipv6Hextets(bare).slice(0, 4).join(':')}::/64`;
  return bare;
}

/** Keys of one login attempt: by the email (hashed: any email, known or not, gives a fixed-size key and none is stored in clear) and by the client address. */
export function throttleKeys(normalizedEmail: string, ip: string): ThrottleKeys {
  return {
    account: `account:${createHash('sha256').update(normalizedEmail, 'utf8').digest('hex')}`,
    address: `address:${addressKey(ip)}`,
  };
}

export class LoginThrottle {
  constructor(
    private readonly db: Kysely<DB>,
    readonly policy: LoginThrottlePolicy = DEFAULT_LOGIN_THROTTLE,
  ) {}

  /** Throws 429 (with the seconds until the later lock ends) when either key is locked. */
  async check(keys: ThrottleKeys): Promise<void> {
    const row = await this.db
      .selectFrom('login_throttle')
      .select(sql<number | string | null>`extract(epoch from max(locked_until) - now())`.as('wait'))
      .where('key', 'in', [keys.account, keys.address])
      .where('locked_until', '>', sql<Date>`now()`)
      .executeTakeFirst();
    const wait = row?.wait === null || row?.wait === undefined ? 0 : Number(row.wait);
    if (wait > 0) throw new TooManyRequestsError(`too many failed logins; try again in ${Math.ceil(wait)} s`, wait);
  }

  /**
   * Counts one failure against both keys in one statement, locking a key once it is past its
   * free failures (a first failure never locks: every key has at least one free failure).
   */
  async recordFailure(keys: ThrottleKeys): Promise<void> {
    const { baseDelaySeconds: base, maxDelaySeconds: max, windowSeconds: window } = this.policy;
    const accountFree = Math.max(1, this.policy.accountFreeFailures);
    const addressFree = Math.max(1, this.policy.addressFreeFailures);
    // The count after this failure: it restarts at 1 after a quiet window since the last failure or lock.
    const count = sql<number>`(CASE WHEN greatest(t.last_failure_at, coalesce(t.locked_until, t.last_failure_at)) < now() - make_interval(secs => ${window}::float8) THEN 1 ELSE t.failures + 1 END)`;
    const free = sql<number>`(CASE WHEN starts_with(t.key, 'account:') THEN ${accountFree}::int ELSE ${addressFree}::int END)`;
    await sql`
      INSERT INTO login_throttle AS t (key, failures, last_failure_at, locked_until)
      VALUES (${keys.account}, 1, now(), NULL), (${keys.address}, 1, now(), NULL)
      ON CONFLICT (key) DO UPDATE SET
        failures = ${count},
        last_failure_at = now(),
        locked_until = greatest(t.locked_until, CASE WHEN ${count} > ${free}
          THEN now() + make_interval(secs => least(${max}::float8, ${base}::float8 * power(2::float8, least(${count} - ${free} - 1, 40))))
          ELSE NULL END)
    `.execute(this.db);
    await this.pruneNowAndThen();
  }

  /** A successful login forgets the account's failures (not the address's: one valid account must not reset a guessing address). */
  async recordSuccess(keys: ThrottleKeys): Promise<void> {
    await this.db.deleteFrom('login_throttle').where('key', '=', keys.account).execute();
  }

  /** Forgets the failures of an account (an administrator reset its password). */
  async forgetAccount(normalizedEmail: string): Promise<void> {
    await this.db.deleteFrom('login_throttle').where('key', '=', throttleKeys(normalizedEmail, '').account).execute();
  }

  private lastPrune = 0;

  /**
   * Drops keys that have been quiet for a whole window, at most once a minute per backend: the
   * table stays bounded whatever the flood, at the cost of one query a minute, not one per failure.
   */
  private async pruneNowAndThen(): Promise<void> {
    if (Date.now() - this.lastPrune < this.policy.pruneIntervalSeconds * 1000) return;
    this.lastPrune = Date.now();
    await this.db
      .deleteFrom('login_throttle')
      .where('last_failure_at', '<', sql<Date>`now() - make_interval(secs => ${this.policy.windowSeconds}::float8)`)
      .where((eb) =>
        eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', sql<Date>`now() - make_interval(secs => ${this.policy.windowSeconds}::float8)`)]),
      )
      .execute();
  }
}
