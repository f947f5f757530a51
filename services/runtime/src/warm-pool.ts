import type { FastifyBaseLogger } from 'fastify';

/** What the pool needs of the kernel layer (KernelService implements it). */
export interface WarmKernelSource {
  /** Starts a kernel in the workspace's sandbox (the scratch sandbox for `undefined`) and waits until it answers kernel_info. */
  startReadyKernel(kernelName: string, workspaceId: string | undefined): Promise<string>;
  shutdown(kernelId: string): Promise<void>;
  /** True while the kernel can be handed to a run: its server runs and still has it, its connection is up, it is idle. */
  isReady(kernelId: string): Promise<boolean>;
}

export interface WarmPoolOptions {
  /** Warm kernels kept per workspace and kernel name (KERNEL_POOL_SIZE; 0 = no pool). */
  size: number;
  /** Warm kernels kept over all workspaces (KERNEL_POOL_MAX). */
  max: number;
  /** A workspace whose pool was not drawn from for this long loses its warm kernels (KERNEL_POOL_IDLE_SECONDS). */
  idleSeconds: number;
  log?: Pick<FastifyBaseLogger, 'warn' | 'info'> | undefined;
}

/** A warm kernel being started; `claimed` once a run found no ready kernel and waits for this one. */
interface Start {
  claimed: boolean;
  /** The kernel's id for the run that claimed it; undefined when unclaimed (it went to `ready`) or when it did not start. */
  kernel: Promise<string | undefined>;
}

interface Slot {
  readonly workspaceId: string | undefined;
  readonly kernelName: string;
  /** Started, answered kernel_info, never executed anything. */
  readonly ready: string[];
  readonly starting: Start[];
  lastUsed: number;
}

/**
 * Warm kernels per workspace (docs/decisions/0125-warm-kernel-pool.md). A kernel in the pool was
 * started in its workspace's own sandbox and has executed nothing; `take` hands it to exactly one
 * run, which shuts it down afterwards, and starts its replacement in the background. So a run
 * never waits for a kernel start once its workspace has run before, and never sees another
 * run's state. Pools are keyed by workspace: a kernel never leaves the sandbox it started in.
 * Bounded per workspace (`size`) and in all (`max`, the least recently used workspace gives way);
 * a pool not drawn from for `idleSeconds` is emptied. A workspace's pool starts one kernel at a
 * time, and a run that finds none ready takes the one being started (decision 0206).
 */
export class WarmKernelPool {
  private readonly slots = new Map<string, Slot>();
  private readonly pending = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly source: WarmKernelSource,
    private readonly opts: WarmPoolOptions,
  ) {
    if (opts.size > 0) {
      const period = Math.max(1000, Math.min(60_000, (opts.idleSeconds * 1000) / 2));
      this.timer = setInterval(() => void this.cullIdle().catch((err: unknown) => opts.log?.warn({ err }, 'culling warm kernels failed')), period);
      this.timer.unref();
    }
  }

  private static key(workspaceId: string | undefined, kernelName: string): string {
    return `${workspaceId ?? ''}\u0000${kernelName}`;
  }

  /**
   * A warm kernel of this workspace for one run, or undefined (the run starts its own). With
   * none ready but one being started (the replacement for the run before, when runs come faster
   * than kernels start), the run waits for that one: it is up sooner than a start of the run's
   * own, which would also share the machine with it. Either way the workspace's pool is filled
   * again in the background, one start at a time: the next run finds one. A run cancelled
   * (`signal`) while it waits gets an error; the kernel it waited for is shut down once up.
   */
  async take(workspaceId: string | undefined, kernelName: string, now = Date.now(), signal?: AbortSignal): Promise<string | undefined> {
    if (this.closed || this.opts.size <= 0) return undefined;
    const [key, slot] = this.used(workspaceId, kernelName, now);
    let kernelId: string | undefined;
    while ((kernelId = slot.ready.shift()) !== undefined) {
      if (await this.source.isReady(kernelId).catch(() => false)) break;
      // Culled by Jupyter, its server stopped, or it died: never hand it out.
      this.discard(kernelId);
    }
    const start = kernelId === undefined && this.slots.get(key) === slot ? slot.starting.find((s) => !s.claimed) : undefined;
    if (start === undefined) {
      if (this.slots.get(key) === slot) this.refill(key, slot);
      return kernelId;
    }
    start.claimed = true;
    return this.claimed(start, signal);
  }

  /** The kernel of a claimed start, for its run; a cancelled run's is shut down once it is up. */
  private async claimed(start: Start, signal: AbortSignal | undefined): Promise<string | undefined> {
    if (!signal) return start.kernel;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<'aborted'>((resolve) => {
      onAbort = () => resolve('aborted');
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const got = await Promise.race([start.kernel, aborted]);
      if (got !== 'aborted') return got;
    } finally {
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
    void start.kernel.then((kernelId) => kernelId !== undefined && this.discard(kernelId));
    throw new Error('the run was cancelled while its kernel started');
  }

  /**
   * Fills the workspace's pool ahead of a run (a member opened the run form, decision 0209): the
   * kernels start in the background (the workspace's Jupyter server first, when it is not
   * running), one at a time, up to `size`; nothing when it is full or filling. Counts as a use
   * of the pool (`idleSeconds` starts again).
   */
  fill(workspaceId: string | undefined, kernelName: string, now = Date.now()): void {
    if (this.closed || this.opts.size <= 0) return;
    const [key, slot] = this.used(workspaceId, kernelName, now);
    this.refill(key, slot);
  }

  /** The pool of a workspace and kernel name (made when missing), marked as used at `now`. */
  private used(workspaceId: string | undefined, kernelName: string, now: number): [string, Slot] {
    const key = WarmKernelPool.key(workspaceId, kernelName);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { workspaceId, kernelName, ready: [], starting: [], lastUsed: now };
      this.slots.set(key, slot);
    }
    slot.lastUsed = now;
    return [key, slot];
  }

  /** True for a kernel waiting in a pool: no caller may act on it (it must reach its run untouched). */
  holds(kernelId: string): boolean {
    for (const s of this.slots.values()) if (s.ready.includes(kernelId)) return true;
    return false;
  }

  /** Warm kernels held and being started, in all and for one workspace. */
  stats(workspaceId?: string | null, kernelName = 'python3'): { ready: number; starting: number } {
    const slots =
      workspaceId === null ? [...this.slots.values()] : [this.slots.get(WarmKernelPool.key(workspaceId, kernelName))].filter((s): s is Slot => s !== undefined);
    return slots.reduce((t, s) => ({ ready: t.ready + s.ready.length, starting: t.starting + s.starting.length }), { ready: 0, starting: 0 });
  }

  /** The ids of the warm kernels of one workspace (tests, diagnostics). */
  readyKernels(workspaceId: string | undefined, kernelName = 'python3'): string[] {
    return [...(this.slots.get(WarmKernelPool.key(workspaceId, kernelName))?.ready ?? [])];
  }

  /** Resolves when no warm kernel is being started. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** The pool's own kernels of a slot: ready, and being started for no run. */
  private static held(slot: Slot): number {
    return slot.ready.length + slot.starting.filter((s) => !s.claimed).length;
  }

  private total(): number {
    let n = 0;
    for (const s of this.slots.values()) n += WarmKernelPool.held(s);
    return n;
  }

  private refill(key: string, slot: Slot): void {
    // One start at a time per workspace (a second one beside it would slow both); the next
    // begins when this one is over.
    if (!this.closed && slot.starting.length === 0 && WarmKernelPool.held(slot) < this.opts.size) {
      if (this.total() >= this.opts.max && !this.evictFor(slot)) return;
      const start: Start = { claimed: false, kernel: Promise.resolve(undefined) };
      const done = () => slot.starting.splice(slot.starting.indexOf(start), 1);
      start.kernel = this.source.startReadyKernel(slot.kernelName, slot.workspaceId).then(
        (kernelId) => {
          done();
          const wanted = !this.closed && this.slots.get(key) === slot;
          // The pool was emptied (idle, closed) while this kernel started: it is not wanted. A
          // claimed kernel is its run's.
          if (!start.claimed) {
            if (wanted) slot.ready.push(kernelId);
            else this.discard(kernelId);
          }
          // The pool's next start, now that this one is over.
          if (wanted) this.refill(key, slot);
          return start.claimed ? kernelId : undefined;
        },
        (err: unknown) => {
          // No retry here: the next run of the workspace tries again (no loop on a broken sandbox).
          done();
          this.opts.log?.warn({ err, workspace_id: slot.workspaceId ?? null }, 'a warm kernel did not start');
          return undefined;
        },
      );
      slot.starting.push(start);
      const tracked: Promise<void> = start.kernel.then(() => undefined).finally(() => this.pending.delete(tracked));
      this.pending.add(tracked);
    }
  }

  /** At the global cap: the least recently used other workspace gives up one warm kernel. */
  private evictFor(slot: Slot): boolean {
    let victim: Slot | undefined;
    for (const s of this.slots.values()) {
      if (s === slot || s.ready.length === 0 || s.lastUsed >= slot.lastUsed) continue;
      if (!victim || s.lastUsed < victim.lastUsed) victim = s;
    }
    const kernelId = victim?.ready.shift();
    if (kernelId === undefined) return false;
    this.discard(kernelId);
    return true;
  }

  private discard(kernelId: string): void {
    const done = this.source
      .shutdown(kernelId)
      .catch(() => undefined)
      .finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  /** Empties the pools of workspaces that drew no kernel for `idleSeconds`. */
  async cullIdle(now = Date.now()): Promise<void> {
    for (const [key, slot] of this.slots) {
      if (now - slot.lastUsed < this.opts.idleSeconds * 1000) continue;
      this.slots.delete(key);
      if (slot.ready.length > 0) this.opts.log?.info({ workspace_id: slot.workspaceId ?? null, kernels: slot.ready.length }, 'shutting down idle warm kernels');
      for (const kernelId of slot.ready.splice(0)) this.discard(kernelId);
    }
    await this.settled();
  }

  /** Shuts every warm kernel down; nothing is started any more. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    for (const slot of this.slots.values()) for (const kernelId of slot.ready.splice(0)) this.discard(kernelId);
    this.slots.clear();
    await this.settled();
  }
}
