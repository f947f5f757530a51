import { describe, expect, it } from 'vitest';
import { s3StartError, StorageUnavailableError } from './s3-errors.js';

/** The AWS SDK's start-up errors, said as the S3_* settings that fix them. */
describe('s3StartError', () => {
  const minio = { endpoint: 'http://admin:hunter2@127.0.0.1:9000', region: 'us-east-1' };

  it('no credentials: names S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, and STORAGE_BACKEND=local', () => {
    const err = s3StartError(
      Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' }),
      {},
      'codeagent-workspace',
    );
    expect(err).toBeInstanceOf(StorageUnavailableError);
    expect(err.message).toMatch(/S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY.*STORAGE_BACKEND=local/);
  });

  it('refused credentials (403): names the key settings and the buckets', () => {
    const err = s3StartError(
      Object.assign(new Error('Forbidden'), { name: 'InvalidAccessKeyId', $metadata: { httpStatusCode: 403 } }),
      minio,
      'codeagent-workspace',
    );
    expect(err.message).toContain('S3_ENDPOINT http://127.0.0.1:9000 refused the credentials for bucket codeagent-workspace');
    expect(err.message).toContain('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY');
  });

  it('unreachable: names S3_ENDPOINT and S3_REGION, never a password in the endpoint', () => {
    const err = s3StartError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9000'), { code: 'ECONNREFUSED' }), minio, 'b');
    expect(err.message).toMatch(/^cannot reach S3_ENDPOINT http:\/\/127\.0\.0\.1:9000 \(ECONNREFUSED: .*correct S3_ENDPOINT and S3_REGION/);
    expect(err.message).not.toContain('hunter2');
    expect(s3StartError(new Error('getaddrinfo'), { region: 'eu-west-1' }, 'b').message).toContain('AWS S3 (S3_REGION eu-west-1)');
  });

  it('another answer: its status, and the hint for S3-compatible servers', () => {
    const err = s3StartError(Object.assign(new Error('Moved'), { name: 'PermanentRedirect', $metadata: { httpStatusCode: 301 } }), minio, 'b');
    expect(err.message).toContain('answered 301 (PermanentRedirect) for bucket b');
    expect(err.message).toContain('S3_FORCE_PATH_STYLE=true');
  });
});
