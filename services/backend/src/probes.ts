import type { Config } from '@codeagent/config';
import type { Probe } from './routes/health.js';

/** Runtime health: its action endpoint answers `list_kernels` with our token. */
export function runtimeProbe(config: Config): Probe {
  return async () => {
    const res = await fetch(`${config.runtimeUrl}/api/v1/jupyter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-internal-service-token': config.internalServiceToken },
      body: JSON.stringify({ action: 'list_kernels' }),
      signal: AbortSignal.timeout(1500),
    });
    await res.body?.cancel();
    return res.ok;
  };
}
