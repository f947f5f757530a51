import { join } from 'node:path';
import type { Config } from '@codeagent/config';
import { DATABASE_POOL_SIZES, openDatabase, openPlatformDatabase, platformConnection, type Database, type Listener } from '@codeagent/db';
import { databaseUidAllocator } from '@codeagent/sandbox';
import { Metrics, listen, createLogger, opsRoutes } from '@codeagent/service-kit';
import { buildRuntimeApp } from './app.js';
import { createKernels } from './kernels-factory.js';
import { labProxy } from './lab-proxy.js';
import { defaultLabHost } from './lab-host.js';
import { workspaceMountsFor } from './mounts.js';
import { databaseLabState, importLabStateFiles } from './lab-state.js';
import { usersFollower } from './user-changes.js';

/** Starts the runtime alone (`codeagent runtime`) on 127.0.0.1:RUNTIME_PORT. */
export async function startRuntime(config: Config): Promise<void> {
  const log = createLogger({ level: config.logLevel, format: config.logFormat }, 'runtime');
  let database: Database | undefined;
  // Each workspace's files as its server's /workspace, through the backend's WebDAV tree (0140),
  // and what changes in them through the platform listed again there at once (0221).
  const mounts = workspaceMountsFor(config, log);
  // (The listening connection retries until the database answers: the runtime does not wait for it.)
  let following: Listener | undefined;
  if (mounts) {
    database = await openDatabase({ connection: platformConnection(config), poolSize: DATABASE_POOL_SIZES.runtime, applicationName: 'codeagent runtime' });
    following = mounts.follow(database);
  }
  // Otherwise opened at its first use (a uid to allocate, a user's lab settings), once.
  let opening: Promise<Database> | undefined;
  const platformDatabase = (): Promise<Database> => {
    if (database) return Promise.resolve(database);
    opening ??= openPlatformDatabase(config, 'runtime').then(
      (opened) => (database = opened),
      (err: unknown) => {
        opening = undefined;
        throw err;
      },
    );
    return opening;
  };
  const kernels = await createKernels({
    sandbox: config.sandbox,
    python: config.jupyter.python,
    cullIdleSeconds: config.jupyter.cullIdleSeconds,
    warmPool: { size: config.jupyter.poolSize, max: config.jupyter.poolMax, idleSeconds: config.jupyter.poolIdleSeconds },
    log,
    lab: defaultLabHost(),
    mounts,
    external: config.jupyter.url !== undefined ? { url: config.jupyter.url, token: config.jupyter.token ?? '' } : undefined,
    // As root every workspace gets its own uid, allocated once and kept in the database (the
    // backend applies the migrations; the first allocation happens at the first kernel start).
    uids: async (prepared) => {
      if (prepared.mode !== 'root') return undefined;
      return databaseUidAllocator((await platformDatabase()).db, config.sandbox.uidBase);
    },
  });
  // Each workspace's JupyterLab at /jupyter/<id>/, for the gateway (which checks the user first).
  // Each user's lab settings and layouts, in the database (decision 0252); those an earlier
  // runtime kept in DATA_DIR/lab-settings (decision 0251) are moved there at the first use.
  let imported: Promise<unknown> | undefined;
  const labState = databaseLabState(async () => {
    const { db } = await platformDatabase();
    imported ??= importLabStateFiles(db, join(config.dataDir, 'lab-settings')).then(
      (moved) => moved && log.info(moved, 'moved the lab settings and layouts of DATA_DIR/lab-settings into the database'),
      (err: unknown) => {
        imported = undefined;
        log.warn(
          { reason: (err as Error).message },
          'the lab settings of DATA_DIR/lab-settings could not be moved into the database; trying again at the next use',
        );
      },
    );
    await imported;
    return db;
  });
  // A user's lab websockets end when their sessions or memberships change, whichever ingress let them in (decision 0259).
  const users = usersFollower(platformDatabase, log);
  const lab = labProxy({
    pool: kernels.pool,
    token: config.jupyterlab.token,
    log,
    labState,
    followUsers: (sockets) => users.follow(sockets),
    labOrigins: config.labOrigins,
  });
  const app = await buildRuntimeApp({ kernels: kernels.kernels, internalServiceToken: config.internalServiceToken, loggerInstance: log, lab });
  app.addHook('onClose', async () => {
    await users.close();
    await following?.close();
    await kernels.stop();
    await database?.close();
  });
  // Metrics and probes on the internal port (issue 18). A scrape never starts a Jupyter server.
  const metrics = new Metrics('runtime');
  metrics.gauge('codeagent_runtime_jupyter_servers_running', 'Per-workspace Jupyter servers this runtime runs', [], (g) =>
    g.set(kernels.pool.running().length),
  );
  metrics.gauge('codeagent_runtime_warm_kernels', 'Warm kernels waiting for a run (KERNEL_POOL_SIZE)', [], (g) =>
    g.set(kernels.kernels.warm?.stats(null).ready ?? 0),
  );
  metrics.gauge('codeagent_runtime_kernels_running', 'Kernels running on this runtime', [], async (g) =>
    g.set((await kernels.kernels.list().catch(() => [])).length),
  );
  await app.register(opsRoutes, {
    metrics,
    // Ready when kernels can start here: the sandbox works (or is off), or the 503 names the fix.
    readiness: { sandbox: () => Promise.resolve(!(kernels.prepared instanceof Error)) },
  });
  await listen(app, config.componentHost, config.runtimePort);
}
