import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { packageRoot } from '../../src/core/package-root.js';

/**
 * `cni-rewind demo` as a user runs it: its own control plane (instance "demo", on other ports than the e2e
 * cluster), every step of the story with exit 0, and nothing left running afterwards.
 */
describe('cni-rewind demo', () => {
  it('plays the incident and its safe resolution, then leaves nothing running', async () => {
    const demo = new LocalCluster({ name: 'demo', portBase: 18443 });
    await demo.down(); // a crashed earlier run must not be mistaken for this one
    const pids: number[] = [];
    const watcher = setInterval(() => {
      for (const p of Object.values(demo.readState()?.pids ?? {})) if (!pids.includes(p)) pids.push(p);
    }, 200);
    const res = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        process.execPath,
        [path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), 'demo'],
        { env: { ...process.env, NO_COLOR: '1', CNI_REWIND_DEMO_PORT_BASE: '18443' }, timeout: 900_000, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as any).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
    clearInterval(watcher);
    expect(res.code, res.out.slice(-3000)).toBe(0);
    for (const step of [
      'Backup',
      'Doctor before the upgrade',
      'Plan the downgrade to 3.27.4',
      'Apply the plan',
      'Restore the resources',
      'Restore one node from its disk snapshots',
    ]) {
      expect(res.out).toContain(step);
    }
    expect(res.out).toMatch(/IPPool\/default-ipv4-ippool: spec\.disabled: bundle true \/ cluster false/);
    expect(res.out).toContain('no differences');
    expect(res.out).toContain('demo-node-1 disk holds the data of backup time again');
    expect(pids.length).toBeGreaterThanOrEqual(5);
    expect(pids.filter(alive)).toEqual([]);
    expect(await demo.isUp()).toBe(false);
  });
});
