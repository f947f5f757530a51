import type { S3ClientConfig } from '@aws-sdk/client-s3';

// Apart from s3.ts, so that naming these errors does not load the AWS SDK (a local store never does).

/** The S3 store could not start: one line that names the S3_* settings to fix (no SDK stack). */
export class StorageUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StorageUnavailableError';
  }
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'TimeoutError']);

/** Why `init` failed, said as the settings that fix it (the SDK's own errors name none). */
export function s3StartError(err: unknown, client: S3ClientConfig, bucket: string): StorageUnavailableError {
  const e = err as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const where =
    typeof client.endpoint === 'string'
      ? `S3_ENDPOINT ${client.endpoint.replace(/\/\/[^/@]*@/, '//')}`
      : `AWS S3 (S3_REGION ${typeof client.region === 'string' ? client.region : 'us-east-1'})`;
  const why = e.code ?? e.name ?? 'error';
  if (e.name === 'CredentialsProviderError' || /credential/i.test(e.message ?? '')) {
    return new StorageUnavailableError(
      'STORAGE_BACKEND=s3 but no S3 credentials were found: set S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY ' +
        '(and S3_ENDPOINT, S3_REGION, S3_FORCE_PATH_STYLE for a server other than AWS), or STORAGE_BACKEND=local to keep files in DATA_DIR',
    );
  }
  const status = e.$metadata?.httpStatusCode;
  if (status === 403 || e.name === 'InvalidAccessKeyId' || e.name === 'SignatureDoesNotMatch' || e.name === 'AccessDenied') {
    return new StorageUnavailableError(
      `${where} refused the credentials for bucket ${bucket} (${why}): check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, and that they may use the S3_BUCKET_* buckets`,
    );
  }
  if (NETWORK_CODES.has(why) || status === undefined) {
    return new StorageUnavailableError(
      `cannot reach ${where} (${why}${e.message && e.message !== why ? `: ${e.message}` : ''}): start that server or correct S3_ENDPOINT and S3_REGION, or set STORAGE_BACKEND=local`,
    );
  }
  return new StorageUnavailableError(
    `${where} answered ${status} (${why}) for bucket ${bucket}: check the S3_* settings (S3_FORCE_PATH_STYLE=true for MinIO and most S3-compatible servers)`,
  );
}
