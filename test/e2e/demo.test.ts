import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { parseWideTable } from '../../src/dev/local-cluster/calico-tools.js';
import { packageRoot } from '../../src/core/package-root.js';
import { stateRoot } from '../../src/dev/local-cluster/paths.js';
import { parseIpamCheck } from './ipam-support.js';

/**
 * `cni-rewind demo` as a user runs it: its own control plane (instance "demo", on other ports than the e2e
 * cluster) with Calico's real programs (the tigera operators v1.32.10 and v1.34.3, the Calico API server,
 * kube-controllers), every step of the story with exit 0, and nothing left running afterwards.
 */
const PORT_BASE = process.env.CNI_REWIND_DEMO_PORT_BASE ?? '18443';

/** The lines the demo printed after `marker` up to the next step, without the demo's indentation. */
function section(out: string, marker: string): string {
  const start = out.indexOf(marker);
  if (start < 0) return '';
  const rest = out.slice(start + marker.length);
  const end = rest.indexOf('── Step');
  return (end < 0 ? rest : rest.slice(0, end))
    .split('\n')
    .map((l) => l.replace(/^ {3}/, ''))
    .join('\n');
}

describe('cni-rewind demo', () => {
  it('plays the incident and its safe resolution with the real Calico programs, then leaves nothing running', async () => {
    const demo = new LocalCluster({ name: 'demo', portBase: Number(PORT_BASE) });
    await demo.down(); // a crashed earlier run must not be mistaken for this one
    const pids: number[] = [];
    const operators = new Map<string, Set<number>>(); // operator tag -> pids the supervisor ran it as
    const watcher = setInterval(() => {
      const calico = demo.calicoStatus();
      const seen = [
        ...Object.values(demo.readState()?.pids ?? {}),
        ...[calico?.operator?.pid, calico?.apiserver?.pid, calico?.kubeControllers?.pid].filter((p): p is number => !!p),
      ];
      for (const p of seen) if (!pids.includes(p)) pids.push(p);
      if (calico?.operator?.pid) operators.set(calico.operator.tag, new Set([...(operators.get(calico.operator.tag) ?? []), calico.operator.pid]));
    }, 200);
    const res = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        process.execPath,
        [path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), 'demo'],
        { env: { ...process.env, NO_COLOR: '1', CNI_REWIND_DEMO_PORT_BASE: PORT_BASE }, timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as any).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
    clearInterval(watcher);
    // The whole story stays readable after the run (CI keeps only the tail of the test output).
    mkdirSync(stateRoot(), { recursive: true });
    writeFileSync(path.join(stateRoot(), 'demo-test-output.log'), res.out);
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
    // The real v1.34 operator drops `disabled` from the pool it rewrites (the v3 view has no false to show).
    expect(res.out).toMatch(/IPPool\/default-ipv4-ippool: spec\.disabled: bundle true \/ cluster (false|undefined)/);
    expect(res.out).toContain('no differences');
    // Restore exits 3 only for the pods the operator rolled after the backup (kwok addressed them, no CNI plugin
    // runs): each is named to be restarted; nothing of the demo's own workload, and no drift.
    const untracked = [...res.out.matchAll(/^\s+Pod\/([^/]+)\/(\S+) \(\S+\): in use, but IPAM holds no allocation/gm)].map((m) => m[1]);
    expect(
      untracked.filter((ns) => ns !== 'calico-system' && ns !== 'calico-apiserver'),
      res.out.slice(-4000),
    ).toEqual([]);
    expect(res.out).not.toContain('changed after they were written');
    expect(res.out).toContain('demo-node-1 disk holds the data of backup time again');

    // The re-enable was done by the real v1.34.3 operator: the supervisor ran both operators' binaries (3.27.4's
    // v1.32.10 before the upgrade, and again after apply), and the pool carries the operator's marking where
    // libcalico-go keeps v3 labels; calicoctl showed it enabled.
    expect([...operators.keys()].sort()).toEqual(['v1.32.10', 'v1.34.3']);
    const reEnabledBy = /operator v1\.34\.3 \(pid (\d+)\) re-enabled default-ipv4-ippool/.exec(res.out);
    expect(reEnabledBy, res.out.slice(0, 6000)).not.toBeNull();
    expect([...operators.get('v1.34.3')!]).toContain(Number(reEnabledBy![1]));
    expect(res.out).toContain("the pool's projectcalico.org/v3 labels: app.kubernetes.io/managed-by=tigera-operator");
    const wide = parseWideTable(section(res.out, '$ calicoctl get ippool -o wide').split('pools now:')[0]!);
    expect(wide['default-ipv4-ippool']?.DISABLED).toBe('false');
    expect(wide['new-pool']?.DISABLED).toBe('false');

    // Calico's own IPAM check after the restore: nothing allocated twice, leaked or without its handle. The only
    // addresses without an allocation belong to the pods the operator rendered: kwok gives pods addresses and no
    // CNI plugin runs here, so those never had one. The demo's workloads, whose IPAM the backup held, are not listed.
    const check = parseIpamCheck(section(res.out, '$ calicoctl ipam check --show-problem-ips'));
    expect(
      { leaked: check.leaked, notInPools: check.notInPools, handles: check.handlesWithoutIps, missing: check.missingHandles, owners: check.multipleOwners },
      check.text,
    ).toEqual({ leaked: 0, notInPools: 0, handles: 0, missing: 0, owners: 0 });
    expect(check.noAllocation).toBe(check.noAllocationOwners.length);
    expect(
      check.noAllocationOwners.filter((o) => !/^Workload\(calico-(system|apiserver)\//.test(o)),
      check.text,
    ).toEqual([]);
    expect(check.problems).toBe(check.noAllocation);

    expect(pids.length).toBeGreaterThanOrEqual(8);
    expect(pids.filter(alive)).toEqual([]);
    expect(await demo.isUp()).toBe(false);
  }, 1_800_000);
});
