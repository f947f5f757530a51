import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';
import { TooManyRequestsError } from '@codeagent/service-kit';

/**
 * Login throttling (docs/contract/spec.md §4.5), kept in PostgreSQL so that it holds across several backends.
 * Each key (the account, the client address, the account from that address) gets `free`
 * failures; every further failure locks the key for base·2^k seconds (k = failures beyond the
 * free ones, minus one), at most `maxDelaySeconds`. While a key is locked every attempt, right
 * or wrong, answers 429 with `Retry-After`, before any password is checked: no oracle, and no
 * hashing cost. A key's count starts again after `windowSeconds` without failures (counted from
 * the end of its last lock).
 *
 * The account-wide key is the one anyone can lock (a stranger's wrong passwords for the
 * administrator's e-mail, one every 15 minutes, kept it locked for good: decision 0255). An
 * address the account logged in from within `knownAddressDays` is not held by it, only by its
 * own keys; guesses from anywhere else still are.
 */
export interface LoginThrottlePolicy {
  accountFreeFailures: number;
  addressFreeFailures: number;
  baseDelaySeconds: number;
  maxDelaySeconds: number;
  windowSeconds: number;
  /** How often a backend drops quiet keys. */
  pruneIntervalSeconds: number;
  /** How long an address an account logged in from stays known to it. */
  knownAddressDays: number;
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
  knownAddressDays: 30,
};

export interface ThrottleKeys {
  account: string;
  address: string;
  /** The account from this address: what holds an address the account knows. */
  pair: string;
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
  const email = emailHash(normalizedEmail);
  const address = `address:${addressKey(ip)}`;
  return { account: `account:${email}`, address, pair: `${pairsOf(email)}${createHash('sha256').update(address, 'utf8').digest('hex')}` };
}

const emailHash = (normalizedEmail: string) => createHash('sha256').update(normalizedEmail, 'utf8').digest('hex');
/** What every pair key of an account begins with: an administrator's reset forgets them all. */
const pairsOf = (email: string) => `pair:${email}:`;

export class LoginThrottle {
  constructor(
    private readonly db: Kysely<DB>,
    readonly policy: LoginThrottlePolicy = DEFAULT_LOGIN_THROTTLE,
  ) {}

  /**
   * Throws 429 (with the seconds until the latest lock ends) when the address's key or the
   * account's from this address is locked, or the account's own while the address is not one it
   * logged in from.
   */
  async check(keys: ThrottleKeys): Promise<void> {
    const days = this.policy.knownAddressDays;
    const row = await this.db
      .selectFrom('login_throttle')
      .select(sql<number | string | null>`extract(epoch from max(locked_until) - now())`.as('wait'))
      .where('locked_until', '>', sql<Date>`now()`)
      .where((eb) =>
        eb.or([
          eb('key', 'in', [keys.address, keys.pair]),
          eb.and([
            eb('key', '=', keys.account),
            eb.not(
              eb.exists(
                eb
                  .selectFrom('login_known_addresses')
                  .select(sql`1`.as('one'))
                  .where('account', '=', keys.account)
                  .where('address', '=', keys.address)
                  .where('last_login_at', '>', sql<Date>`now() - make_interval(days => ${days}::int)`),
              ),
            ),
          ]),
        ]),
      )
      .executeTakeFirst();
    const wait = row?.wait === null || row?.wait === undefined ? 0 : Number(row.wait);
    if (wait > 0) throw new TooManyRequestsError(`too many failed logins; try again in ${Math.ceil(wait)} s`, wait);
  }

  /**
   * Counts one failure against the three keys in one statement, locking a key once it is past
   * its free failures (a first failure never locks: every key has at least one free failure).
   */
  async recordFailure(keys: ThrottleKeys): Promise<void> {
    const { baseDelaySeconds: base, maxDelaySeconds: max, windowSeconds: window } = this.policy;
    const accountFree = Math.max(1, this.policy.accountFreeFailures);
    const addressFree = Math.max(1, this.policy.addressFreeFailures);
    // The count after this failure: it restarts at 1 after a quiet window since the last failure or lock.
    const count = sql<number>`(CASE WHEN greatest(t.last_failure_at, coalesce(t.locked_until, t.last_failure_at)) < now() - make_interval(secs => ${window}::float8) THEN 1 ELSE t.failures + 1 END)`;
    const free = sql<number>`(CASE WHEN starts_with(t.key, 'address:') THEN ${addressFree}::int ELSE ${accountFree}::int END)`;
    await sql`
      INSERT INTO login_throttle AS t (key, failures, last_failure_at, locked_until)
      VALUES (${keys.account}, 1, now(), NULL), (${keys.address}, 1, now(), NULL), (${keys.pair}, 1, now(), NULL)
      ON CONFLICT (key) DO UPDATE SET
        failures = ${count},
        last_failure_at = now(),
        locked_until = greatest(t.locked_until, CASE WHEN ${count} > ${free}
          THEN now() + make_interval(secs => least(${max}::float8, ${base}::float8 * power(2::float8, least(${count} - ${free} - 1, 40))))
          ELSE NULL END)
    `.execute(this.db);
    await this.pruneNowAndThen();
  }

  /**
   * A successful login forgets the failures of the account from this address, and the
   * account's own unless they hold it locked now (the owner logging in from a known address while
   * a stranger guesses must not open the account to every other address again); never the
   * address's (one valid account must not reset a guessing address). The account knows the
   * address from now on.
   */
  async recordSuccess(keys: ThrottleKeys): Promise<void> {
    await this.db
      .deleteFrom('login_throttle')
      .where((eb) =>
        eb.or([
          eb('key', '=', keys.pair),
          eb.and([eb('key', '=', keys.account), eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', sql<Date>`now()`)])]),
        ]),
      )
      .execute();
    await this.db
      .insertInto('login_known_addresses')
      .values({ account: keys.account, address: keys.address })
      .onConflict((oc) => oc.columns(['account', 'address']).doUpdateSet({ last_login_at: sql<Date>`now()` }))
      .execute();
  }

  /** Forgets the failures of an account, from every address (an administrator reset its password). */
  async forgetAccount(normalizedEmail: string): Promise<void> {
    const email = emailHash(normalizedEmail);
    const account = `account:${email}`;
    const pairs = `${pairsOf(email)}%`;
    await this.db
      .deleteFrom('login_throttle')
      .where((eb) => eb.or([eb('key', '=', account), eb('key', 'like', pairs)]))
      .execute();
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
      .deleteFrom('login_known_addresses')
      .where('last_login_at', '<', sql<Date>`now() - make_interval(days => ${this.policy.knownAddressDays}::int)`)
      .execute();
    await this.db
      .deleteFrom('login_throttle')
      .where('last_failure_at', '<', sql<Date>`now() - make_interval(secs => ${this.policy.windowSeconds}::float8)`)
      .where((eb) =>
        eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', sql<Date>`now() - make_interval(secs => ${this.policy.windowSeconds}::float8)`)]),
      )
      .execute();
  }
}
