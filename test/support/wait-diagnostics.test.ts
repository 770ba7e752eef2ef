import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { recentLogTails } from './failure-diagnostics.js';
import { until } from './until.js';

describe('until', () => {
  it('returns once the condition holds', async () => {
    let n = 0;
    await until('three polls', () => ++n >= 3, { timeoutMs: 5_000, intervalMs: 1 });
    expect(n).toBe(3);
  });

  it('names the wait, its length and what held it when the deadline passes', async () => {
    const err = await until('the pool to go', () => false, { timeoutMs: 30, intervalMs: 5, state: () => 'pool default-ipv4-ippool present' }).catch(
      (e: Error) => e,
    );
    expect((err as Error).message).toMatch(/^timed out after \d+\.\d s waiting for the pool to go\npool default-ipv4-ippool present$/);
  });

  it('still reports the timeout when the state cannot be read', async () => {
    const state = () => Promise.reject(new Error('API server down'));
    const err = await until('x', () => false, { timeoutMs: 10, intervalMs: 5, state }).catch((e: Error) => e);
    expect((err as Error).message).toContain('(state unreadable: API server down)');
  });
});

describe('recentLogTails', () => {
  it('gives the end of the logs written since the test began, newest first, and skips older ones', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-tails-'));
    const since = Date.now() - 60_000;
    writeFileSync(path.join(dir, 'old.log'), 'stale\n');
    utimesSync(path.join(dir, 'old.log'), new Date(since - 10_000), new Date(since - 10_000));
    writeFileSync(path.join(dir, 'tigera-operator.log'), Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n'));
    utimesSync(path.join(dir, 'tigera-operator.log'), new Date(since + 1_000), new Date(since + 1_000));
    writeFileSync(path.join(dir, 'kube-controllers.log'), `${'x'.repeat(300)}\n`);
    writeFileSync(path.join(dir, 'state.json'), '{}');
    const out = recentLogTails(dir, since, 3);
    expect(out).toEqual(['kube-controllers.log (end):', `  ${'x'.repeat(240)}...`, 'tigera-operator.log (end):', '  line 17', '  line 18', '  line 19']);
  });

  it('is empty for a directory that does not exist', () => {
    expect(recentLogTails('/nonexistent/cnr', 0)).toEqual([]);
  });
});
