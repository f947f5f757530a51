import { availableParallelism } from 'node:os';

/** Thrown at once when the password-hashing queue is full: the caller answers 429, it never waits. */
export class HashingBusyError extends Error {
  constructor() {
    super('too many password checks at once; try again in a moment');
    this.name = 'HashingBusyError';
  }
}

export interface HashingLimits {
  /** Hashes running at the same time (each takes one libuv thread and 32 MiB). */
  concurrency: number;
  /** Hashes waiting for a slot; one more is refused at once with HashingBusyError. */
  queue: number;
}

/**
 * Admission control for password hashing. A scrypt hash runs on libuv's thread pool (4 threads
 * by default), which file and DNS work share; unbounded, a login flood fills every thread and
 * every core, and the whole process stalls (issue 12: /health took 21 s). The gate lets
 * `concurrency` hashes run and `queue` wait, and refuses the rest at once, so a flood costs a
 * bounded share of the machine and an attacker learns nothing from waiting.
 */
export class HashingGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  private limits: HashingLimits = { concurrency: 1, queue: 0 };

  constructor(limits: HashingLimits) {
    this.configure(limits);
  }

  configure(limits: HashingLimits): void {
    this.limits = { concurrency: Math.max(1, Math.floor(limits.concurrency)), queue: Math.max(0, Math.floor(limits.queue)) };
  }

  get stats(): { running: number; waiting: number } & HashingLimits {
    return { running: this.running, waiting: this.waiting.length, ...this.limits };
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.limits.concurrency) {
      if (this.waiting.length >= this.limits.queue) throw new HashingBusyError();
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await work();
    } finally {
      // Hand the slot straight to the next waiter (running stays the same), or free it.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Defaults: half the cores (at least 1, at most 4: libuv has 4 threads and file I/O needs some),
 * and a short queue (about half a second of work at one hash per 60 ms and slot).
 */
export function defaultHashingLimits(cores = availableParallelism()): HashingLimits {
  const concurrency = Math.max(1, Math.min(4, Math.floor(cores / 2)));
  return { concurrency, queue: 8 * concurrency };
}
