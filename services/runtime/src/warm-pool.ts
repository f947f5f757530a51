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

interface Slot {
  readonly workspaceId: string | undefined;
  readonly kernelName: string;
  /** Started, answered kernel_info, never executed anything. */
  readonly ready: string[];
  starting: number;
  lastUsed: number;
}

/**
 * Warm kernels per workspace (docs/decisions/0125-warm-kernel-pool.md). A kernel in the pool was
 * started in its workspace's own sandbox and has executed nothing; `take` hands it to exactly one
 * run, which shuts it down afterwards, and starts its replacement in the background. So a run
 * never waits for a kernel start once its workspace has run before, and never sees another
 * run's state. Pools are keyed by workspace: a kernel never leaves the sandbox it started in.
 * Bounded per workspace (`size`) and in all (`max`, the least recently used workspace gives way);
 * a pool not drawn from for `idleSeconds` is emptied.
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
   * A warm kernel of this workspace for one run, or undefined (the run starts its own). Either
   * way the workspace's pool is filled again in the background: the next run finds one.
   */
  async take(workspaceId: string | undefined, kernelName: string, now = Date.now()): Promise<string | undefined> {
    if (this.closed || this.opts.size <= 0) return undefined;
    const key = WarmKernelPool.key(workspaceId, kernelName);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { workspaceId, kernelName, ready: [], starting: 0, lastUsed: now };
      this.slots.set(key, slot);
    }
    slot.lastUsed = now;
    let kernelId: string | undefined;
    while ((kernelId = slot.ready.shift()) !== undefined) {
      if (await this.source.isReady(kernelId).catch(() => false)) break;
      // Culled by Jupyter, its server stopped, or it died: never hand it out.
      this.discard(kernelId);
    }
    if (this.slots.get(key) === slot) this.refill(key, slot);
    return kernelId;
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
    return slots.reduce((t, s) => ({ ready: t.ready + s.ready.length, starting: t.starting + s.starting }), { ready: 0, starting: 0 });
  }

  /** The ids of the warm kernels of one workspace (tests, diagnostics). */
  readyKernels(workspaceId: string | undefined, kernelName = 'python3'): string[] {
    return [...(this.slots.get(WarmKernelPool.key(workspaceId, kernelName))?.ready ?? [])];
  }

  /** Resolves when no warm kernel is being started. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private total(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.ready.length + s.starting;
    return n;
  }

  private refill(key: string, slot: Slot): void {
    while (!this.closed && slot.ready.length + slot.starting < this.opts.size) {
      if (this.total() >= this.opts.max && !this.evictFor(slot)) return;
      slot.starting++;
      const started = this.source
        .startReadyKernel(slot.kernelName, slot.workspaceId)
        .then(
          (kernelId) => {
            slot.starting--;
            // The pool was emptied (idle, closed) while this kernel started: it is not wanted.
            if (this.closed || this.slots.get(key) !== slot) this.discard(kernelId);
            else slot.ready.push(kernelId);
          },
          (err: unknown) => {
            // No retry here: the next run of the workspace tries again (no loop on a broken sandbox).
            slot.starting--;
            this.opts.log?.warn({ err, workspace_id: slot.workspaceId ?? null }, 'a warm kernel did not start');
          },
        )
        .finally(() => this.pending.delete(started));
      this.pending.add(started);
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
