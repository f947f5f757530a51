import { describe, expect, it } from 'vitest';
import { WarmKernelPool, type WarmKernelSource } from './warm-pool.js';

const WS_A = 'a';
const WS_B = 'b';

/** A kernel source whose starts end when the test says (`land`, `fail`), counting what runs at once. */
function fakeSource() {
  const starts: { ws: string | undefined; resolve: (id: string) => void; reject: (err: Error) => void }[] = [];
  const shutdowns: string[] = [];
  let running = 0;
  let most = 0;
  let next = 0;
  const source: WarmKernelSource = {
    startReadyKernel: (_name, ws) =>
      new Promise<string>((resolve, reject) => {
        running++;
        most = Math.max(most, running);
        const end = () => void running--;
        starts.push({ ws, resolve: (id) => (end(), resolve(id)), reject: (err) => (end(), reject(err)) });
      }),
    shutdown: (id) => {
      shutdowns.push(id);
      return Promise.resolve();
    },
    isReady: () => Promise.resolve(true),
  };
  /** Ends the oldest start still under way with a new kernel id (for `ws`), and lets its callbacks run. */
  const land = async (ws?: string) => {
    const i = starts.findIndex((s) => ws === undefined || s.ws === ws);
    const [s] = starts.splice(i, 1);
    const id = `k${++next}`;
    s!.resolve(id);
    await new Promise((r) => setImmediate(r));
    return id;
  };
  const fail = async () => {
    starts.shift()!.reject(new Error('the sandbox is broken'));
    await new Promise((r) => setImmediate(r));
  };
  return { source, starts, shutdowns, land, fail, most: () => most };
}

describe('warm kernel pool: a run that finds no ready kernel takes the one being started (decision 0206)', () => {
  it('hands the start under way to the run instead of a second start beside it, then refills', async () => {
    const f = fakeSource();
    const pool = new WarmKernelPool(f.source, { size: 1, max: 4, idleSeconds: 600 });
    // The workspace's first run: nothing warm yet; the pool starts one.
    expect(await pool.take(WS_A, 'python3')).toBeUndefined();
    expect(f.starts).toHaveLength(1);
    // The next run comes before it is up: it waits for that kernel (no start of its own).
    const second = pool.take(WS_A, 'python3');
    const id = await f.land();
    expect(await second).toBe(id);
    expect(pool.readyKernels(WS_A)).toEqual([]);
    // The pool starts its next kernel once the claimed one is up, and keeps it.
    expect(f.starts).toHaveLength(1);
    const warm = await f.land();
    expect(pool.readyKernels(WS_A)).toEqual([warm]);
    expect(await pool.take(WS_A, 'python3')).toBe(warm);
    expect(f.most()).toBe(1);
    await f.land();
    await pool.close();
  });

  it('starts one kernel at a time per workspace, and never hands one workspace’s start to another', async () => {
    const f = fakeSource();
    const pool = new WarmKernelPool(f.source, { size: 2, max: 4, idleSeconds: 600 });
    await pool.take(WS_A, 'python3');
    await pool.take(WS_B, 'python3');
    expect(f.starts.map((s) => s.ws)).toEqual([WS_A, WS_B]);
    // B's run waits for B's start, whatever A has under way.
    const b = pool.take(WS_B, 'python3');
    await f.land(WS_A);
    const kb = await f.land(WS_B);
    expect(await b).toBe(kb);
    expect(pool.readyKernels(WS_B)).not.toContain(kb);
    // Size 2: A fills up one start after the other.
    await f.land(WS_A);
    expect(pool.readyKernels(WS_A)).toHaveLength(2);
    expect(f.starts.filter((s) => s.ws === WS_A)).toHaveLength(0);
    while (f.starts.length > 0) await f.land();
    await pool.close();
  });

  it('a run cancelled while it waits gets an error, and its kernel is shut down once up, never kept', async () => {
    const f = fakeSource();
    const pool = new WarmKernelPool(f.source, { size: 1, max: 4, idleSeconds: 600 });
    await pool.take(WS_A, 'python3');
    const cancel = new AbortController();
    const waiting = pool.take(WS_A, 'python3', Date.now(), cancel.signal);
    cancel.abort();
    await expect(waiting).rejects.toThrow(/cancelled/);
    const id = await f.land();
    expect(f.shutdowns).toEqual([id]);
    expect(pool.readyKernels(WS_A)).not.toContain(id);
    while (f.starts.length > 0) await f.land();
    await pool.close();
  });

  it('a claimed start that fails leaves the run to start its own kernel', async () => {
    const f = fakeSource();
    const pool = new WarmKernelPool(f.source, { size: 1, max: 4, idleSeconds: 600 });
    await pool.take(WS_A, 'python3');
    const waiting = pool.take(WS_A, 'python3');
    await f.fail();
    expect(await waiting).toBeUndefined();
    // No retry loop on a broken sandbox: the next run tries again.
    expect(f.starts).toHaveLength(0);
    await pool.close();
  });
});
