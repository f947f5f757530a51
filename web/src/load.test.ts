import { describe, expect, it } from 'vitest';
import { pollDelay } from './load';

describe('pollDelay: the waits of a live list', () => {
  it('starts at the first wait and doubles up to the longest', () => {
    expect(Array.from({ length: 6 }, (_, n) => pollDelay(n, 250, 2000))).toEqual([250, 500, 1000, 2000, 2000, 2000]);
  });

  it('is a fixed period when both are the same, and never overflows', () => {
    expect([0, 1, 5].map((n) => pollDelay(n, 2000, 2000))).toEqual([2000, 2000, 2000]);
    expect(pollDelay(10_000, 250, 2000)).toBe(2000);
  });
});
