import type { Config } from '@codeagent/config';
import { migrate, openDatabase } from '@codeagent/db';
import { createObjectStore } from '@codeagent/storage';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildBackendApp } from './app.js';
import { ensureBootstrapAdmin } from './domain/users.js';
import { runtimeProbe } from './probes.js';

/** Starts the backend alone (`codeagent backend`): database, migrations, bootstrap admin, listen on loopback. */
export async function startBackend(config: Config): Promise<void> {
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(database);
  const store = createObjectStore(config);
  await store.init();
  const app = await buildBackendApp({
    db: database.db,
    jwtSecret: config.jwtSecret,
    jwtTtlSeconds: config.jwtTtlSeconds,
    storageProbe: async () => {
      await store.ping();
      return true;
    },
    runtimeProbe: runtimeProbe(config),
    store,
    internalServiceToken: config.internalServiceToken,
    maxUploadBytes: config.maxUploadBytes,
    logger: loggerOptions(config.logLevel, 'backend'),
  });
  app.addHook('onClose', async () => database.close());
  const admin = await ensureBootstrapAdmin(database.db, config.bootstrapAdminEmail, config.bootstrapAdminPassword);
  if (admin) app.log.info({ email: admin.email }, 'created the bootstrap administrator');
  // Loopback by default: the gateway is the only ingress (containers set COMPONENT_HOST=0.0.0.0).
  await listen(app, config.componentHost, config.backendPort);
}
