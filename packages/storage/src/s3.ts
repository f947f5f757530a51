import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { HashingCounter } from './hashing.js';
import { s3StartError } from './s3-errors.js';
import { validateObjectPath } from './paths.js';
import {
  AREAS,
  type Area,
  type ByteRange,
  type GetResult,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type PutResult,
} from './store.js';

export interface S3StoreOptions {
  client: S3ClientConfig;
  buckets: Record<Area, string>;
  /** The largest object one `CopyObject` copies (S3_MAX_COPY_OBJECT_BYTES by default; smaller in tests). */
  maxCopyObjectBytes?: number;
  /** How long a request may wait for its connection, and then go without a byte either way (S3_TIMEOUTS by default; smaller in tests). */
  timeouts?: { connectMs: number; idleMs: number };
}

/**
 * Every S3 request: connected within 10 s, then never 10 minutes without a byte either way
 * (decision 0244). Without them a black-holed endpoint or connection held a request, and what
 * waited for it (an upload, a health probe, a pooled socket of the SDK's 50), for good. The idle
 * limit is long: a server may send nothing while it carries out a large `CopyObject` (AWS sends
 * spaces meanwhile, others may not), and a client may pause a download for a while.
 */
export const S3_TIMEOUTS = { connectMs: 10_000, idleMs: 600_000 };

/**
 * S3 copies at most 5 GiB in one `CopyObject` ("The specified copy source is larger than the
 * maximum allowable size", AWS and MinIO alike); MAX_UPLOAD_BYTES allows 10 GiB files, whose
 * replacement or deletion copies them into the version or trash area.
 */
export const S3_MAX_COPY_OBJECT_BYTES = 5 * 1024 * 1024 * 1024;

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
}

function isAlreadyCreated(err: unknown): boolean {
  const name = (err as { name?: string }).name;
  return name === 'BucketAlreadyOwnedByYou' || name === 'BucketAlreadyExists';
}

/**
 * `s3` backend (AWS SDK v3): one bucket per area, created when missing. Uploads stream through
 * `@aws-sdk/lib-storage` (multipart past 8 MiB, parts in parallel); S3 makes an object visible
 * only when its upload completes, and a failed upload is aborted, so nothing partial is seen.
 */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;

  constructor(private readonly opts: S3StoreOptions) {
    // Checksums only where S3 requires them: the SDK's default streaming (aws-chunked) CRC
    // trailers are not understood by every S3-compatible server (s3rver, older MinIO).
    const timeouts = opts.timeouts ?? S3_TIMEOUTS;
    this.client = new S3Client({
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: timeouts.connectMs, socketTimeout: timeouts.idleMs },
      ...opts.client,
    });
  }

  private bucket(area: Area): string {
    return this.opts.buckets[area];
  }

  /** Creates the missing buckets; a failure is a StorageUnavailableError that names the settings. */
  async init(): Promise<void> {
    for (const area of AREAS) {
      try {
        await this.ensureBucket(this.bucket(area));
      } catch (err) {
        throw s3StartError(err, this.opts.client, this.bucket(area));
      }
    }
  }

  private async ensureBucket(Bucket: string): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket }));
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.client.send(new CreateBucketCommand({ Bucket }));
      } catch (createErr) {
        // Another replica created it between our HEAD and CREATE: fine if we can reach it now.
        if (!isAlreadyCreated(createErr)) throw createErr;
        await this.client.send(new HeadBucketCommand({ Bucket }));
      }
    }
  }

  async put(area: Area, key: string, body: Readable, options: PutOptions = {}): Promise<PutResult> {
    validateObjectPath(key);
    const counter = new HashingCounter(options.maxBytes);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket(area), Key: key, Body: counter, ContentType: options.contentType ?? 'application/octet-stream' },
      queueSize: 4,
      partSize: 8 * 1024 * 1024,
      leavePartsOnError: false,
    });
    const feeding = pipeline(body, counter).catch(async (err: unknown) => {
      await upload.abort().catch(() => undefined);
      throw err;
    });
    // The body's own failure (cut off, too large) is the cause to report, not the abort it caused.
    const [fed, uploaded] = await Promise.allSettled([feeding, upload.done()]);
    if (fed.status === 'rejected') throw fed.reason;
    if (uploaded.status === 'rejected') throw uploaded.reason;
    return { size: counter.bytes, sha256: counter.digest() };
  }

  async get(area: Area, key: string, range?: ByteRange): Promise<GetResult | undefined> {
    validateObjectPath(key);
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket(area), Key: key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }),
      );
      const total = range ? Number(/\/(\d+)$/.exec(res.ContentRange ?? '')?.[1] ?? res.ContentLength) : Number(res.ContentLength);
      return { body: res.Body as Readable, size: total };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async head(area: Area, key: string): Promise<ObjectInfo | undefined> {
    validateObjectPath(key);
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket(area), Key: key }));
      return { key, size: Number(res.ContentLength ?? 0) };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(area: Area, prefix: string, options: { limit?: number; cursor?: string | null } = {}): Promise<ListPage> {
    // ListObjects (v1, Marker) rather than v2: every S3-compatible server pages it correctly.
    const res = await this.client.send(
      new ListObjectsCommand({
        Bucket: this.bucket(area),
        Prefix: prefix || undefined,
        MaxKeys: options.limit ?? 1000,
        ...(options.cursor ? { Marker: options.cursor } : {}),
      }),
    );
    const items = (res.Contents ?? []).map((o) => ({ key: o.Key ?? '', size: Number(o.Size ?? 0) }));
    return { items, nextCursor: res.IsTruncated && items.length > 0 ? items[items.length - 1]!.key : null };
  }

  async copy(fromArea: Area, fromKey: string, toArea: Area, toKey: string): Promise<void> {
    validateObjectPath(fromKey);
    validateObjectPath(toKey);
    // Past CopyObject's limit the bytes are streamed through a multipart upload instead (S3's own
    // alternative, UploadPartCopy, is not offered by every S3-speaking server: s3rver lacks it).
    const source = await this.head(fromArea, fromKey);
    if (source && source.size > (this.opts.maxCopyObjectBytes ?? S3_MAX_COPY_OBJECT_BYTES)) {
      const got = await this.get(fromArea, fromKey);
      if (got) {
        await this.put(toArea, toKey, got.body);
        return;
      }
    }
    await this.client.send(
      new CopyObjectCommand({
        Bucket: this.bucket(toArea),
        Key: toKey,
        CopySource: `${this.bucket(fromArea)}/${fromKey.split('/').map(encodeURIComponent).join('/')}`,
      }),
    );
  }

  async delete(area: Area, key: string): Promise<void> {
    validateObjectPath(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket(area), Key: key }));
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket('workspace') }));
  }
}
