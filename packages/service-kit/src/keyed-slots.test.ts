import { describe, expect, it } from 'vitest';
import { KeyedSlots } from './keyed-slots.js';

describe('KeyedSlots', () => {
  it('gives each key its own places, up to the limit', () => {
    const slots = new KeyedSlots(2);
    const a1 = slots.take('a');
    const a2 = slots.take('a');
    expect(a1).toBeTypeOf('function');
    expect(a2).toBeTypeOf('function');
    expect(slots.take('a')).toBeUndefined();
    // Another key is not held back by the first.
    expect(slots.take('b')).toBeTypeOf('function');
    expect(slots.inUse('a')).toBe(2);
    a1!();
    expect(slots.inUse('a')).toBe(1);
    expect(slots.take('a')).toBeTypeOf('function');
  });

  it('gives a place back once, however often its release is called', () => {
    const slots = new KeyedSlots(1);
    const first = slots.take('a')!;
    first();
    first();
    const second = slots.take('a')!;
    // A second call of the first release must not free the second holder's place.
    first();
    expect(slots.take('a')).toBeUndefined();
    second();
    expect(slots.size).toBe(0);
  });

  it('keeps no key once every place is given back', () => {
    const slots = new KeyedSlots(3);
    const releases = ['a', 'b', 'c', 'a'].map((k) => slots.take(k)!);
    expect(slots.size).toBe(3);
    for (const r of releases) r();
    expect(slots.size).toBe(0);
  });

  it('refuses a limit that is not a whole number of at least 1', () => {
    expect(() => new KeyedSlots(0)).toThrow(RangeError);
    expect(() => new KeyedSlots(1.5)).toThrow(RangeError);
  });
});
