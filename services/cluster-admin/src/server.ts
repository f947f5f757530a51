import pino, { type LoggerOptions } from 'pino';
import type { Config } from '@codeagent/config';
import { migrate, openDatabase } from '@codeagent/db';
import { createOutboundClient } from '@codeagent/safe-fetch';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildClusterAdminApp } from './app.js';

/** Starts the cluster administration service alone (`codeagent cluster-admin`). */
export async function startClusterAdmin(config: Config): Promise<void> {
  const log = pino(loggerOptions(config.logLevel, 'cluster-admin') as LoggerOptions);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(database);
  const outbound = createOutboundClient({
    allowlist: config.outbound.allowlist,
    maxRedirects: config.outbound.maxRedirects,
    timeoutMs: config.outbound.timeoutMs,
    maxResponseBytes: config.outbound.maxResponseBytes,
    allowLoopback: config.outbound.allowLoopback,
  });
  const app = await buildClusterAdminApp({
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
  await listen(app, config.componentHost, config.clusterAdminPort);
}
