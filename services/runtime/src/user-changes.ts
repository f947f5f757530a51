import { EVERY_USER, USERS_CHANNEL, type Database, type Listener } from '@codeagent/db';
import type { FastifyBaseLogger } from 'fastify';
import type { FollowedSockets } from './lab-sockets.js';

/** The lab proxy's `followUsers`, over a listening connection of the platform's database, and its end. */
export interface UsersFollower {
  follow(sockets: FollowedSockets): void;
  close(): Promise<void>;
}

/**
 * Tells the lab's open websockets of every change the backend announces on USERS_CHANNEL
 * (decision 0259): a user's (a logout, sessions revoked, disabled, deleted, a membership removed
 * or changed) ends that user's websockets; one of everyone (a workspace renamed or deleted) ends
 * those of the workspaces that are gone. After the listening connection was lost, every websocket
 * ends: what changed meanwhile is unknown. The database is opened at the first websocket (the
 * runtime opens it lazily); while it cannot be, it is tried again every 5 s.
 */
export function usersFollower(database: () => Promise<Database>, log: FastifyBaseLogger): UsersFollower {
  let listener: Listener | undefined;
  let closed = false;
  const follow = (sockets: FollowedSockets): void => {
    database().then(
      (opened) => {
        if (closed) return;
        const workspacesChanged = async () => {
          const open = sockets.workspaces();
          if (open.length === 0) return;
          const live = await opened.db.selectFrom('workspaces').select('id').where('id', 'in', open).where('deleted_at', 'is', null).execute();
          const kept = new Set(live.map((w) => w.id));
          sockets.endWorkspaces(open.filter((id) => !kept.has(id)));
        };
        let missed = false;
        listener = opened.listen(USERS_CHANNEL, {
          onNotify: (payload) => {
            if (payload !== EVERY_USER) return sockets.userChanged(payload);
            workspacesChanged().catch((err: unknown) => {
              log.warn({ reason: (err as Error).message }, 'the live workspaces could not be read');
              sockets.endAll();
            });
          },
          onConnect: () => {
            if (missed) sockets.endAll();
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
        if (!closed) setTimeout(() => follow(sockets), 5000).unref();
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
