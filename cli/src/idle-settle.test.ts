import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { V8_BYTECODE_OLD_AGE } from './settle.js';

const cliDir = fileURLToPath(new URL('..', import.meta.url));
const settleModule = fileURLToPath(new URL('../dist/settle.js', import.meta.url));

/** Runs `body` (an ES module) in a fresh Node process without --expose-gc; returns its last line as JSON. */
function inFreshProcess(body: string, execArgv: string[] = []): unknown {
  const out = execFileSync(process.execPath, [...execArgv, '--input-type=module', '-e', `import * as settle from ${JSON.stringify(settleModule)};\n${body}`], {
    cwd: cliDir,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

// Idle memory (issue 17, decision 0085): the heap a process grew during its start is given back once.
describe('settling the heap after the start', () => {
  it('gives back the garbage and grown heap of a start-up burst, without leaving a gc global anywhere', () => {
    const r = inFreshProcess(`
      import { runInNewContext } from 'node:vm';
      let keep = [];
      for (let i = 0; i < 300000; i++) keep.push({ i, s: 'x'.repeat(i % 50) });
      keep = undefined;
      const before = process.memoryUsage().heapTotal;
      settle.settleHeap();
      const after = process.memoryUsage().heapTotal;
      console.log(JSON.stringify({ before, after, global: typeof globalThis.gc, newContext: runInNewContext('typeof gc') }));`);
    const { before, after, global, newContext } = r as { before: number; after: number; global: string; newContext: string };
    expect(after).toBeLessThan(before / 2);
    expect(global).toBe('undefined');
    expect(newContext).toBe('undefined');
  });

  it("keeps an operator's --expose-gc", () => {
    const r = inFreshProcess(
      `settle.settleHeap(); console.log(JSON.stringify(typeof globalThis.gc + ' ' + (await import('node:vm')).runInNewContext('typeof gc')));`,
      ['--expose-gc'],
    );
    expect(r).toBe('function function');
  });

  it('is scheduled once per process, after the delay, and runs once', () => {
    const r = inFreshProcess(`
      import v8 from 'node:v8';
      const first = settle.settleOnceAfterStart(50);
      const again = settle.settleOnceAfterStart(50);
      const t = performance.now();
      // Count the full GCs: the two of the settling, and none when scheduled again.
      const { PerformanceObserver } = await import('node:perf_hooks');
      let majors = 0;
      new PerformanceObserver((list) => { for (const e of list.getEntries()) if (e.detail?.kind === 4 /* major */) majors++; }).observe({ entryTypes: ['gc'] });
      const timer = setInterval(() => undefined, 10);
      await new Promise((r) => setTimeout(r, 400));
      clearInterval(timer);
      console.log(JSON.stringify({ first, again, majors }));`);
    const { first, again, majors } = r as { first: boolean; again: boolean; majors: number };
    expect(first).toBe(true);
    expect(again).toBe(false);
    expect(majors).toBeGreaterThanOrEqual(2);
    expect(majors).toBeLessThanOrEqual(14); // a last-resort GC is up to seven full collections; two of them, and none for the second call
  });

  it('restores the default bytecode age that V8 has (the value settleHeap sets back)', () => {
    const options = execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
    expect(/--bytecode-old-age[^\n]*\n\s*type: int\s+default: --bytecode-old-age=(\d+)/.exec(options)?.[1]).toBe(String(V8_BYTECODE_OLD_AGE));
  });

  it('only the start paths call it: a component once it serves, the supervisor once the platform runs (no route, signal or setting)', () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const sources = ['cli/src', ...['services', 'packages'].flatMap((d) => readdirSync(`${root}${d}`).map((p) => `${d}/${p}/src`))]
      .filter((dir) => existsSync(`${root}${dir}`))
      .flatMap((dir) => (readdirSync(`${root}${dir}`, { recursive: true }) as string[]).map((f) => `${dir}/${f}`))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && f !== 'cli/src/settle.ts');
    const callers = sources.filter((f) => /settleHeap|settleOnceAfterStart/.test(readFileSync(`${root}${f}`, 'utf8')));
    expect(callers.sort()).toEqual(['cli/src/commands.ts', 'cli/src/supervisor.ts']);
    const commands = readFileSync(`${root}cli/src/commands.ts`, 'utf8');
    expect(commands.match(/settleOnceAfterStart\(/g)).toHaveLength(1);
    expect(commands.indexOf('settleOnceAfterStart(')).toBeGreaterThan(commands.indexOf('process.send?.(READY_MESSAGE)'));
  });
});
