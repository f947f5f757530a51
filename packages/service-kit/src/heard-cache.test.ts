import { describe, expect, it } from 'vitest';
import { HeardCache } from './heard-cache.js';

describe('HeardCache', () => {
  it('refuses an answer read before a drop of its scope, keeps one of another scope (a loop of changes elsewhere keeps nothing from being kept)', () => {
    const cache = new HeardCache<string>(() => true, 60_000, 100);
    const stamp = cache.stamp();
    cache.dropKeys(['b:1'], 'b');
    cache.set('a:1', 'read before b changed', stamp, 'a');
    cache.set('b:2', 'read before b changed', stamp, 'b');
    expect(cache.get('a:1')).toBe('read before b changed');
    expect(cache.get('b:2')).toBeUndefined();
    // Without a scope, any drop refuses it (as before).
    cache.set('c:1', 'x', stamp);
    expect(cache.get('c:1')).toBeUndefined();
  });

  it('refuses every answer read before a drop of everything', () => {
    const cache = new HeardCache<string>(() => true, 60_000, 100);
    const stamp = cache.stamp();
    cache.drop();
    cache.set('a:1', 'x', stamp, 'a');
    expect(cache.get('a:1')).toBeUndefined();
    const after = cache.stamp();
    cache.set('a:1', 'y', after, 'a');
    expect(cache.get('a:1')).toBe('y');
  });

  it('remembers at most `max` scopes; beyond, a drop counts as a drop of everything', () => {
    const cache = new HeardCache<string>(() => true, 60_000, 2);
    const stamp = cache.stamp();
    cache.dropKeys([], 's1');
    cache.dropKeys([], 's2');
    cache.set('t:1', 'kept', stamp, 't');
    expect(cache.get('t:1')).toBe('kept');
    cache.dropKeys([], 's3');
    cache.set('u:1', 'refused', stamp, 'u');
    expect(cache.get('u:1')).toBeUndefined();
  });

  it('keeps nothing while not hearing', () => {
    let hearing = false;
    const cache = new HeardCache<string>(() => hearing, 60_000, 10);
    cache.set('a', 'x', cache.stamp(), 'a');
    hearing = true;
    expect(cache.get('a')).toBeUndefined();
  });
});
