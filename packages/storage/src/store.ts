import type { Readable } from 'node:stream';

/** The four purpose areas of docs/contract/spec.md §6. */
export const AREAS = ['workspace', 'version', 'run_log', 'trash'] as const;
export type Area = (typeof AREAS)[number];

export function isArea(value: unknown): value is Area {
  return typeof value === 'string' && (AREAS as readonly string[]).includes(value);
}

export interface PutOptions {
  contentType?: string;
  /** Refuse (PayloadTooLargeError, nothing stored) once the body passes this many bytes. */
  maxBytes?: number;
}

export interface PutResult {
  size: number;
  sha256: string;
}

export interface ObjectInfo {
  key: string;
  size: number;
}

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

export interface GetResult {
  body: Readable;
  /** Size of the whole object. */
  size: number;
}

export interface ListPage {
  items: ObjectInfo[];
  nextCursor: string | null;
}

/**
 * Object storage by area and key. Writes are all-or-nothing: a put that fails or is cut off
 * leaves the previous object (if any) untouched and nothing partial visible.
 */
export interface ObjectStore {
  readonly kind: 'local' | 's3';
  /** Creates what is missing (directories, buckets) and clears leftovers of interrupted writes. */
  init(): Promise<void>;
  put(area: Area, key: string, body: Readable, options?: PutOptions): Promise<PutResult>;
  get(area: Area, key: string, range?: ByteRange): Promise<GetResult | undefined>;
  head(area: Area, key: string): Promise<ObjectInfo | undefined>;
  list(area: Area, prefix: string, options?: { limit?: number; cursor?: string | null }): Promise<ListPage>;
  copy(fromArea: Area, fromKey: string, toArea: Area, toKey: string): Promise<void>;
  /** Deleting a missing key is not an error. */
  delete(area: Area, key: string): Promise<void>;
  /** Health: the store answers. */
  ping(): Promise<void>;
}

/** Raised by `put` when the body passes `maxBytes`. */
export class ObjectTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the body is larger than the limit of ${maxBytes} bytes`);
    this.name = 'ObjectTooLargeError';
  }
}
