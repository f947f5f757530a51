import { createRequire } from 'node:module';
import { crc32 } from 'node:zlib';
import { ZipFile } from 'yazl';

/**
 * yazl's CRC-32, from its dependency `buffer-crc32`: plain JavaScript, one byte per step (481 MB/s
 * on the machine of decision 0226, where Node's `zlib.crc32` does 6 400 MB/s). yazl calls it as
 * `require("buffer-crc32").unsigned(chunk, previous)` on every chunk of every entry, so the
 * backend gives that module's `unsigned` Node's own for buffers (the same checksum: tested against
 * the original) and leaves anything else to the original. Decision 0228.
 */
interface BufferCrc32 {
  unsigned: (input: unknown, previous?: unknown) => number;
}

const fromYazl = createRequire(createRequire(import.meta.url).resolve('yazl'));
const bufferCrc32 = fromYazl('buffer-crc32') as BufferCrc32;
/** buffer-crc32's own, kept for what is not a buffer (yazl passes buffers only). */
export const javascriptCrc32 = bufferCrc32.unsigned;

/** Node's CRC-32 with buffer-crc32's interface: `previous` is the running CRC (a number). */
export function nodeCrc32(input: unknown, previous?: unknown): number {
  if (Buffer.isBuffer(input) && (previous === undefined || typeof previous === 'number')) return crc32(input, (previous ?? 0) >>> 0);
  return javascriptCrc32(input, previous);
}

bufferCrc32.unsigned = nodeCrc32;

/** Whether yazl's CRC-32 is Node's here (the test fails when an upgrade of yazl moves it). */
export function zipUsesNodeCrc32(): boolean {
  return (fromYazl('buffer-crc32') as BufferCrc32).unsigned === nodeCrc32;
}

export { ZipFile };
