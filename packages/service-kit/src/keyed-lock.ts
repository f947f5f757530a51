/**
 * Runs work for one key after the previous work of that key ended (failed or not); keys are
 * independent. The one per-key queue of the platform: the bridge's sessions, the runtime's
 * executes on one kernel.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    this.tails.set(key, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (this.tails.get(key) === next) this.tails.delete(key);
      });
    return next;
  }

  /** How many keys have work queued or running (0 once everything settled: no key is kept). */
  get size(): number {
    return this.tails.size;
  }
}
