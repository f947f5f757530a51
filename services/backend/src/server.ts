import type { Config } from '@codeagent/config';
import { migrate, openPlatformDatabase } from '@codeagent/db';
import { createObjectStore } from '@codeagent/storage';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { Metrics, createLogger, listen, opsRoutes } from '@codeagent/service-kit';
import { buildBackendApp } from './app.js';
import { ensureBootstrapAdmin } from './domain/users.js';
import { runtimeProbe, runtimeWarmUp } from './probes.js';

export interface StartBackendOptions {
  /**
   * Installs the process's graceful shutdown on SIGTERM/SIGINT (default). Off when another app of
   * the same process owns the shutdown and closes this one (the gateway with BACKEND_IN_GATEWAY).
   */
  signals?: boolean;
}

/**
 * Starts the backend (`codeagent backend`, or inside the gateway with BACKEND_IN_GATEWAY):
 * database, migrations, bootstrap admin, listen on loopback. Resolves with the app once it serves.
 */
export async function startBackend(config: Config, opts: StartBackendOptions = {}): Promise<FastifyInstance> {
  const database = await openPlatformDatabase(config, 'backend');
  await migrate(database);
  const store = await createObjectStore(config);
  await store.init();
  const app = await buildBackendApp({
    db: database.db,
    listen: database.listen.bind(database),
    jwtSecret: config.jwtSecret,
    jwtTtlSeconds: config.jwtTtlSeconds,
    storageProbe: async () => {
      await store.ping();
      return true;
    },
    runtimeProbe: runtimeProbe(config),
    runtimeWarmUp: runtimeWarmUp(config),
    store,
    internalServiceToken: config.internalServiceToken,
    gatewayAddresses: config.gatewayAddresses,
    maxUploadBytes: config.maxUploadBytes,
    runLimits: config.runLimits,
    workspaceQuotaBytes: config.workspaceQuotaBytes,
    loggerInstance: createLogger({ level: config.logLevel, format: config.logFormat }, 'backend'),
  });
  app.addHook('onClose', async () => database.close());
  // Metrics and probes on the internal port (issue 18): never routed by the ingress.
  const metrics = new Metrics('backend');
  metrics.gauge('codeagent_runs', 'Runs by status, counted in the database at each scrape (the same figure from every backend)', ['status'], async (g) => {
    const rows = await database.db
      .selectFrom('runs')
      .select(['status', database.db.fn.countAll<number>().as('n')])
      .groupBy('status')
      .execute();
    g.reset();
    for (const status of ['queued', 'running', 'succeeded', 'failed', 'cancelled']) g.set({ status }, Number(rows.find((r) => r.status === status)?.n ?? 0));
  });
  await app.register(opsRoutes, {
    metrics,
    readiness: {
      database: async () => (await sql`SELECT 1`.execute(database.db), true),
      storage: async () => (await store.ping(), true),
    },
  });
  const admin = await ensureBootstrapAdmin(database.db, config.bootstrapAdminEmail, config.bootstrapAdminPassword);
  if (admin) app.log.info({ email: admin.email }, 'created the bootstrap administrator');
  // Loopback by default: the gateway is the only ingress (containers set COMPONENT_HOST=0.0.0.0).
  if (opts.signals === false) await app.listen({ host: config.componentHost, port: config.backendPort });
  else await listen(app, config.componentHost, config.backendPort);
  return app;
}
