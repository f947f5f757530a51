import { readFileSync } from 'node:fs';
import type { Config } from '@codeagent/config';

/** The component a container runs: the argument after the CLI in PID 1's command line. */
export function componentOfContainer(names: readonly string[], cmdline = '/proc/1/cmdline'): string | undefined {
  try {
    return readFileSync(cmdline, 'utf8')
      .split('\0')
      .find((arg) => names.includes(arg));
  } catch {
    return undefined;
  }
}

/**
 * `codeagent healthcheck [component]` (the image's HEALTHCHECK): asks the component's `/livez`
 * on its internal port; exit 0 when it answers 200. Without an argument the component is the
 * one the container runs (PID 1). The gateway without GATEWAY_METRICS_PORT is alive when its
 * public port answers at all; the worker without WORKER_METRICS_PORT cannot be asked (exit 0).
 */
export async function healthcheck(config: Config, names: readonly string[], args: string[]): Promise<number> {
  const component = args[0] ?? componentOfContainer(names);
  if (component === undefined || !names.includes(component)) {
    console.error(`codeagent healthcheck: name the component (${names.join(', ')})`);
    return 2;
  }
  const ports: Record<string, number | undefined> = {
    backend: config.backendPort,
    runtime: config.runtimePort,
    'cluster-admin': config.clusterAdminPort,
    bridge: config.bridgePort,
    gateway: config.gatewayMetricsPort,
    worker: config.workerMetricsPort,
    jupyterlab: config.jupyterlabPort,
  };
  const port = ports[component];
  let url: string;
  if (component === 'gateway' && port === undefined) url = `http://127.0.0.1:${config.port}/`;
  else if (component === 'jupyterlab') url = `http://127.0.0.1:${config.jupyterlabPort}/jupyter/api`;
  else if (port === undefined) {
    console.error(`codeagent healthcheck: ${component} has no port to ask (set WORKER_METRICS_PORT)`);
    return 0;
  } else url = `http://127.0.0.1:${port}/livez`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    const alive = component === 'gateway' && port === undefined ? res.status < 500 : res.status === 200;
    if (!alive) console.error(`codeagent healthcheck: ${url} answered ${res.status}`);
    return alive ? 0 : 1;
  } catch (err) {
    console.error(`codeagent healthcheck: ${url}: ${(err as Error).message}`);
    return 1;
  }
}
