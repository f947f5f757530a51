import type { Config } from '@codeagent/config';
import { listen, loggerOptions } from '@codeagent/service-kit';
import { buildGatewayApp } from './app.js';

/** Starts the gateway alone (`codeagent gateway`) on HOST:PORT. */
export async function startGateway(config: Config): Promise<string> {
  const app = await buildGatewayApp({
    upstreams: { backend: config.backendUrl, clusterAdmin: config.clusterAdminUrl, bridge: config.bridgeUrl },
    jupyter: { url: config.jupyterlab.url, token: config.jupyterlab.token },
    jwtSecret: config.jwtSecret,
    logger: loggerOptions(config.logLevel, 'gateway'),
  });
  return listen(app, config.host, config.port);
}
