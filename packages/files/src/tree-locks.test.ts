import { describe, expect, it } from 'vitest';
import { TREE_LOCK_DEPTH, treeLocks } from './files.js';

/** A path of `depth` segments, each picked from a few short names so that prefixes repeat. */
function randomPath(depth: number, rnd: () => number): string {
  return Array.from({ length: depth }, () => ['a', 'b', 'c'][Math.floor(rnd() * 3)]!).join('/');
}

/** Whether two writes ask for one lock in modes that conflict (one of them exclusive). */
function conflict(x: string, y: string): boolean {
  const lx = treeLocks('ws', x);
  const ly = treeLocks('ws', y);
  return lx.exclusive === ly.exclusive || ly.shared.includes(lx.exclusive) || lx.shared.includes(ly.exclusive);
}

describe('the tree locks of a write (decision 0246)', () => {
  it('are bounded however deep the path: 1,024 bytes can name 512 segments', () => {
    const deepest = Array.from({ length: 512 }, () => 'a').join('/');
    expect(Buffer.byteLength(deepest)).toBe(1023);
    const locks = treeLocks('ws', deepest);
    expect(locks.shared.length + 1).toBe(TREE_LOCK_DEPTH + 1);
    expect(new Set(locks.shared).size).toBe(locks.shared.length);
    expect(treeLocks('ws', 'a/b/c')).toEqual({ shared: ['codeagent:tree:ws:a', 'codeagent:tree:ws:a/b'], exclusive: 'codeagent:tree:ws:a/b/c' });
  });

  it('conflict for a path and any folder it lies in, at every depth, and never for siblings', () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 3000; i++) {
      const depth = 1 + Math.floor(rnd() * 80);
      const path = randomPath(depth, rnd);
      const segments = path.split('/');
      const cut = 1 + Math.floor(rnd() * depth);
      const folder = segments.slice(0, cut).join('/');
      // The path itself, or a folder it lies in (a file there would make it a folder too).
      expect(conflict(path, folder), `${path} / ${folder}`).toBe(true);
      expect(conflict(folder, path), `${folder} / ${path}`).toBe(true);
    }
    // Writes below one folder share its locks: none waits for another, down to the bound.
    for (let depth = 2; depth <= TREE_LOCK_DEPTH; depth++) {
      const folder = Array.from({ length: depth - 1 }, () => 'd').join('/');
      expect(conflict(`${folder}/x`, `${folder}/y`), `depth ${depth}`).toBe(false);
    }
    // Other workspaces never share a lock.
    expect(treeLocks('one', 'a').exclusive).not.toBe(treeLocks('two', 'a').exclusive);
  });
});
