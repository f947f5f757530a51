import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ObjectStore } from './store.js';

export interface TestS3Store {
  /** An S3ObjectStore on the server, its four buckets named `<prefix>-workspace` and so on. */
  store: ObjectStore;
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

/**
 * A real S3-speaking server for the tests that run a platform on STORAGE_BACKEND=s3: s3rver
 * (a test dependency) on a free loopback port with a directory of its own, and the platform's
 * S3 store on it, as `createObjectStore` builds it from the S3_* settings.
 */
export async function startTestS3Store(prefix: string): Promise<TestS3Store> {
  const { default: S3rver } = await import('s3rver');
  const directory = mkdtempSync(join(tmpdir(), `codeagent-${prefix}-s3-`));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const { S3ObjectStore } = await import('./s3.js');
  const store = new S3ObjectStore({
    client: { endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } },
    buckets: { workspace: `${prefix}-workspace`, version: `${prefix}-version`, run_log: `${prefix}-run-log`, trash: `${prefix}-trash` },
  });
  return {
    store,
    endpoint,
    close: async () => {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
