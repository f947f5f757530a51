import type { Config } from '@codeagent/config';
import { Metrics, createLogger, listen, startOpsServer } from '@codeagent/service-kit/http';
import { buildGatewayApp } from './app.js';
import { defaultWebRoot } from './web-app.js';
import type { InProcessHandler } from './fast-path.js';
import type { UpstreamName } from './routes.js';

/** A component started in the gateway's process (BACKEND_IN_GATEWAY): its request handler, and how it closes. */
export interface InProcessComponent {
  handle: InProcessHandler;
  close(): Promise<void>;
}

/**
 * Starts the gateway (`codeagent gateway`) on HOST:PORT; metrics and probes on
 * GATEWAY_METRICS_PORT when set. Components given in `inProcess` get their plain API requests
 * handed over in the process (decision 0194) and are closed after the gateway.
 */
export async function startGateway(config: Config, inProcess: Partial<Record<UpstreamName, InProcessComponent>> = {}): Promise<string> {
  const metrics = new Metrics('gateway');
  const up = metrics.gauge('codeagent_gateway_upstream_up', 'Whether the gateway sends traffic to an instance (1) or skips it after a failure (0)', [
    'upstream',
    'instance',
  ]);
  const backendUp = new Map<string, boolean>();
  const app = await buildGatewayApp({
    upstreams: { backend: config.backendUrls, clusterAdmin: config.clusterAdminUrls, bridge: config.bridgeUrls },
    jupyter: { url: config.jupyterlab.urls, token: config.jupyterlab.token, perWorkspace: !config.jupyterlab.shared },
    labOrigins: config.labOrigins,
    trustedProxies: config.trustedProxies,
    maxUploadBytes: config.maxUploadBytes,
    loggerInstance: createLogger({ level: config.logLevel, format: config.logFormat }, 'gateway'),
    metrics,
    accessLog: true,
    webRoot: defaultWebRoot(),
    inProcess: Object.fromEntries(Object.entries(inProcess).map(([name, c]) => [name, c?.handle])),
    onUpstreamState: (upstream, instance, isUp) => {
      up.set({ upstream, instance }, isUp ? 1 : 0);
      if (upstream === 'backend') backendUp.set(instance, isUp);
    },
  });
  // After the gateway has stopped taking requests and finished those in flight.
  app.addHook('onClose', async () => {
    for (const component of Object.values(inProcess)) await component?.close();
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
