/**
 * Answers derived from the database, kept while a LISTEN connection announces their changes
 * (decisions 0082, 0237): each for at most `ttlMs`, at most `max` of them (the oldest go first),
 * and only while `hearing()`. What an announcement names is dropped; an answer read from the
 * database before a drop is not stored after it (take `stamp()` before reading, pass it to `set`),
 * since it may have seen the rows as they were before the change.
 */
export class HeardCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  /** Bumped by every drop. */
  private generation = 0;

  constructor(
    private readonly hearing: () => boolean,
    private readonly ttlMs: number,
    private readonly max: number,
  ) {}

  get(key: string): V | undefined {
    if (!this.hearing()) return undefined;
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.until <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  stamp(): number {
    return this.generation;
  }

  set(key: string, value: V, stamp: number): void {
    if (!this.hearing() || stamp !== this.generation) return;
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
  }

  /** Drops the entries `which` accepts (every entry without it). */
  drop(which?: (key: string, value: V) => boolean): void {
    this.generation++;
    if (which === undefined) this.entries.clear();
    else for (const [key, e] of this.entries) if (which(key, e.value)) this.entries.delete(key);
  }

  /** Drops the entries of these keys. */
  dropKeys(keys: Iterable<string>): void {
    this.generation++;
    for (const key of keys) this.entries.delete(key);
  }
}
