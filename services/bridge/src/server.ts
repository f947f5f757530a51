import { mkdirSync } from 'node:fs';
import type { Config } from '@codeagent/config';
import { migrate, openPlatformDatabase } from '@codeagent/db';
import { sql } from 'kysely';
import { Metrics, listen, createLogger, opsRoutes } from '@codeagent/service-kit';
import { buildBridgeApp } from './app.js';

/** Starts the bridge server part alone (`codeagent bridge`) on 127.0.0.1:BRIDGE_PORT. */
export async function startBridge(config: Config): Promise<void> {
  const log = createLogger({ level: config.logLevel, format: config.logFormat }, 'bridge');
  // The code agent's sessions belong to this directory (docs/contract/spec.md §9.4): its own, empty at first.
  mkdirSync(config.bridge.workdir, { recursive: true, mode: 0o700 });
  const database = await openPlatformDatabase(config, 'bridge');
  await migrate(database);
  const app = await buildBridgeApp({
    db: database.db,
    listen: database.listen.bind(database),
    jwtSecret: config.jwtSecret,
    env: { url: config.bridge.url, user: config.bridge.user, password: config.bridge.password, allowedHosts: config.bridge.allowedHosts },
    workdir: config.bridge.workdir,
    loggerInstance: log,
  });
  app.addHook('onClose', async () => database.close());
  // Metrics and probes on the internal port (issue 18).
  await app.register(opsRoutes, { metrics: new Metrics('bridge'), readiness: { database: async () => (await sql`SELECT 1`.execute(database.db), true) } });
  await listen(app, config.componentHost, config.bridgePort);
}
