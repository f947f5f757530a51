import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import type { Config } from '@codeagent/config';
import type { Probe } from './routes/health.js';

/** Storage health: the local area root is writable, or the S3 endpoint answers. */
export function storageProbe(config: Config): Probe {
  if (config.storageBackend === 'local') {
    return async () => {
      await mkdir(config.localStorageBaseDir, { recursive: true });
      await access(config.localStorageBaseDir, constants.W_OK);
      return true;
    };
  }
  const endpoint = config.s3.endpoint ?? `https://s3.${config.s3.region ?? 'us-east-1'}.amazonaws.com`;
  return async () => {
    // Any HTTP answer (even 403) means the store is reachable.
    await fetch(endpoint, { method: 'HEAD', signal: AbortSignal.timeout(1500) });
    return true;
  };
}

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
