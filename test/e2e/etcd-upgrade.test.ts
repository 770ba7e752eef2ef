/**
 * An upgrade and a downgrade of a Calico on the etcd datastore (issue 31): calico-etcd.yaml of 3.28.1 on a TLS etcd,
 * run by Calico's real programs in etcd mode (etcd-cluster-support.ts), planned to 3.29.7 and back with the target's
 * calico-etcd.yaml. The harm it guards against: a rollout that loses etcd (the release's placeholder endpoints, an
 * emptied certificate Secret) or calico.yaml rolled over an etcd install, and with either every CNI ADD failing.
 * After each change the target release's own programs run on the same etcd (its calico-node start-up writes its
 * version), every pod keeps its address and a new pod gets a free one.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, afterAll, describe, expect, it } from 'vitest';
import { ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { etcdIpamHolders, etcdValues, podOn, waitEtcdPodIp, withCalicoOnEtcd } from './etcd-cluster-support.js';
import { readPlan } from './etcd-migrate-support.js';
import { runCli } from './helpers.js';

const real = withCalicoOnEtcd('etcdu');
const etcdValuesOf = (prefix: string) => etcdValues(real, prefix);
const ipamHolders = () => etcdIpamHolders(real);
const waitPodIp = (name: string) => waitEtcdPodIp(real, name);

/** The calicoVersion calico-node's start-up wrote into ClusterInformation default (the release that started last). */
async function calicoVersionInEtcd(): Promise<string | undefined> {
  const v = (await etcdValuesOf('/calico/resources/v3/projectcalico.org/clusterinformations/default')).values().next().value;
  return v ? (JSON.parse(v) as { spec?: { calicoVersion?: string } }).spec?.calicoVersion : undefined;
}

const USER_CONFIG = `
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: { name: reserved-pool }
spec: { cidr: 10.78.0.0/24, disabled: true, ipipMode: Never, natOutgoing: false, nodeSelector: all() }
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: { name: deny-metadata }
spec: { order: 10, selector: all(), types: [Egress], egress: [{ action: Deny, destination: { nets: [169.254.169.254/32] } }, { action: Allow }] }
`;

const PODS = ['etcdu-web-1', 'etcdu-web-2', 'etcdu-web-3', 'etcdu-web-4'];

describe('plan --to on a calico-etcd.yaml install: the target calico-etcd.yaml on the same etcd, both directions', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-upgrade-'));
  const podIps = new Map<string, string>();
  let secretBefore: Record<string, string> | undefined;
  let endpointsBefore: string | undefined;

  beforeAll(async () => {
    // The target's programs (API server tree for kube-controllers, and the node side) in etcd mode.
    await ensureCalicoProgram('calico', 'v3.29.7');
    await ensureCalicoProgram('node-side', 'v3.29.7');
  }, 60 * 60_000);
  afterAll(async () => {
    for (const name of PODS)
      await real
        .client()
        .delete(K.pod, 'default', name, { gracePeriodSeconds: 0 })
        .catch(() => undefined);
  });

  /** Backup, plan, apply; the plan's and apply's JSON. */
  async function change(
    to: string,
    tag: string,
    extra: string[] = [],
    beforePlan: (bundle: string) => Promise<void> = async () => undefined,
  ): Promise<{ plan: ReturnType<typeof readPlan>; result: { steps: { id: string; summary?: string }[] } }> {
    const bundle = path.join(work, `bundle-${tag}`);
    const b = await runCli(['backup', '--out', bundle, '--allow-unprotected-nodes']);
    expect([0, 3], b.stderr).toContain(b.code);
    await beforePlan(bundle);
    const planFile = path.join(work, `plan-${tag}.json`);
    const p = await runCli(['plan', '--to', to, '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, ...extra]);
    expect(p.code, `${p.stdout}\n${p.stderr}`).toBe(0);
    const r = await runCli(['apply', planFile, '--yes', '-o', 'json', ...extra]);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    return { plan: readPlan(planFile), result: JSON.parse(r.stdout) };
  }

  /** Every pod keeps its address, held by that pod in etcd's IPAM; a new pod gets one no other pod has. */
  async function podsIntact(newPod: string, node: string): Promise<void> {
    const client = real.client();
    for (const [name, ip] of podIps) expect((await client.get<KubeObject>(K.pod, 'default', name)).status?.podIP, name).toBe(ip);
    await client.create(K.pod, podOn(newPod, node));
    const ip = await waitPodIp(newPod);
    expect([...podIps.values()]).not.toContain(ip);
    podIps.set(newPod, ip);
    const held = await ipamHolders();
    for (const [name, a] of podIps) expect(held.get(a), `${name} ${a}`).toBe(name);
    // The same etcd, the user's certificates untouched.
    expect((await client.get<KubeObject>(K.configMap, 'kube-system', 'calico-config')).data?.etcd_endpoints).toBe(endpointsBefore);
    expect((await client.get<KubeObject>(K.secret, 'kube-system', 'calico-etcd-secrets')).data).toEqual(secretBefore);
    // The user's configuration in etcd as it was.
    const pool = JSON.parse((await etcdValuesOf('/calico/resources/v3/projectcalico.org/ippools/reserved-pool')).values().next().value!);
    expect(pool.spec.disabled).toBe(true);
    expect((await etcdValuesOf('/calico/resources/v3/projectcalico.org/globalnetworkpolicies/')).size).toBeGreaterThanOrEqual(1);
  }

  it('runs 3.28.1 with pods and the user configuration; a plan across 3.32 is refused by name', async () => {
    const client = real.client();
    for (const [i, name] of PODS.slice(0, 2).entries()) await client.create(K.pod, podOn(name, real.nodes[i % 2]!));
    for (const name of PODS.slice(0, 2)) podIps.set(name, await waitPodIp(name));
    await real.calicoctl(['apply', '-f', '-'], USER_CONFIG);
    secretBefore = (await client.get<KubeObject>(K.secret, 'kube-system', 'calico-etcd-secrets')).data;
    endpointsBefore = (await client.get<KubeObject>(K.configMap, 'kube-system', 'calico-config')).data?.etcd_endpoints;
    expect(Object.keys(secretBefore ?? {}).sort()).toEqual(['etcd-ca', 'etcd-cert', 'etcd-key']);
    expect(await calicoVersionInEtcd()).toBe('v3.28.1');
    const across = await runCli(['plan', '--to', '3.32.1', '--out', path.join(work, 'refused.json')]);
    expect(across.code, across.stderr).toBe(5);
    expect(across.stderr.split('\n')[0]).toContain('crosses v3.32.0, whose kube-controllers renames default-tier policies in etcd');
  });

  it('upgrade to 3.29.7: its calico-etcd.yaml with the etcd settings carried, rolled out, the data verified in etcd', async () => {
    // Calico's etcd named by --etcd-* (as for certificates mounted from the host): a file that is not there stops the
    // plan with its name, so the flags are what plan reads; with the real files plan and apply go through.
    const e = real.etcd();
    const flags = ['--etcd-endpoints', e.endpoint, '--etcd-ca', e.caFile, '--etcd-cert', e.certFile, '--etcd-key', e.keyFile];
    const { plan, result } = await change('3.29.7', 'up', flags, async (bundle) => {
      const missing = await runCli([
        'plan',
        '--to',
        '3.29.7',
        '--bundle',
        bundle,
        '--etcd-ca',
        path.join(work, 'no-ca.pem'),
        '--out',
        path.join(work, 'no.json'),
      ]);
      expect(missing.code, missing.stderr).not.toBe(0);
      expect(missing.stderr).toContain('no-ca.pem');
    });
    expect(plan.datastore).toBe('etcd');
    expect(plan.direction).toBe('upgrade');
    expect(plan.steps.map((s) => s.id)).toEqual(['preflight', 'apply-calico-manifest', 'wait-rollout', 'verify-data']);
    const edits = plan.findings.find((f) => f.id === 'calico-manifest-edits');
    expect(edits?.details.join('\n')).toContain('calico-config etcd_endpoints=');
    expect(result.steps.find((s) => s.id === 'apply-calico-manifest')?.summary).toContain('Secret calico-etcd-secrets left as it is');
    expect(result.steps.find((s) => s.id === 'verify-data')?.summary).toContain('read back from etcd');
    const ds = await real.client().get<KubeObject>(K.daemonSet, 'kube-system', 'calico-node');
    expect(ds.spec.template.spec.containers[0].image).toMatch(/:v3\.29\.7$/);
    // 3.29.7's own calico-node start-up ran on the same etcd.
    await real
      .client()
      .waitFor('3.29.7 calico-node start-up to write its version', async () => ((await calicoVersionInEtcd()) === 'v3.29.7' ? true : undefined), {
        timeoutMs: 180_000,
        intervalMs: 1000,
      });
    await podsIntact(PODS[2]!, real.nodes[0]!);
  });

  it('downgrade back to 3.28.1: a pool deleted during the change stops verify-data; restore puts it back and --resume finishes', async () => {
    const bundle = path.join(work, 'bundle-down');
    const b = await runCli(['backup', '--out', bundle, '--allow-unprotected-nodes']);
    expect([0, 3], b.stderr).toContain(b.code);
    const planFile = path.join(work, 'plan-down.json');
    const p = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile]);
    expect(p.code, `${p.stdout}\n${p.stderr}`).toBe(0);
    const down = readPlan(planFile);
    expect(down.direction).toBe('downgrade');
    // 3.29.7's programs wrote the Tiers default and adminnetworkpolicy into etcd; 3.28.1 has no Tier kind: said, kept.
    const lacks = down.findings.find((f) => f.id === 'etcd-fields-target-lacks');
    expect(lacks?.details).toContain('Tier/default: Calico v3.28.1 has no Tier');
    expect(lacks?.action).toBe('keep');
    // Someone deletes the user's pool after the plan was made: the change must not call that success.
    await real.calicoctl(['delete', 'ippool', 'reserved-pool']);
    const r = await runCli(['apply', planFile, '--yes', '-o', 'json']);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(3);
    const failed = JSON.parse(r.stdout) as { failed: { step: string; error: string }; restoreCommands: string[] };
    expect(failed.failed.step).toBe('verify-data');
    expect(failed.failed.error).toContain('IPPool reserved-pool missing in etcd');
    expect(failed.restoreCommands[0]).toBe(`cni-rewind restore ${bundle} --resources`);
    const restored = await runCli(['restore', bundle, '--resources', '--yes']);
    expect(restored.code, `${restored.stdout}\n${restored.stderr}`).toBe(0);
    const resumed = await runCli(['apply', planFile, '--resume', '--yes', '-o', 'json']);
    expect(resumed.code, `${resumed.stdout}\n${resumed.stderr}`).toBe(0);
    await real
      .client()
      .waitFor('3.28.1 calico-node start-up to write its version', async () => ((await calicoVersionInEtcd()) === 'v3.28.1' ? true : undefined), {
        timeoutMs: 180_000,
        intervalMs: 1000,
      });
    await podsIntact(PODS[3]!, real.nodes[1]!);
    const status = await runCli(['status']);
    expect(status.stdout).toMatch(/3\.28\.1/);
    expect(status.stdout).toContain('Datastore   etcd');
  });
});
