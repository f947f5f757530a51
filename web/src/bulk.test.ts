import { describe, expect, it } from 'vitest';
import { eachInTurn } from './bulk';

describe('eachInTurn', () => {
  it('runs the steps one after the other, reports progress after each, and answers the refusals by key', async () => {
    const order: string[] = [];
    let running = 0;
    const progress: number[] = [];
    const refused = await eachInTurn(
      ['a', 'b', 'c', 'd'],
      (x) => `key-${x}`,
      async (x) => {
        running++;
        expect(running).toBe(1);
        order.push(x);
        await new Promise((r) => setTimeout(r, 1));
        running--;
        if (x === 'b') return 'b exists there';
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the API's error body ({ error, message }), as the pages throw it
        if (x === 'c') throw { error: 'forbidden' };
        return null;
      },
      (done) => progress.push(done),
    );
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(progress).toEqual([1, 2, 3, 4]);
    expect([...refused.keys()]).toEqual(['key-b', 'key-c']);
    expect(refused.get('key-b')).toBe('b exists there');
    // A thrown API error body is said in words, as a refusal on its row.
    expect(refused.get('key-c')).toContain('role does not allow');
  });
});
