import { describe, expect, it } from 'vitest';
import { PhaseTimer } from './timings.js';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PhaseTimer', () => {
  it('counts concurrent steps of one phase once (wall time), and sums steps that follow each other', async () => {
    const t = new PhaseTimer();
    await Promise.all([t.time('write', () => wait(60)), t.time('write', () => wait(60)), t.time('write', () => wait(60))]);
    const concurrent = t.spent('write');
    expect(concurrent).toBeGreaterThanOrEqual(55);
    expect(concurrent).toBeLessThan(150); // three overlapping 60 ms steps, not 180 ms
    await t.time('write', () => wait(40));
    expect(t.spent('write')).toBeGreaterThanOrEqual(concurrent + 35);
  });

  it('records a failing step and rethrows; result() has whole ms and a total', async () => {
    const t = new PhaseTimer();
    await expect(
      t.time('createCrds', async () => {
        await wait(20);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    t.sync('schemaCheck', () => 1 + 1);
    const r = t.result();
    expect(r.createCrds).toBeGreaterThanOrEqual(15);
    expect(Number.isInteger(r.createCrds)).toBe(true);
    expect(r.schemaCheck).toBeGreaterThanOrEqual(0);
    expect(r.total).toBeGreaterThanOrEqual(r.createCrds!);
  });
});
