import { join } from 'node:path';
import pino, { type LoggerOptions } from 'pino';
import type { Config } from '@codeagent/config';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildRuntimeApp } from './app.js';
import { ManagedJupyterServer, externalJupyter } from './jupyter-server.js';
import { KernelService } from './kernels.js';

/** Starts the runtime alone (`codeagent runtime`) on 127.0.0.1:RUNTIME_PORT. */
export async function startRuntime(config: Config): Promise<void> {
  const log = pino(loggerOptions(config.logLevel, 'runtime') as LoggerOptions);
  const jupyter =
    config.jupyter.url !== undefined
      ? externalJupyter({ url: config.jupyter.url, token: config.jupyter.token ?? '' })
      : new ManagedJupyterServer({
          python: config.jupyter.python,
          rootDir: join(config.dataDir, 'runtime'),
          cullIdleSeconds: config.jupyter.cullIdleSeconds,
          log,
        });
  const app = await buildRuntimeApp({ kernels: new KernelService(jupyter), internalServiceToken: config.internalServiceToken, loggerInstance: log });
  app.addHook('onClose', async () => jupyter.stop());
  // Start the Jupyter server now so that the first action is fast; a machine without kernels
  // keeps the runtime up and answers 503 kernel_unavailable with the install command.
  jupyter.get().catch((err: unknown) => log.warn({ reason: (err as Error).message }, 'no kernel available'));
  await listen(app, config.componentHost, config.runtimePort);
}
