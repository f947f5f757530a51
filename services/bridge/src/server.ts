import pino, { type LoggerOptions } from 'pino';
import type { Config } from '@codeagent/config';
import { migrate, openDatabase } from '@codeagent/db';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildBridgeApp } from './app.js';

/** Starts the bridge server part alone (`codeagent bridge`) on 127.0.0.1:BRIDGE_PORT. */
export async function startBridge(config: Config): Promise<void> {
  const log = pino(loggerOptions(config.logLevel, 'bridge') as LoggerOptions);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(database);
  const app = await buildBridgeApp({
    db: database.db,
    jwtSecret: config.jwtSecret,
    env: { url: config.bridge.url, user: config.bridge.user, password: config.bridge.password, allowedHosts: config.bridge.allowedHosts },
    workdir: config.bridge.workdir,
    loggerInstance: log,
  });
  app.addHook('onClose', async () => database.close());
  await listen(app, config.componentHost, config.bridgePort);
}
