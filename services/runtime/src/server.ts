import { join } from 'node:path';
import type { Config } from '@codeagent/config';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildRuntimeApp } from './app.js';
import { ManagedJupyterServer, externalJupyter, type JupyterSource } from './jupyter-server.js';
import { KernelService } from './kernels.js';

/** Starts the runtime alone (`codeagent runtime`) on 127.0.0.1:RUNTIME_PORT. */
export async function startRuntime(config: Config): Promise<void> {
  const logger = loggerOptions(config.logLevel, 'runtime');
  let jupyter: JupyterSource | undefined;
  const app = await buildRuntimeApp({
    kernels: new KernelService({ get: () => jupyter!.get(), stop: async () => jupyter?.stop() }),
    internalServiceToken: config.internalServiceToken,
    logger,
  });
  jupyter =
    config.jupyter.url !== undefined
      ? externalJupyter({ url: config.jupyter.url, token: config.jupyter.token ?? '' })
      : new ManagedJupyterServer({
          python: config.jupyter.python,
          rootDir: join(config.dataDir, 'runtime'),
          cullIdleSeconds: config.jupyter.cullIdleSeconds,
          log: app.log,
        });
  app.addHook('onClose', async () => jupyter?.stop());
  // Start the Jupyter server now so that the first action is fast; a machine without kernels
  // keeps the runtime up and answers 503 kernel_unavailable with the install command.
  jupyter.get().catch((err: unknown) => app.log.warn({ reason: (err as Error).message }, 'no kernel available'));
  await listen(app, '127.0.0.1', config.runtimePort);
}
