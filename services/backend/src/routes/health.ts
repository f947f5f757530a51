import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { sql, type Kysely } from 'kysely';
import type { DB } from '@codeagent/db';

/** A dependency check: resolves true when healthy. Must settle quickly (it has its own timeout); passes the request id on. */
export type Probe = (requestId?: string) => Promise<boolean>;

export interface HealthRoutesOptions {
  db: Kysely<DB>;
  storageProbe: Probe;
  runtimeProbe: Probe;
}

async function settle(probe: () => Promise<boolean>, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      probe().catch(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The probe shared by the requests that ask while it runs: `/api/v1/health` is public, and each
 * probe costs the dependency a request (the runtime asks every Jupyter server for its kernels),
 * so a loop of anonymous health requests makes one probe at a time, not one each.
 */
export function sharedProbe(probe: Probe, timeoutMs = 2000): Probe {
  let running: Promise<boolean> | undefined;
  return (requestId) => {
    // Shared for `timeoutMs` at most: a probe that hangs (a black-holed connection) answers
    // "error" once, and the next request probes afresh, so health follows the dependency's recovery.
    running ??= settle(() => probe(requestId), timeoutMs).finally(() => (running = undefined));
    return running;
  };
}

// eslint-disable-next-line @typescript-eslint/require-await -- a Fastify plugin stays async: avvio turns a throw while it registers (a route without an access rule, 0122) into a register() error (0130)
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, opts) => {
  const storageProbe = sharedProbe(opts.storageProbe);
  const runtimeProbe = sharedProbe(opts.runtimeProbe);
  const Check = Type.Union([Type.Literal('ok'), Type.Literal('error')]);
  const Body = Type.Object({
    status: Type.Union([Type.Literal('ok'), Type.Literal('error')]),
    checks: Type.Object({
      database: Check,
      storage: Check,
      runtime: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]),
    }),
  });
  app.get(
    '/health',
    { config: { access: 'public' }, schema: { tags: ['health'], summary: 'Health of the backend and what it depends on', response: { 200: Body, 503: Body } } },
    async (req, reply) => {
      const [database, storage, runtime] = await Promise.all([
        settle(async () => {
          await sql`SELECT 1`.execute(opts.db);
          return true;
        }),
        // (The shared probes keep their own time limit and never reject.)
        storageProbe(),
        runtimeProbe(req.id),
      ]);
      const ok = database && storage;
      return reply.code(ok ? 200 : 503).send({
        status: ok ? 'ok' : 'error',
        checks: {
          database: database ? 'ok' : 'error',
          storage: storage ? 'ok' : 'error',
          runtime: runtime ? 'ok' : 'unavailable',
        },
      });
    },
  );
};
