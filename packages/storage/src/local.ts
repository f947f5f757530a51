import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HashingCounter } from './hashing.js';
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

/**
 * What a file being written may buffer: while one write is in the thread pool the chunks that
 * arrive meanwhile go to the next as one `writev`, instead of a write and a hand-off per chunk
 * of the socket (about 32 KiB each). At most this much per upload in flight.
 */
const WRITE_BUFFER_BYTES = 1024 * 1024;

/**
 * The chunk a download reads from its file: 256 KiB instead of Node's 64 KiB takes a quarter of
 * the reads and socket writes (a bare server streaming a 1 GiB file: ≈ 1.5× the throughput,
 * most of what 1 MiB gives). At most this much per download waiting for a slow client.
 */
const READ_BUFFER_BYTES = 256 * 1024;

/** Why a file system may refuse a hard link where a copy still works (another device, no support, too many links). */
const NO_HARD_LINK = new Set(['EXDEV', 'EPERM', 'EMLINK', 'ENOTSUP', 'EOPNOTSUPP']);

/**
 * `local` backend: one directory per area under `baseDir`. A write goes to a temporary file in
 * `baseDir/.staging/<area>` (same file system), is fsynced, then renamed into place, so readers
 * see the old object or the new one, never a part. Leftover temporary files of an interrupted
 * process are removed by `init`.
 */
export class LocalObjectStore implements ObjectStore {
  readonly kind = 'local' as const;
  readonly base: string;

  constructor(baseDir: string) {
    this.base = resolve(baseDir);
  }

  private areaDir(area: Area): string {
    return join(this.base, area);
  }

  private stagingDir(area: Area): string {
    return join(this.base, '.staging', area);
  }

  /** Maps a key to its file; the key rule plus a containment check keep it inside the area. */
  private fileOf(area: Area, key: string): string {
    validateObjectPath(key);
    const root = this.areaDir(area);
    const file = resolve(root, key);
    if (!file.startsWith(root + sep)) throw new Error(`key ${JSON.stringify(key)} resolves outside area ${area}`);
    return file;
  }

  async init(): Promise<void> {
    for (const area of AREAS) {
      await mkdir(this.areaDir(area), { recursive: true });
      await rm(this.stagingDir(area), { recursive: true, force: true });
      await mkdir(this.stagingDir(area), { recursive: true });
    }
  }

  async put(area: Area, key: string, body: Readable, options: PutOptions = {}): Promise<PutResult> {
    const file = this.fileOf(area, key);
    const temp = join(this.stagingDir(area), `${randomUUID()}.part`);
    const counter = new HashingCounter(options.maxBytes);
    try {
      await mkdir(this.stagingDir(area), { recursive: true });
      await pipeline(body, counter, createWriteStream(temp, { flags: 'wx', highWaterMark: WRITE_BUFFER_BYTES }));
      const handle = await open(temp, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await mkdir(dirname(file), { recursive: true });
      await rename(temp, file);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    return { size: counter.bytes, sha256: counter.digest() };
  }

  async get(area: Area, key: string, range?: ByteRange): Promise<GetResult | undefined> {
    const file = this.fileOf(area, key);
    let size: number;
    try {
      const s = await stat(file);
      if (!s.isFile()) return undefined;
      size = s.size;
    } catch {
      return undefined;
    }
    const body = createReadStream(file, { highWaterMark: READ_BUFFER_BYTES, ...(range ? { start: range.start, end: range.end } : {}) });
    return { body, size };
  }

  async head(area: Area, key: string): Promise<ObjectInfo | undefined> {
    try {
      const s = await stat(this.fileOf(area, key));
      return s.isFile() ? { key, size: s.size } : undefined;
    } catch {
      return undefined;
    }
  }

  async list(area: Area, prefix: string, options: { limit?: number; cursor?: string | null } = {}): Promise<ListPage> {
    const limit = options.limit ?? 1000;
    const root = this.areaDir(area);
    const keys: ObjectInfo[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        const full = join(dir, e.name);
        if (e.isDirectory()) await walk(full);
        else if (e.isFile()) {
          const key = relative(root, full).split(sep).join('/');
          if (key.startsWith(prefix)) keys.push({ key, size: (await stat(full)).size });
        }
      }
    };
    await walk(root);
    keys.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const after = options.cursor ?? '';
    const page = keys.filter((k) => k.key > after).slice(0, limit + 1);
    const items = page.slice(0, limit);
    return { items, nextCursor: page.length > limit ? (items[items.length - 1]?.key ?? null) : null };
  }

  async copy(fromArea: Area, fromKey: string, toArea: Area, toKey: string): Promise<void> {
    const from = this.fileOf(fromArea, fromKey);
    const to = this.fileOf(toArea, toKey);
    const temp = join(this.stagingDir(toArea), `${randomUUID()}.part`);
    try {
      // Stored content never changes in place (a put writes a new file and renames it over the
      // key), so a copy can share it: a hard link costs nothing however large the object is (a
      // replaced 1 GiB object kept as a version was a 1 GiB copy before the answer). A file
      // system without hard links between the areas gets a real copy.
      await link(from, temp).catch(async (err: NodeJS.ErrnoException) => {
        if (!NO_HARD_LINK.has(err.code ?? '')) throw err;
        await copyFile(from, temp);
      });
      await mkdir(dirname(to), { recursive: true });
      await rename(temp, to);
      // A rename onto another name of the same file (the key already shares this content: two
      // copies of one object to one key) does nothing and leaves the temporary name (POSIX).
      await rm(temp, { force: true });
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }

  async delete(area: Area, key: string): Promise<void> {
    await rm(this.fileOf(area, key), { force: true });
  }

  async ping(): Promise<void> {
    await stat(this.base);
  }
}
