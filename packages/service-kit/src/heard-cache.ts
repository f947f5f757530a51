/**
 * Answers derived from the database, kept while a LISTEN connection announces their changes
 * (decisions 0082, 0237): each for at most `ttlMs`, at most `max` of them (the oldest go first),
 * and only while `hearing()`. What an announcement names is dropped; an answer read from the
 * database before a drop is not stored after it (take `stamp()` before reading, pass it to `set`),
 * since it may have seen the rows as they were before the change.
 *
 * A drop may name its scope (a workspace, a user): then only answers of that scope read before
 * it are refused, so that changes in one workspace, made in a loop, do not keep every other
 * workspace's answers from being kept. A drop without a scope refuses every answer read before it.
 */
export class HeardCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  /** Bumped by every drop. */
  private generation = 0;
  /** The generation of the last drop without a scope. */
  private allDroppedAt = 0;
  /** The generation of each scope's last drop (at most `max` scopes; beyond, as a drop of all). */
  private readonly scopeDroppedAt = new Map<string, number>();

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

  /** Keeps `value`, read since `stamp`, unless a drop since then may have made it stale: any drop, or with `scope` a drop of that scope or of all. */
  set(key: string, value: V, stamp: number, scope?: string): void {
    if (!this.hearing() || this.allDroppedAt > stamp) return;
    if (scope === undefined ? this.generation !== stamp : (this.scopeDroppedAt.get(scope) ?? 0) > stamp) return;
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
  }

  /** Drops the entries `which` accepts (every entry without it); `scope`: what the change concerns (everything without it). */
  drop(which?: (key: string, value: V) => boolean, scope?: string): void {
    this.dropped(scope);
    if (which === undefined) this.entries.clear();
    else for (const [key, e] of this.entries) if (which(key, e.value)) this.entries.delete(key);
  }

  /** Drops the entries of these keys; `scope`: what the change concerns (everything without it). */
  dropKeys(keys: Iterable<string>, scope?: string): void {
    this.dropped(scope);
    for (const key of keys) this.entries.delete(key);
  }

  private dropped(scope: string | undefined): void {
    this.generation++;
    if (scope !== undefined && this.scopeDroppedAt.size < this.max) {
      this.scopeDroppedAt.delete(scope);
      this.scopeDroppedAt.set(scope, this.generation);
      return;
    }
    if (scope !== undefined && this.scopeDroppedAt.has(scope)) {
      this.scopeDroppedAt.set(scope, this.generation);
      return;
    }
    // No scope, or more scopes than entries: everything read before is refused.
    this.allDroppedAt = this.generation;
    this.scopeDroppedAt.clear();
  }
}
