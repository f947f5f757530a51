import { USERS_CHANNEL, type Database, type Listener } from '@codeagent/db';
import type { FastifyBaseLogger } from 'fastify';
import type { LabProxyOptions } from './lab-proxy.js';

/** The lab proxy's `followUsers`, over a listening connection of the platform's database, and its end. */
export interface UsersFollower {
  follow: NonNullable<LabProxyOptions['followUsers']>;
  close(): Promise<void>;
}

/**
 * Tells the lab proxy of every change of a user's sessions, record or memberships (USERS_CHANNEL:
 * a logout, sessions revoked, disabled, deleted, a membership removed or changed; decision 0259),
 * so that their open websockets end whichever ingress let them in. The database is opened at the
 * first websocket (the runtime opens it lazily); while it cannot be, it is tried again every 5 s.
 * After the listening connection was lost, every user's websockets end: what changed meanwhile
 * is unknown.
 */
export function usersFollower(database: () => Promise<Database>, log: FastifyBaseLogger): UsersFollower {
  let listener: Listener | undefined;
  let closed = false;
  const follow: UsersFollower['follow'] = (changed, lost) => {
    database().then(
      (opened) => {
        if (closed) return;
        let missed = false;
        listener = opened.listen(USERS_CHANNEL, {
          onNotify: changed,
          onConnect: () => {
            if (missed) lost();
            missed = false;
          },
          onDisconnect: () => void (missed = true),
        });
      },
      (err: unknown) => {
        log.warn(
          { reason: (err as Error).message },
          "the database is not reachable: users' lab websockets do not end on their changes until it is; trying again in 5 s",
        );
        if (!closed) setTimeout(() => follow(changed, lost), 5000).unref();
      },
    );
  };
  return {
    follow,
    async close() {
      closed = true;
      await listener?.close();
    },
  };
}
