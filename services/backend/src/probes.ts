import type { Config } from '@codeagent/config';
import { runtimeClient } from '@codeagent/clients';
import type { Probe } from './routes/health.js';

/** Runtime health: its action endpoint answers `list_kernels` with our token (and the caller's request id). */
export function runtimeProbe(config: Config): Probe {
  const runtime = runtimeClient(config.runtimeUrl, config.internalServiceToken);
  return (requestId) => runtime.ping(requestId);
}
