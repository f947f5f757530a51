import type { Config } from '@codeagent/config';
import { runtimeClient } from '@codeagent/clients';
import type { Probe } from './routes/health.js';
import type { RuntimeWarmUp } from './routes/runs.js';

/** Runtime health: its action endpoint answers `list_kernels` with our token (and the caller's request id). */
export function runtimeProbe(config: Config): Probe {
  const runtime = runtimeClient(config.runtimeUrl, config.internalServiceToken);
  return (requestId) => runtime.ping(requestId);
}

/** The runtime's `warm_up` for a workspace (decision 0209), with the caller's request id. */
export function runtimeWarmUp(config: Config): RuntimeWarmUp {
  const runtime = runtimeClient(config.runtimeUrl, config.internalServiceToken);
  return (workspaceId, requestId) => runtime.warmUp(workspaceId, requestId);
}
