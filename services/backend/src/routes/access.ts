import type { Server } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { findActiveTokenUser, type DB, type MemberRole } from '@codeagent/db';
import { WORKSPACE_HEADER } from '@codeagent/auth';
import { UnauthorizedError } from '@codeagent/service-kit';
import { requireMountAccess, roleIn, workspacesOfUser, type UserWorkspaces, type WorkspaceAccess } from '../domain/workspaces.js';
import { holdLargeBodyPlace } from './large-bodies.js';

/**
 * Who may call a route, declared on the route as `config: { access }` (decision 0122):
 * - `public`: anyone, no token (login, health, the OpenAPI document);
 * - `user`: any signed-in user (Bearer or the session cookie);
 * - `system-admin`: a system administrator (docs/contract/spec.md §4.2);
 * - `workspace-viewer`: any member of the route's `:ws` workspace (a non-member: 404);
 * - `workspace-editor`: an editor or admin of `:ws` (a viewer: 403, a non-member: 404);
 * - `dav`: a signed-in user, the token also as the password of HTTP Basic, or a workspace mount
 *   token of the runtime (decision 0140); the WebDAV handler applies the workspace rule itself,
 *   reading or writing by method, after refusing the methods it does not offer (routes/dav.ts);
 * - `lab`: a signed-in user, or a lab ticket or pass (decision 0263) for the workspace the request
 *   names in `X-Codeagent-Workspace` (the session check the gateway asks for a lab's host).
 */
export type RouteAccess = 'public' | 'user' | 'system-admin' | 'workspace-viewer' | 'workspace-editor' | 'dav' | 'lab';

export const ROUTE_ACCESS: readonly RouteAccess[] = ['public', 'user', 'system-admin', 'workspace-viewer', 'workspace-editor', 'dav', 'lab'];

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; every route below the prefix of `routeAccess` must say. */
    access?: RouteAccess;
  }
  interface FastifyInstance {
    /**
     * The user's live workspaces and roles, cached per user while the users' channel announces
     * every change of them (a membership, a workspace renamed, created or deleted: decision 0193).
     */
    workspacesOf(userId: string): Promise<UserWorkspaces>;
    /** The membership rule of every workspace route (`roleIn`): the user's role, or 404 / 403. */
    requireWorkspaceAccess(userId: string, workspaceId: string, access: WorkspaceAccess): Promise<MemberRole>;
  }
}

export interface DeclaredRoute {
  method: string;
  url: string;
  /** Undefined only outside the prefix (the `/internal/v1` routes guard themselves with the internal token). */
  access: RouteAccess | undefined;
}

/** The routes each app registered, by its server (shared by every encapsulated scope of one app). */
const declared = new WeakMap<Server, DeclaredRoute[]>();

/** Every route registered after `routeAccess`, one entry per method, with its declared access (tests enumerate them). */
export function declaredRoutes(app: FastifyInstance): readonly DeclaredRoute[] {
  return declared.get(app.server) ?? [];
}

export interface RouteAccessOptions {
  db: Kysely<DB>;
  /** Routes whose URL starts with this must declare `config.access` (registration fails otherwise). */
  prefix: string;
}

/**
 * Enforces each route's declared access in one place: the identity in `onRequest` (so a missing
 * or bad token is 401 before the request is validated or its body read), the workspace role in
 * `preHandler` (after validation, before the handler, as the hand-written calls did). A route
 * below `prefix` without a valid `config.access` stops the app from starting: no route can be
 * open by omission. Register it on the root, after `userAuth` and before any route, so that it
 * sees every route of the app.
 */
export const routeAccess = fp<RouteAccessOptions>(
  // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
  async (app, { db, prefix }) => {
    app.addHook('onRoute', (route) => {
      const access = (route.config as { access?: unknown } | undefined)?.access;
      if (route.url.startsWith(prefix) && !ROUTE_ACCESS.includes(access as RouteAccess)) {
        const methods = [route.method].flat().join(',');
        throw new Error(
          `route ${methods} ${route.url} declares no access rule: add config: { access: ${ROUTE_ACCESS.map((a) => `'${a}'`).join(' | ')} } (docs/decisions/0122-route-access.md)`,
        );
      }
      const list = declared.get(app.server) ?? [];
      for (const method of [route.method].flat()) list.push({ method, url: route.url, access: access as RouteAccess | undefined });
      declared.set(app.server, list);
    });

    app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
      switch (req.routeOptions.config.access) {
        case 'user':
        case 'workspace-viewer':
        case 'workspace-editor':
          await app.requireUser(req, reply);
          break;
        case 'dav':
          // The WebDAV tree alone also takes the platform's own workspace mount tokens (0140).
          await app.requireUserOrMount(req, reply);
          break;
        case 'system-admin':
          await app.requireSystemAdmin(req, reply);
          break;
        case 'lab': {
          const workspace = req.headers[WORKSPACE_HEADER];
          await app.requireUserOrLab(req, typeof workspace === 'string' ? workspace : undefined, { tickets: true });
          break;
        }
        default:
          // 'public', and the not-found handler (no route, no access)
          return;
      }
      // Known now, before the body is read: a large body takes one of the caller's places (0256).
      if (!reply.sent) holdLargeBodyPlace(req, reply);
    });

    const lists = app.userScopedCache<UserWorkspaces>();
    app.decorate('workspacesOf', async (userId: string) => {
      let workspaces = lists.get(userId);
      if (!workspaces) {
        const stamp = lists.stamp();
        workspaces = await workspacesOfUser(db, userId);
        lists.set(userId, userId, workspaces, stamp);
      }
      return workspaces;
    });
    app.decorate('requireWorkspaceAccess', async (userId: string, workspaceId: string, access: WorkspaceAccess) =>
      roleIn(await app.workspacesOf(userId), workspaceId, access),
    );

    app.addHook('preHandler', async (req: FastifyRequest) => {
      const access = req.routeOptions.config.access;
      if (access !== 'workspace-viewer' && access !== 'workspace-editor') return;
      const { ws } = req.params as { ws?: string };
      if (ws === undefined) throw new Error(`route ${req.routeOptions.url ?? req.url} declares ${access} but has no :ws parameter`);
      await app.requireWorkspaceAccess(req.user.id, ws, access === 'workspace-editor' ? 'write' : 'read');
      // One spelling from here on: storage keys and lock keys are made of it, and PostgreSQL's
      // text of a uuid is lower case (an upper-case id stored content no other spelling found).
      (req.params as { ws: string }).ws = ws.toLowerCase();
    });
  },
  { name: 'route-access', dependencies: ['user-auth'] },
);

/**
 * The writer's right to write to `workspaceId`, asked again inside a write's transaction once its
 * body has arrived (decision 0261): the route checked it before the body, which may take minutes,
 * and a member removed or a user disabled meanwhile must not have it stored. The same rules as
 * the route's, read fresh from the transaction (no cache): the session still valid
 * (`findActiveTokenUser`), the membership and role (`roleIn`), or for a workspace mount its live
 * workspace.
 */
export function writeStillAllowed(req: FastifyRequest, workspaceId: string): (trx: Kysely<DB>) => Promise<void> {
  return async (trx) => {
    if (req.mountWorkspace !== undefined) return requireMountAccess(trx, workspaceId, req.mountWorkspace);
    const user = await findActiveTokenUser(trx, req.tokenClaims);
    if (!user) throw new UnauthorizedError('your session ended while this was being written; nothing was stored');
    roleIn(await workspacesOfUser(trx, user.id), workspaceId, 'write');
  };
}
