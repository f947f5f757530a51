import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import cookie from '@fastify/cookie';
import { Type } from '@sinclair/typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import { LeaseBusyError, withLease, type DB, type Database } from '@codeagent/db';
import { SAFE_METHODS } from '@codeagent/auth';
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  KeyedLock,
  KeyedSlots,
  NotFoundError,
  TooManyRequestsError,
  isUuid,
  requestIdOptions,
  serviceKit,
  userAuth,
} from '@codeagent/service-kit';
import { buildPrompt, extractCode } from './prompts.js';
import { SessionMap, sessionKey, type SessionOwner } from './sessions.js';
import { assertNoUserInfo, resolveSettings, type BridgeEnvironment, type UserSettings } from './settings.js';
import { OpencodeClient, SessionGoneError, upstreamError, upstreamTimeout } from './upstream.js';

export const BRIDGE_VERSION = '0.1.0';

export interface BridgeOptions {
  db: Kysely<DB>;
  jwtSecret: string;
  /** LISTEN for user changes (Database.listen): token checks are then cached (decision 0082). */
  listen?: Database['listen'] | undefined;
  env: BridgeEnvironment;
  /** Directory the code-agent sessions belong to (CODEAGENT_BRIDGE_WORKDIR). */
  workdir: string;
  loggerInstance?: FastifyBaseLogger;
  /** Mappings kept per user (and workspace); the least recently used beyond it are removed. */
  maxSessionsPerUser?: number;
}

export const DEFAULT_MAX_SESSIONS_PER_USER = 200;

const Settings = Type.Object(
  {
    codeagentServerUrl: Type.Optional(Type.String({ maxLength: 2048 })),
    codeagentServerUser: Type.Optional(Type.String({ maxLength: 200 })),
    codeagentServerPassword: Type.Optional(Type.String({ maxLength: 1000 })),
    codeagentProvider: Type.Optional(Type.String({ maxLength: 200 })),
    codeagentModel: Type.Optional(Type.String({ maxLength: 200 })),
    requestTimeoutSeconds: Type.Optional(Type.Integer()),
  },
  { additionalProperties: false },
);

const EditBody = Type.Object({
  notebook_path: Type.String({ minLength: 1, maxLength: 1024 }),
  action: Type.Union([Type.Literal('optimize'), Type.Literal('fix'), Type.Literal('edit')]),
  cell: Type.Object({
    id: Type.String({ maxLength: 200 }),
    source: Type.String({ maxLength: 1_000_000 }),
    cell_type: Type.Optional(Type.String({ maxLength: 50 })),
    outputs: Type.Optional(Type.Array(Type.Unknown())),
  }),
  errors: Type.Array(Type.Object({ ename: Type.String(), evalue: Type.String(), traceback: Type.Optional(Type.Array(Type.String())) }), { maxItems: 50 }),
  instruction: Type.Optional(Type.String({ maxLength: 20_000 })),
  settings: Type.Optional(Settings),
});

/**
 * Edits one user may have under way at once, those waiting for their notebook's lock included
 * (decision 0231): more than a person keeps open (edits of different notebooks proceed in
 * parallel, spec §9.3), few enough that one user cannot queue the shared code agent's work, or the
 * bridge's memory (a request is up to 8 MiB), without end.
 */
export const MAX_EDITS_PER_USER = 32;

/**
 * Below a workspace's JupyterLab (`/jupyter/<ws>/codeagent-bridge/…`) the gateway hands the bridge
 * `/codeagent-bridge/workspaces/<ws>/…` (its routes.ts, decision 0240): the same routes, with the
 * caller's sessions of that workspace (docs/contract/spec.md §9.3).
 */
export const WORKSPACE_PREFIX = '/codeagent-bridge/workspaces/:ws';

/** The bridge server part (docs/contract/spec.md §9): cell edits through the local code-agent server. */
export async function buildBridgeApp(opts: BridgeOptions): Promise<FastifyInstance> {
  // Credentials belong in CODEAGENT_BRIDGE_USER/PASSWORD: a URL is shown by /health and in errors.
  assertNoUserInfo(opts.env.url);
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: false }),
    ...requestIdOptions(),
    bodyLimit: 8 * 1024 * 1024,
    // Unknown settings are refused (additionalProperties: false), not silently dropped.
    ajv: { customOptions: { removeAdditional: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  await app.register(serviceKit);
  await app.register(cookie);
  await app.register(userAuth, { db: opts.db, jwtSecret: opts.jwtSecret, listen: opts.listen });
  const sessions = new SessionMap(opts.db);
  const locks = new KeyedLock();
  /** Edits each user has under way or waiting for their notebook's lock (decision 0231). */
  const editsOf = new KeyedSlots(MAX_EDITS_PER_USER);
  const instanceId = randomUUID();
  const maxSessions = opts.maxSessionsPerUser ?? DEFAULT_MAX_SESSIONS_PER_USER;
  /**
   * Whose session a request addresses (docs/contract/spec.md §9.3): the user, and the workspace
   * of a request below WORKSPACE_PREFIX, whose membership `requireMember` checked first.
   */
  const ownerOf = (req: FastifyRequest): SessionOwner => {
    const ws = (req.params as { ws?: string }).ws;
    return { userId: req.user.id, workspaceId: ws === undefined ? null : ws.toLowerCase() };
  };
  /**
   * A workspace's bridge is open to its members (the membership rule of the workspace routes and
   * of /jupyter/<ws>/: a live membership of a live workspace); viewers read only (GET), as in their
   * JupyterLab. Not a member, or no such workspace: 404, as everywhere (no existence leak).
   */
  const requireMember = async (req: FastifyRequest) => {
    const ws = (req.params as { ws?: string }).ws ?? '';
    const member = isUuid(ws)
      ? await opts.db
          .selectFrom('workspace_members as m')
          .innerJoin('workspaces as w', 'w.id', 'm.workspace_id')
          .select('m.role')
          .where('m.user_id', '=', req.user.id)
          .where('m.workspace_id', '=', ws.toLowerCase())
          .where('m.deleted_at', 'is', null)
          .where('w.deleted_at', 'is', null)
          .executeTakeFirst()
      : undefined;
    if (!member) throw new NotFoundError('no such workspace, or you are not a member of it: ask one of its admins to add you');
    if (member.role === 'viewer' && !SAFE_METHODS.has(req.method)) {
      throw new ForbiddenError('viewers of this workspace may read only; ask a workspace admin for the editor role');
    }
  };
  const client = (settings?: UserSettings) => {
    const resolved = resolveSettings(settings, opts.env);
    return { resolved, upstream: new OpencodeClient(resolved, opts.workdir) };
  };

  /** The routes of docs/contract/spec.md §9.2, for the caller's own sessions or (inWorkspace) those of a workspace. */
  const routes = (inWorkspace: boolean) => async (instance: FastifyInstance) => {
    const bridge = instance.withTypeProvider<TypeBoxTypeProvider>();
    bridge.get('/hello', () => ({ name: 'codeagent-bridge', version: BRIDGE_VERSION }));

    bridge.get('/health', async () => {
      const { resolved, upstream } = client();
      const latency = await upstream.ping(3000);
      return {
        status: latency === undefined ? 'degraded' : 'ok',
        upstream: { url: resolved.url, reachable: latency !== undefined, latency_ms: latency ?? null },
      };
    });

    // eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
    await bridge.register(async (inner) => {
      const authed = inner.withTypeProvider<TypeBoxTypeProvider>();
      // A workspace's bridge also takes its lab's pass (the lab on a host of its own, decision 0263); no other route does.
      if (inWorkspace) {
        authed.addHook('onRequest', async (req) => authed.requireUserOrLab(req, (req.params as { ws?: string }).ws));
        authed.addHook('onRequest', requireMember);
      } else authed.addHook('onRequest', authed.requireUser);

      authed.get('/providers', async () => {
        const { resolved, upstream } = client();
        return upstream.providers(resolved.timeoutSeconds * 1000);
      });

      authed.post('/edit', { schema: { body: EditBody } }, async (req) => {
        const body = req.body;
        if (body.action === 'edit' && !body.instruction?.trim()) {
          throw new BadRequestError('the edit action needs an instruction', { instruction: 'required for action edit' });
        }
        const { resolved, upstream } = client(body.settings);
        const timeoutMs = resolved.timeoutSeconds * 1000;
        const prompt = buildPrompt({
          action: body.action,
          notebookPath: body.notebook_path,
          source: body.cell.source,
          cellType: body.cell.cell_type,
          errors: body.errors,
          instruction: body.instruction,
        });
        const started = Date.now();
        /**
         * The time this edit has left: its timeout counts from its arrival, the wait for its
         * notebook's lock included. None left: 504 upstream_timeout (docs/contract/spec.md §9.2),
         * before anything is sent (undici would refuse a negative timeout as a bad argument).
         */
        const left = () => {
          const ms = started + timeoutMs - Date.now();
          if (ms < 1) throw upstreamTimeout(resolved.timeoutSeconds);
          return ms;
        };
        // One user + notebook = one session; edits of one session run one after another.
        const owner = ownerOf(req);
        const release = editsOf.take(owner.userId);
        if (release === undefined) {
          throw new TooManyRequestsError(`you have ${MAX_EDITS_PER_USER} edits under way already: wait until one has answered`);
        }
        const key = sessionKey(owner, body.notebook_path);
        // One edit of a session at a time: in this process (no database round trips for the
        // common case), and across bridge instances through a lease in the database (issue 18).
        const leased = <T>(work: () => Promise<T>) =>
          withLease(opts.db, `bridge:${key}`, { holder: `${instanceId}:${req.id}`, ttlMs: 30_000, waitMs: left() }, work).catch((err: unknown) => {
            if (err instanceof LeaseBusyError)
              throw new ConflictError('another edit of this notebook is still running (on another bridge instance); try again when it ends');
            throw err;
          });
        return locks
          .run(key, () =>
            leased(async () => {
              const sessionFor = async (fresh: boolean) => {
                const known = fresh ? undefined : await sessions.get(owner, body.notebook_path, resolved.url);
                if (known) return known;
                const id = await upstream.createSession(`codeagent: ${body.notebook_path}`, left());
                await sessions.set(owner, body.notebook_path, id, resolved.url);
                for (const old of await sessions.evictBeyond(owner, maxSessions)) {
                  if (old.upstream_url === resolved.url) void upstream.deleteSession(old.session_id, 5000);
                }
                return id;
              };
              let sessionId = await sessionFor(false);
              let reply;
              try {
                reply = await upstream.prompt(sessionId, prompt, resolved.provider, resolved.model, left());
              } catch (err) {
                if (!(err instanceof SessionGoneError)) throw err;
                // docs/contract/seed.md §3 rule 4: the stored session is gone upstream; forget it and retry once.
                await sessions.drop(owner, body.notebook_path);
                sessionId = await sessionFor(true);
                reply = await upstream.prompt(sessionId, prompt, resolved.provider, resolved.model, left());
              }
              await sessions.touch(owner, body.notebook_path);
              const code = extractCode(reply.text);
              if (!code) {
                throw upstreamError(
                  200,
                  reply.triedTools
                    ? 'the code agent tried to use tools, which are off for notebook edits, and answered without a code block; try again or rephrase the instruction'
                    : 'the code agent answered without a code block; try again or rephrase the instruction',
                );
              }
              return {
                source: code.source,
                explanation: code.explanation,
                session_id: sessionId,
                provider: reply.providerID,
                model: reply.modelID,
                duration_ms: Date.now() - started,
              };
            }),
          )
          .finally(release);
      });

      authed.get('/sessions', async (req) => ({ sessions: await sessions.list(ownerOf(req)) }));

      authed.delete('/session', { schema: { querystring: Type.Object({ notebook: Type.Optional(Type.String({ maxLength: 1024 })) }) } }, async (req) => {
        const notebook = req.query.notebook;
        if (!notebook) throw new BadRequestError('name the notebook: DELETE /codeagent-bridge/session?notebook=<path>', { notebook: 'required' });
        const owner = ownerOf(req);
        // Only the caller's own mapping: another user's path is simply not found here.
        const removed = await locks.run(sessionKey(owner, notebook), () => sessions.drop(owner, notebook));
        if (!removed) throw new NotFoundError(`you have no session for ${notebook}`);
        const { resolved, upstream } = client();
        if (removed.upstream_url === resolved.url) await upstream.deleteSession(removed.session_id, 5000);
        return { removed: true };
      });
    });
  };

  await app.register(routes(false), { prefix: '/codeagent-bridge' });
  await app.register(routes(true), { prefix: WORKSPACE_PREFIX });
  return app;
}
