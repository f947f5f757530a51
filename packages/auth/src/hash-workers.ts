import type { ScryptOptions } from 'node:crypto';
import { Worker } from 'node:worker_threads';

/**
 * The threads that run scrypt: a small pool of worker threads at a lower scheduling priority
 * (nice 10 on Linux, where a nice value belongs to one thread). Each runs `scryptSync` on its own
 * thread, so hashing neither occupies libuv's thread pool (file I/O needs it) nor takes CPU from
 * the event loop when the machine is busy: under contention the platform's other work runs first
 * and the hashing gate's queue fills, so floods get 429 sooner.
 *
 * The code is inline (`eval`), so it works the same from the sources (tests) and from `dist`.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
if (process.platform === 'linux') {
  try { require('node:os').setPriority(10); } catch {}
}
parentPort.on('message', (m) => {
  try {
    const key = scryptSync(m.password, Buffer.from(m.salt), m.keylen, m.options);
    parentPort.postMessage({ id: m.id, key });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String((err && err.message) || err) });
  }
});
`;

interface Pending {
  resolve: (key: Buffer) => void;
  reject: (err: Error) => void;
}

class HashWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private next = 0;

  constructor(onExit: () => void) {
    this.worker = new Worker(WORKER_SOURCE, { eval: true });
    this.worker.unref();
    this.worker.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (this.pending.size === 0) this.worker.unref();
      if (m.key) p.resolve(Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength));
      else p.reject(new Error(m.error ?? 'scrypt failed'));
    });
    const failAll = (err: Error) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      onExit();
    };
    this.worker.on('error', failAll);
    this.worker.on('exit', (code) => failAll(new Error(`the hashing thread exited (${code})`)));
  }

  get busy(): number {
    return this.pending.size;
  }

  scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Keep the process alive while a hash is under way, not while the pool is idle.
      this.worker.ref();
      this.worker.postMessage({ id, password, salt, keylen, options });
    });
  }
}

/** At most `size` threads, started on first use; each hash goes to the least busy one. */
export class HashWorkerPool {
  private readonly workers: HashWorker[] = [];

  constructor(private size: number) {}

  resize(size: number): void {
    this.size = Math.max(1, size);
  }

  scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
    let worker = this.workers.reduce<HashWorker | undefined>((best, w) => (best === undefined || w.busy < best.busy ? w : best), undefined);
    if (worker === undefined || (worker.busy > 0 && this.workers.length < this.size)) {
      const created: HashWorker = new HashWorker(() => {
        const i = this.workers.indexOf(created);
        if (i !== -1) this.workers.splice(i, 1);
      });
      this.workers.push(created);
      worker = created;
    }
    return worker.scrypt(password, salt, keylen, options);
  }
}
