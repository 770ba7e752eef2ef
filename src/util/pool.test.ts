import { describe, expect, it } from 'vitest';
import { pool } from './pool.js';

const tick = () => new Promise((r) => setTimeout(r, 1));

describe('pool', () => {
  it('runs every item once, with its index, never more than `limit` at a time', async () => {
    const items = Array.from({ length: 25 }, (_, i) => `item-${i}`);
    const seen: string[] = [];
    let inFlight = 0;
    let most = 0;
    await pool(items, 4, async (item, i) => {
      expect(item).toBe(`item-${i}`);
      inFlight++;
      most = Math.max(most, inFlight);
      await tick();
      seen.push(item);
      inFlight--;
    });
    expect([...seen].sort()).toEqual([...items].sort());
    expect(most).toBe(4);
  });

  it('starts items in order and handles fewer items than the limit, and none', async () => {
    const started: number[] = [];
    await pool([10, 20], 8, async (n) => void started.push(n));
    expect(started).toEqual([10, 20]);
    await expect(pool([], 3, async () => {})).resolves.toBeUndefined();
  });

  it('rejects with the first error', async () => {
    await expect(
      pool([1, 2, 3], 2, async (n) => {
        if (n === 2) throw new Error('boom 2');
      }),
    ).rejects.toThrow('boom 2');
  });
});
