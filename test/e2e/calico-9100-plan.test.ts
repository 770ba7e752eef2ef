/**
 * The calico#9100 night as cni-rewind turns it into a routine, with the real programs: Calico 3.27.4 under the real
 * v1.32.10 operator, default-ipv4-ippool disabled and still listed in the Installation. `doctor --target 3.28.1`
 * names the trap, `plan --to 3.28.1` carries the fix (the pool has no operator label, so its entry is removed: an
 * entry stopped with nodeSelector "!all()" would no longer equal the pool, and v1.34.3 would refuse it on every
 * reconcile with "Cannot update an IP pool not owned by the operator"), `apply` upgrades, and the real v1.34.3
 * operator, reconciling through the real Calico API server, leaves the pool `disabled: true` and its log free of
 * that error through ten minutes of reconciles (the Installation touched every minute to force one).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { calicoType, operatorType, runCli } from './helpers.js';
import {
  doctorExportPlan,
  installIncident327,
  ippoolsWide,
  operatorLog,
  waitOperator,
  waitTigeraStatusAvailable,
  watchPoolNonAllocating,
  withRealCalico,
} from './calico-support.js';
import { NOT_OWNED } from './stopped-pool-support.js';

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
    'doctor names the trap, the plan unlists the pool, and the v1.34 operator leaves it disabled and raises no error for ten minutes',
    async () => {
      await installIncident327(client, cluster);
      expect((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled).toBe(true);

      const { plan, planFile } = await doctorExportPlan(dir, '3.28.1', 'remove entry 0 (cidr 192.168.0.0/16)');
      expect(plan.transforms.installation.stopAllocations).toBeUndefined();
      expect(plan.transforms.installation.unlistPools).toEqual({ cidrs: ['192.168.0.0/16'] });
      expect(plan.preflight.find((c: any) => c.name === 'target-operator-pools')).toMatchObject({ ok: true });

      const logBefore = operatorLog(cluster).length;
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
      expect(inst.spec.calicoNetwork.ipPools ?? []).toEqual([]);

      // Ten minutes under the real target operator, sampled every second, with a reconcile forced every minute.
      const { seen, touches } = await watchPoolNonAllocating(client, 'default-ipv4-ippool', { durationMs: WATCH_MS, touchEveryMs: 60_000, since: started });
      const log = operatorLog(cluster).slice(logBefore);
      const errors = log.filter((l) => /"level":"error"|\tERROR\t/.test(l) || l.includes(NOT_OWNED));
      console.log(
        `default-ipv4-ippool over ${WATCH_MS / 60_000} min (${touches} forced reconciles): ${[...seen].map(([k, n]) => `${k} x${n}`).join(', ')}; ` +
          `operator lines since apply: ${log.length}, errors: ${errors.length}${errors.length ? `\n${errors.slice(0, 5).join('\n')}` : ''}`,
      );
      expect(touches).toBeGreaterThanOrEqual(9);
      // Never taken over: disabled: true in every sample (not merely non-allocating), and no refusal in the log.
      expect([...seen.keys()].filter((k) => JSON.parse(k).disabled !== true)).toEqual([]);
      expect(log.filter((l) => l.includes(NOT_OWNED))).toEqual([]);
      expect(await waitTigeraStatusAvailable(client, 'ippools', 60_000)).toBeDefined();
      const pool = await client.get(POOL, undefined, 'default-ipv4-ippool');
      expect(pool.metadata.labels?.['app.kubernetes.io/managed-by']).toBeUndefined();
      // calicoctl (libcalico-go, what IPAM reads) agrees; the new pool is untouched and allocating.
      const wide = await ippoolsWide();
      expect(wide['new-ipv4-pool']?.DISABLED).toBe('false');
      expect(wide['default-ipv4-ippool']?.DISABLED, JSON.stringify(wide['default-ipv4-ippool'])).toBe('true');
    },
    30 * 60_000,
  );
});
