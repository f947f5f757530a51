/**
 * At most `limit` pieces of work under way per key (a user, say); keys are independent. The one
 * per-key concurrency cap of the platform: a user's zip downloads, a user's WebDAV operations on
 * whole folders. `take` answers at once, before anything is awaited, so requests sent together
 * cannot all pass the check.
 */
export class KeyedSlots {
  private readonly taken = new Map<string, number>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError('a slot limit is a whole number of at least 1');
  }

  /**
   * A place for `key`, or `undefined` when its `limit` are taken. The place is given back by the
   * returned function, once however often it is called (a request's end and its failure may both
   * call it).
   */
  take(key: string): (() => void) | undefined {
    const n = this.taken.get(key) ?? 0;
    if (n >= this.limit) return undefined;
    this.taken.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.taken.get(key) ?? 1) - 1;
      if (left <= 0) this.taken.delete(key);
      else this.taken.set(key, left);
    };
  }

  /** Places taken for `key` now. */
  inUse(key: string): number {
    return this.taken.get(key) ?? 0;
  }

  /** How many keys hold a place (0 once everything is given back: no key is kept). */
  get size(): number {
    return this.taken.size;
  }
}
