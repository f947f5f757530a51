import type { Config } from '@codeagent/config';
import { migrate, openPlatformDatabase } from '@codeagent/db';
import { createOutboundClient } from '@codeagent/safe-fetch';
import { sql } from 'kysely';
import { Metrics, listen, createLogger, opsRoutes } from '@codeagent/service-kit';
import { buildClusterAdminApp } from './app.js';

/** Starts the cluster administration service alone (`codeagent cluster-admin`). */
export async function startClusterAdmin(config: Config): Promise<void> {
  const log = createLogger({ level: config.logLevel, format: config.logFormat }, 'cluster-admin');
  const database = await openPlatformDatabase(config, 'cluster-admin');
  await migrate(database);
  const outbound = createOutboundClient({
    allowlist: config.outbound.allowlist,
    maxRedirects: config.outbound.maxRedirects,
    timeoutMs: config.outbound.timeoutMs,
    maxResponseBytes: config.outbound.maxResponseBytes,
    allowLoopback: config.outbound.allowLoopback,
  });
  const metrics = new Metrics('cluster-admin');
  const auditWrites = metrics.counter('codeagent_audit_writes_total', 'Audit entries written (each with its change, in one transaction), by action', [
    'action',
  ]);
  const refusals = metrics.counter('codeagent_outbound_refusals_total', 'cluster_request calls refused before or instead of an outbound request, by code', [
    'code',
  ]);
  const app = await buildClusterAdminApp({
    events: { auditWritten: (action) => auditWrites.inc({ action }), outboundRefused: (code) => refusals.inc({ code }) },
    db: database.db,
    adminTokens: config.adminTokens,
    agentToken: config.agentToken,
    mcpAllowedOrigins: config.mcpAllowedOrigins,
    secretsKey: config.secretsKey,
    outbound,
    loggerInstance: log,
  });
  app.addHook('onClose', async () => {
    await outbound.close();
    await database.close();
  });
  await app.register(opsRoutes, { metrics, readiness: { database: async () => (await sql`SELECT 1`.execute(database.db), true) } });
  await listen(app, config.componentHost, config.clusterAdminPort);
}
