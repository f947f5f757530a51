import type { Config } from '@codeagent/config';
import { Metrics, createLogger, listen, startOpsServer } from '@codeagent/service-kit/http';
import { buildGatewayApp } from './app.js';
import { defaultWebRoot } from './web-app.js';

/** Starts the gateway alone (`codeagent gateway`) on HOST:PORT; metrics and probes on GATEWAY_METRICS_PORT when set. */
export async function startGateway(config: Config): Promise<string> {
  const metrics = new Metrics('gateway');
  const up = metrics.gauge('codeagent_gateway_upstream_up', 'Whether the gateway sends traffic to an instance (1) or skips it after a failure (0)', [
    'upstream',
    'instance',
  ]);
  const backendUp = new Map<string, boolean>();
  const app = await buildGatewayApp({
    upstreams: { backend: config.backendUrls, clusterAdmin: config.clusterAdminUrls, bridge: config.bridgeUrls },
    jupyter: { url: config.jupyterlab.urls, token: config.jupyterlab.token, perWorkspace: !config.jupyterlab.shared },
    trustedProxies: config.trustedProxies,
    maxUploadBytes: config.maxUploadBytes,
    loggerInstance: createLogger({ level: config.logLevel, format: config.logFormat }, 'gateway'),
    metrics,
    accessLog: true,
    webRoot: defaultWebRoot(),
    onUpstreamState: (upstream, instance, isUp) => {
      up.set({ upstream, instance }, isUp ? 1 : 0);
      if (upstream === 'backend') backendUp.set(instance, isUp);
    },
  });
  if (config.gatewayMetricsPort !== undefined) {
    // Ready while at least one backend instance takes traffic.
    const ops = await startOpsServer(metrics, config.componentHost, config.gatewayMetricsPort, {
      backend: () => Promise.resolve([...backendUp.values()].some(Boolean)),
    });
    app.addHook('preClose', (done) => {
      ops.stopping();
      done();
    });
    app.addHook('onClose', async () => ops.app.close());
  }
  return listen(app, config.host, config.port);
}
