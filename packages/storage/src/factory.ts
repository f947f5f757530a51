import type { Config } from '@codeagent/config';
import { LocalObjectStore } from './local.js';
import type { ObjectStore } from './store.js';

/**
 * The store the settings ask for (STORAGE_BACKEND), not yet initialised. The AWS SDK (about
 * 30 MB of a process's memory) is loaded only for the s3 backend.
 */
export async function createObjectStore(config: Config): Promise<ObjectStore> {
  if (config.storageBackend === 'local') return new LocalObjectStore(config.localStorageBaseDir);
  const { S3ObjectStore } = await import('./s3.js');
  const { s3 } = config;
  return new S3ObjectStore({
    buckets: s3.buckets,
    client: {
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      region: s3.region ?? 'us-east-1',
      forcePathStyle: s3.forcePathStyle,
      ...(s3.accessKeyId && s3.secretAccessKey ? { credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } } : {}),
    },
  });
}
