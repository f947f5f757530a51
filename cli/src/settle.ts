import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How long after "ready" the heap is settled: past the start-up burst (first health checks, the gateway's last). */
export const SETTLE_DELAY_MS = 5000;
/** V8's default of --bytecode-old-age (Node 24; `idle-settle.test.ts` checks it against `node --v8-options`). */
export const V8_BYTECODE_OLD_AGE = 6;

type GcFunction = (options?: { type?: 'major' | 'minor'; execution?: 'sync' | 'async'; flavor?: 'regular' | 'last-resort' }) => void;

/** The operator's value of a numeric V8 flag (command line, then NODE_OPTIONS), or undefined. */
function givenFlag(name: string, execArgv: readonly string[], nodeOptions: string): number | undefined {
  const pattern = new RegExp(`^--${name.replace(/-/g, '[-_]')}=(\\d+)$`);
  for (const arg of [...execArgv, ...nodeOptions.split(/\s+/)]) {
    const m = pattern.exec(arg);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/**
 * Lets an idle process give back what its start left behind (issue 17, docs/decisions/0085):
 * V8 grows its heap during start-up (module loading, migrations, schema compilation, route
 * registration) and keeps it, with the garbage and the bytecode of code that ran once, because
 * a process that then waits for requests allocates too little to trigger another full GC.
 *
 * Two full "last resort" GCs (V8's memory-reducing collection: compaction, new space shrunk,
 * free pages released), with bytecode that did not run since the previous GC counted as old
 * for their duration, so start-up-only functions lose their bytecode (V8 compiles a function
 * again if it is ever called). The `gc` function comes from a fresh context created while
 * `--expose-gc` is set for a moment; the flags are set back at once, so no context of the
 * process gets a `gc` global. Synchronous: tens to a few hundred milliseconds, once.
 */
export function settleHeap(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): void {
  let gc = (globalThis as { gc?: GcFunction }).gc;
  if (typeof gc !== 'function') {
    setFlagsFromString('--expose-gc');
    try {
      gc = runInNewContext('gc') as GcFunction;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  const oldAge = givenFlag('bytecode-old-age', execArgv, nodeOptions) ?? V8_BYTECODE_OLD_AGE;
  setFlagsFromString('--bytecode-old-age=1');
  try {
    for (let i = 0; i < 2; i++) gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } finally {
    setFlagsFromString(`--bytecode-old-age=${oldAge}`);
  }
}

let scheduled = false;

/**
 * Settles the heap once, `delayMs` after the process reported ready (a component, or the
 * supervisor once the platform runs). Only the start path calls it, once per process: no
 * request, signal or setting triggers it again. Returns false when it was already scheduled.
 */
export function settleOnceAfterStart(delayMs = SETTLE_DELAY_MS): boolean {
  if (scheduled) return false;
  scheduled = true;
  setTimeout(() => settleHeap(), delayMs).unref();
  return true;
}
