/**
 * The calico#9100 night as cni-rewind turns it into a routine, with the real programs: Calico 3.27.4 under the real
 * v1.32.10 operator, default-ipv4-ippool disabled and still listed in the Installation. `doctor --target 3.28.1`
 * names the trap, `plan --to 3.28.1` carries the fix (the entry stops allocations with nodeSelector "!all()"),
 * `apply` upgrades, and the real v1.34.3 operator, reconciling through the real Calico API server, leaves the pool
 * non-allocating through ten minutes of reconciles (the Installation touched every minute to force one).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { calicoType, operatorType, runCli } from './helpers.js';
import { doctorExportPlan, installIncident327, ippoolsWide, nonAllocating, waitOperator, watchPoolNonAllocating, withRealCalico } from './calico-support.js';

const POOL = calicoType('ippools', 'IPPool');
const INSTALLATION = operatorType('installations', 'Installation');
/** How long the pool is watched under the target operator: the issue's ten minutes of reconciles. */
const WATCH_MS = 10 * 60_000;
let client: KubeClient;
let cluster: LocalCluster;
let dir: string;

describe('calico#9100 avoided: doctor, plan and apply with the real tigera operators and Calico API server', () => {
  const real = withRealCalico('c9p');
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-9100-plan-'));
  });

  it(
    'doctor names the trap, the plan stops the pool on its entry, and the v1.34 operator leaves it non-allocating for ten minutes',
    async () => {
      await installIncident327(client, cluster);
      expect((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled).toBe(true);

      const { plan, planFile } = await doctorExportPlan(dir, '3.28.1');
      expect(plan.transforms.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' });
      expect(plan.preflight.find((c: any) => c.name === 'target-operator-pools')).toMatchObject({ ok: true });

      const started = Date.now();
      const a = await runCli(['apply', planFile, '--yes', '-o', 'json']);
      console.log(
        `apply: exit ${a.code} in ${((Date.now() - started) / 1000).toFixed(1)} s; steps: ${(() => {
          try {
            return JSON.parse(a.stdout)
              .steps.map((s: any) => `${s.id} ${s.status}`)
              .join(', ');
          } catch {
            return a.stdout.slice(0, 400);
          }
        })()}`,
      );
      expect(a.code, a.stderr + a.stdout).toBe(0);
      const st = await waitOperator(cluster, 'v1.34.3');
      expect(st.operator?.tag).toBe('v1.34.3');
      const inst = await client.get(INSTALLATION, undefined, 'default');
      expect(inst.spec.calicoNetwork.ipPools.find((e: any) => e.cidr === '192.168.0.0/16')?.nodeSelector).toBe('!all()');

      // Ten minutes under the real target operator, sampled every second, with a reconcile forced every minute.
      const { seen, touches } = await watchPoolNonAllocating(client, 'default-ipv4-ippool', { durationMs: WATCH_MS, touchEveryMs: 60_000, since: started });
      console.log(`default-ipv4-ippool over ${WATCH_MS / 60_000} min (${touches} forced reconciles): ${[...seen].map(([k, n]) => `${k} x${n}`).join(', ')}`);
      expect(touches).toBeGreaterThanOrEqual(9);
      // calicoctl (libcalico-go, what IPAM reads) agrees; the new pool is untouched and allocating.
      const wide = await ippoolsWide();
      expect(wide['new-ipv4-pool']?.DISABLED).toBe('false');
      expect(nonAllocating(await client.get(POOL, undefined, 'default-ipv4-ippool'))).toBe(true);
      expect(
        wide['default-ipv4-ippool']?.DISABLED === 'true' || wide['default-ipv4-ippool']?.SELECTOR === '!all()',
        JSON.stringify(wide['default-ipv4-ippool']),
      ).toBe(true);
    },
    30 * 60_000,
  );
});
