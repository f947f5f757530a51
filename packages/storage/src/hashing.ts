import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { ObjectTooLargeError } from './store.js';

/** Pass-through that hashes (SHA-256), counts, and stops the stream past `maxBytes`. */
export class HashingCounter extends Transform {
  private readonly hash = createHash('sha256');
  /** Bytes seen so far (not named `size`: upload libraries read that as the total length). */
  bytes = 0;

  constructor(private readonly maxBytes = Number.POSITIVE_INFINITY) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) return done(new ObjectTooLargeError(this.maxBytes));
    this.hash.update(chunk);
    done(null, chunk);
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}
