import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { USERS_CHANNEL, announcedUserId, findActiveTokenUser, isSystemAdmin, type DB, type Database, type Listener, type UserRow } from '@codeagent/db';
import {
  isLabToken,
  isMountToken,
  labStateMatches,
  labTokenKey,
  refusedCrossSite,
  requestCredential,
  verifyLabToken,
  verifyMountToken,
  verifyUserToken,
  InvalidTokenError,
  LAB_STATE_HEADER,
  type LabCredential,
  type UserTokenClaims,
} from '@codeagent/auth';
import { ForbiddenError, UnauthorizedError } from './errors.js';
import { HeardCache } from './heard-cache.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `requireUser`. */
    user: UserRow;
    tokenClaims: UserTokenClaims;
    /**
     * Set by `requireUserOrMount` when the caller is the platform's own mount of a workspace (a
     * mount token, decision 0140): the one workspace it may reach; `user` is then not set.
     */
    mountWorkspace: string | undefined;
    /** Set by `requireUserOrLab` when the caller came with a lab ticket or pass (decision 0263); `user` is its session's. */
    labCredential: LabCredential | undefined;
  }
  interface FastifyInstance {
    requireUser: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /**
     * `requireUser` that also takes the token as the password of HTTP Basic (any user name),
     * for clients that only know user name and password (WebDAV mounts).
     */
    requireUserOrBasic: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /**
     * `requireUserOrBasic` that also takes a workspace mount token (Bearer or Basic password):
     * for the WebDAV tree only, whose handler confines it to `req.mountWorkspace`.
     */
    requireUserOrMount: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    requireSystemAdmin: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /**
     * `requireUser` that also takes a lab pass (Bearer only) for `workspaceId`, the one workspace
     * whose JupyterLab the route serves (decision 0263), and with `tickets` (the session check
     * that exchanges them) a lab ticket with the state of the browser it was made for; one made
     * for another workspace, or a ticket without that state or where none is taken, is 401.
     */
    requireUserOrLab: (req: FastifyRequest, workspaceId: string | undefined, opts?: { tickets?: boolean }) => Promise<void>;
    /**
     * After a change of the user's sessions or record committed here (its NOTIFY included):
     * this instance forgets the user's cached token checks now, and waits (briefly) until the
     * notification has come back through the database, i.e. has reached every other instance.
     */
    userChanged: (userId: string) => Promise<void>;
    /**
     * A cache of answers derived from one user's rows, forgotten with the token checks when a
     * change of the user (or of everyone: an empty id) is announced on the users' channel.
     */
    userScopedCache: <V>() => UserScopedCache<V>;
  }
}

/**
 * The host the client addressed, for the origin rule of `@codeagent/auth`: the gateway in front
 * forwards it as X-Forwarded-Host (a browser cannot set that header on a cross-site request
 * without a preflight, which nothing here answers).
 */
function addressedHost(req: FastifyRequest): string | undefined {
  return (req.headers['x-forwarded-host'] as string | undefined) ?? req.headers.host;
}

export interface UserAuthOptions {
  db: Kysely<DB>;
  jwtSecret: string;
  /**
   * LISTEN for user changes (Database.listen). With it, a token's check is cached for
   * `cacheMs` and forgotten as soon as a change of its user is announced; without it (or while
   * the listening connection is down) every request checks the database.
   */
  listen?: Database['listen'] | undefined;
  /** How long a cached answer (a token check, a user's workspaces) stays at most (default 10 s); 0 disables the caches. */
  cacheMs?: number;
  /** Entries of each cache at most (default 10 000; the oldest go first). */
  cacheEntries?: number;
  /** The key of workspace mount tokens (`mountTokenKey(INTERNAL_SERVICE_TOKEN)`); without it none is accepted. */
  mountTokenKey?: Buffer | undefined;
}

/** How long a change waits, after its own notification is back, for the other instances to read theirs. */
const SETTLE_MS = 25;

/**
 * Answers derived from one user's rows (a token check, the user's workspaces), each kept for at
 * most `ttlMs` and only while the LISTEN connection on the users' channel is up; every change
 * announced for the user (or for everyone) drops them (decision 0082, 0193).
 */
export interface UserScopedCache<V> {
  get(key: string): V | undefined;
  /** Take before reading the database; `set` stores the answer only if nothing of its user was forgotten since. */
  stamp(): number;
  set(key: string, userId: string, value: V, stamp: number): void;
}

class KeyedCache<V> implements UserScopedCache<V> {
  private readonly cache: HeardCache<{ userId: string; value: V }>;

  constructor(feed: UserChangeFeed, ttlMs: number, max: number) {
    this.cache = new HeardCache(() => feed.connected, ttlMs, max);
  }

  get(key: string): V | undefined {
    return this.cache.get(key)?.value;
  }

  stamp(): number {
    return this.cache.stamp();
  }

  set(key: string, userId: string, value: V, stamp: number): void {
    this.cache.set(key, { userId, value }, stamp, userId);
  }

  /** Drops the user's entries (every user's for an empty id); answers about other users read meanwhile stay good. */
  forget(userId: string): void {
    if (userId === '') this.cache.drop();
    else this.cache.drop((_key, e) => e.userId === userId, userId);
  }
}

/** The users' channel, heard by every cache of this instance; trusted only while its connection is up. */
class UserChangeFeed {
  private readonly caches: KeyedCache<never>[] = [];
  private readonly waiters = new Map<string, (() => void)[]>();
  private listener: Listener | undefined;

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
  ) {}

  get connected(): boolean {
    return this.listener?.connected ?? false;
  }

  start(listen: Database['listen']): void {
    this.listener = listen(USERS_CHANNEL, {
      onNotify: (userId) => this.heard(userId),
      // Changes announced while the connection was down were missed: start over.
      onConnect: () => this.forget(''),
      onDisconnect: () => this.forget(''),
    });
  }

  cache<V>(): UserScopedCache<V> {
    const cache = new KeyedCache<V>(this, this.ttlMs, this.max);
    this.caches.push(cache as KeyedCache<never>);
    return cache;
  }

  private forget(userId: string): void {
    for (const cache of this.caches) cache.forget(userId);
  }

  /** A notification: forget, and release whoever waits for it. */
  private heard(userId: string): void {
    this.forget(userId);
    for (const release of this.waiters.get(userId) ?? []) release();
    this.waiters.delete(userId);
  }

  async changed(id: string): Promise<void> {
    const userId = announcedUserId(id);
    this.forget(userId);
    if (!this.connected) return;
    // The NOTIFY went out at commit; once it is back here, PostgreSQL has handed it to every
    // listener. Each listener is its own server process, so the others' copies may trail ours by
    // a moment: a short settle (a change of sessions, roles or memberships is rare) lets them be read too.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 2000);
      const list = this.waiters.get(userId) ?? [];
      list.push(() => {
        clearTimeout(timer);
        setTimeout(resolve, SETTLE_MS);
      });
      this.waiters.set(userId, list);
    });
  }

  async close(): Promise<void> {
    this.forget('');
    for (const list of this.waiters.values()) for (const release of list) release();
    this.waiters.clear();
    await this.listener?.close();
  }
}

/** What an instance without the users' channel (or with caching off) keeps: nothing. */
const NO_CACHE: UserScopedCache<never> = { get: () => undefined, stamp: () => 0, set: () => undefined };

/**
 * User authentication of every service that users call (backend, bridge): Bearer JWT, or the
 * session cookie holding the same token; signature, expiry, revocation (logout, every session of
 * the user revoked, the user disabled) and the user's existence are checked in one query, whose
 * answer is cached per token while a LISTEN connection announces every change of users (see
 * UserAuthOptions.listen). The credential and cross-site rules are `@codeagent/auth`'s (decision 0120).
 */
export const userAuth = fp<UserAuthOptions>(
  // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
  async (app, opts) => {
    app.decorateRequest('user', null as unknown as UserRow);
    app.decorateRequest('tokenClaims', null as unknown as UserTokenClaims);
    app.decorateRequest('mountWorkspace', undefined);
    app.decorateRequest('labCredential', undefined);
    const labKey = labTokenKey(opts.jwtSecret);
    const cacheMs = opts.cacheMs ?? 10_000;
    const feed = opts.listen && cacheMs > 0 ? new UserChangeFeed(cacheMs, opts.cacheEntries ?? 10_000) : undefined;
    if (feed) {
      feed.start(opts.listen!);
      app.addHook('onClose', () => feed.close());
    }
    app.decorate('userChanged', async (userId: string) => {
      await feed?.changed(userId);
    });
    app.decorate('userScopedCache', <V>(): UserScopedCache<V> => feed?.cache<V>() ?? NO_CACHE);
    const tokenChecks = app.userScopedCache<UserRow>();

    /** The user of a session whose token checked out, while the session is still valid (cached per session). */
    const activeUser = async (claims: UserTokenClaims): Promise<UserRow> => {
      let user = tokenChecks.get(claims.jti);
      if (!user) {
        const stamp = tokenChecks.stamp();
        user = await findActiveTokenUser(opts.db, claims);
        if (!user) throw new UnauthorizedError('token is no longer valid; log in again');
        tokenChecks.set(claims.jti, user.id, user, stamp);
      }
      return user;
    };

    const authenticate = async (req: FastifyRequest, allowBasic: boolean): Promise<void> => {
      const credential = requestCredential(req.headers, { basic: allowBasic });
      if (!credential) {
        throw new UnauthorizedError(
          allowBasic
            ? 'log in first: send your token as Authorization: Bearer <token>, or as the password of HTTP Basic (any user name)'
            : 'log in first: send Authorization: Bearer <token> or the session cookie',
        );
      }
      let claims: UserTokenClaims;
      try {
        claims = await verifyUserToken(credential.token, opts.jwtSecret);
      } catch (err) {
        if (err instanceof InvalidTokenError) throw new UnauthorizedError(`${err.message}; log in again`);
        throw err;
      }
      const user = await activeUser(claims);
      // Checked after the token so that a stale token says "log in again" first, as before.
      if (refusedCrossSite(credential.source, req.method, req.headers, addressedHost(req))) {
        throw new ForbiddenError('cross-site request refused: send the token in the Authorization header');
      }
      req.user = user;
      req.tokenClaims = claims;
    };

    app.decorate('requireUser', async (req: FastifyRequest) => authenticate(req, false));
    app.decorate('requireUserOrBasic', async (req: FastifyRequest) => authenticate(req, true));
    app.decorate('requireUserOrMount', async (req: FastifyRequest) => {
      const credential = requestCredential(req.headers, { basic: true });
      // Only from the Authorization header: a mount is no browser, a cookie never holds one.
      if (credential && credential.source !== 'cookie' && isMountToken(credential.token)) {
        if (!opts.mountTokenKey) throw new UnauthorizedError('mount tokens are not accepted here');
        try {
          req.mountWorkspace = verifyMountToken(opts.mountTokenKey, credential.token).ws;
        } catch (err) {
          if (err instanceof InvalidTokenError) throw new UnauthorizedError(err.message);
          throw err;
        }
        return;
      }
      await authenticate(req, true);
    });

    app.decorate('requireUserOrLab', async (req: FastifyRequest, workspaceId: string | undefined, labOpts: { tickets?: boolean } = {}) => {
      const credential = requestCredential(req.headers);
      // Only as Bearer: the gateway of a lab's host hands its cookie on so, after its own origin check.
      if (!credential || credential.source !== 'bearer' || !isLabToken(credential.token)) return authenticate(req, false);
      let lab: LabCredential;
      try {
        lab = verifyLabToken(labKey, credential.token);
      } catch (err) {
        if (err instanceof InvalidTokenError) throw new UnauthorizedError(`${err.message}; open the lab again from the platform`);
        throw err;
      }
      if (workspaceId === undefined || workspaceId.toLowerCase() !== lab.workspaceId) {
        throw new UnauthorizedError('a lab pass opens only the JupyterLab of its own workspace');
      }
      if (lab.kind === 'ticket') {
        if (labOpts.tickets !== true) throw new UnauthorizedError('a lab ticket is exchanged for the lab’s pass, and opens nothing itself');
        const state = req.headers[LAB_STATE_HEADER];
        if (!labStateMatches(lab, typeof state === 'string' ? state : undefined)) {
          throw new UnauthorizedError('this link to the lab was made for another browser; open the lab again from the platform');
        }
      }
      req.user = await activeUser(lab.session);
      req.tokenClaims = lab.session;
      req.labCredential = lab;
    });

    app.decorate('requireSystemAdmin', async (req: FastifyRequest, reply: FastifyReply) => {
      await app.requireUser(req, reply);
      if (!isSystemAdmin(req.user)) throw new ForbiddenError('only system administrators may use the platform administration');
    });
  },
  { name: 'user-auth' },
);
