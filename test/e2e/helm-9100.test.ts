/**
 * The project's seed incident (calico#9100) on a Helm install (issue 31, schema transforms of Helm values): Calico
 * 3.27.4 installed by the real helm from its tigera-operator chart (`cluster up --calico 3.27.4 --install helm`, the
 * chart's values listing the default pool in `installation.calicoNetwork.ipPools`, as the harness's custom resources
 * say), a second pool of the user's, and default-ipv4-ippool disabled on the IPPool object with calicoctl, the way
 * the issue's user did it. `plan --to 3.28.1` must carry the fix into the values (the pool has no operator label, so
 * its entry is removed: stopped with nodeSelector "!all()", the entry would no longer equal the pool and v1.34.3 would
 * refuse it on every reconcile) and `apply` must run `helm upgrade` with them, so the Installation Helm renders is
 * the plan's and `helm get values` says so; the real v1.34.3 operator then leaves the pool disabled, without a
 * "Cannot update an IP pool not owned by the operator", through forced reconciles, new pods get the user's other
 * pool, and every pod's address stays held in IPAM.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { helmEnv } from '../../src/dev/local-cluster/calico-helm.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { buildHelm, helm, tigeraOperatorChart } from '../support/helm.js';
import { HELM_NS, HELM_RELEASE, cleanUpHelmCalico, clusterCli, helmHistory, helmValues } from './helm-support.js';
import { calicoctl, operatorLog, waitOperator, watchPoolNonAllocating } from './calico-support.js';
import { calicoType, explain, kubeconfig, operatorType, runCli, testClient } from './helpers.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { NOT_OWNED } from './stopped-pool-support.js';

const NS = HELM_NS;
const RELEASE = HELM_RELEASE;
const STOPPED = 'default-ipv4-ippool';
const POOL = calicoType('ippools', 'IPPool');
const INSTALLATION = operatorType('installations', 'Installation');
/** How long the pool is watched under the target operator, a reconcile forced every 20 s (the brief's "at least 60 s"). */
const WATCH_MS = 90_000;
/** A pod bound to one of the harness's kwok nodes: the node side gives it its address through the CNI plugin. */
const podOn = (name: string, node: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { nodeName: node, containers: [{ name: 'web', image: 'nginx' }] },
});

describe('calico#9100 on a Helm install: plan --to 3.28.1 carries the stopped pool into the values helm upgrade gets', () => {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient;
  let helmBin: string;
  let home: string;
  let dir: string;
  let chart328: string;
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args);
  const cli = (args: string[]) => runCli(args, { env: helmEnv(kubeconfig(), home) as Record<string, string> });
  const history = () => helmHistory(h);
  const values = () => helmValues(h);
  const podIp = (name: string, pool: RegExp) =>
    client.waitFor(
      `${name} to get its address from the CNI plugin`,
      async () => {
        const ip = (await client.getOrUndefined<KubeObject>(K.pod, 'default', name))?.status?.podIP as string | undefined;
        return ip && pool.test(ip) ? ip : undefined;
      },
      {
        timeoutMs: 180_000,
        intervalMs: 500,
        state: async () => JSON.stringify((await client.getOrUndefined<KubeObject>(K.pod, 'default', name))?.status ?? null),
      },
    );

  const cleanUp = async () => {
    // The pods first, while the node side runs their DELs.
    for (const p of ['h9100-kept', 'h9100-new']) await client.delete(K.pod, 'default', p).catch(() => undefined);
    await cleanUpHelmCalico(client, cluster, h, helmBin);
  };
  beforeAll(async () => {
    client = await testClient();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-9100-'));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-9100-out-'));
    helmBin = await buildHelm();
    chart328 = await tigeraOperatorChart('v3.28.1');
    // The target's programs, which the supervisor runs from what helm upgrade writes: its operator, and its
    // calico-node start-up and CNI plugin, which address the pods after the upgrade.
    await ensureCalicoProgram('operator', 'v1.34.3');
    await ensureCalicoProgram('node-side', 'v3.28.1');
    await cleanUp();
    const up = await clusterCli(['up', '--calico', '3.27.4', '--install', 'helm']);
    expect(up.code, up.stderr.slice(-3000)).toBe(0);
    // A pod with an address of the default pool, then the user's migration: a second pool, the default one disabled.
    await client.create(K.pod, podOn('h9100-kept', 'local-node-1'));
    await podIp('h9100-kept', /^192\.168\./);
    const spec = { cidr: '10.100.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' };
    await calicoctl(['create', '-f', '-'], JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: 'new-ipv4-pool' }, spec }));
    await calicoctl(['patch', 'ippool', STOPPED, '-p', '{"spec":{"disabled":true}}']);
  }, 3_600_000);
  afterAll(async () => {
    if (client) await cleanUp();
    client?.close();
    for (const d of [home, dir]) if (d) fs.rmSync(d, { recursive: true, force: true });
  }, 600_000);

  it('plan names the values edit, apply runs helm upgrade with it, and v1.34.3 leaves the pool disabled and alone', async () => {
    expect(await history()).toEqual([[1, 'deployed', 'tigera-operator-v3.27.4']]);
    const valuesBefore = await values();
    const entriesBefore = valuesBefore.installation.calicoNetwork.ipPools;
    expect(entriesBefore.map((e: any) => [e.cidr, e.nodeSelector])).toEqual([['192.168.0.0/16', 'all()']]);
    expect((await client.get(POOL, undefined, STOPPED)).spec.disabled).toBe(true);
    const keptIp = (await client.get(K.pod, 'default', 'h9100-kept')).status.podIP;
    await expectPodAddressesHeld(client, 2);

    const bundle = path.join(dir, 'bundle');
    const exp = await cli(['export', '--out', bundle]);
    expect(exp.code, explain(exp)).toBe(0);
    const planFile = path.join(dir, 'plan.yaml');
    const base = ['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--helm', helmBin, '--helm-chart', chart328];
    const plan = await cli([...base, '--out', planFile, '-o', 'json']);
    expect(plan.code, explain(plan)).toBe(0);
    const planned = JSON.parse(plan.stdout);
    expect(planned.transforms.installation.stopAllocations).toBeUndefined();
    expect(planned.transforms.installation.unlistPools).toEqual({ cidrs: ['192.168.0.0/16'] });
    const edit = 'installation.calicoNetwork.ipPools[cidr 192.168.0.0/16]: entry removed';
    expect(planned.helm).toMatchObject({ release: RELEASE, namespace: NS, currentRevision: 1, action: 'upgrade', chart: chart328, valuesEdits: [edit] });
    expect(planned.steps.map((s: { id: string }) => s.id)).toEqual(['preflight', 'apply-crds', 'helm-upgrade', 'wait-rollout', 'verify-data']);
    const human = await cli(base);
    expect(human.code, explain(human)).toBe(0);
    expect(human.stdout).toContain(`helm upgrade with ${chart328} and the release's values, edited: ${edit}\n`);

    const started = Date.now();
    const logBefore = operatorLog(cluster).length;
    const apply = await cli(['apply', planFile, '--yes', '--helm', helmBin, '--helm-chart', chart328]);
    console.log(`apply (helm upgrade 3.27.4 -> 3.28.1, values edited) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(apply.code, explain(apply)).toBe(0);
    expect(apply.stdout + apply.stderr).toContain('with installation.calicoNetwork.ipPools edited (192.168.0.0/16: entry removed)');

    // Helm tells the truth: a new deployed revision of the 3.28.1 chart, whose values list no pool any more and
    // otherwise the user's values as they were.
    expect(await history()).toEqual([
      [1, 'superseded', 'tigera-operator-v3.27.4'],
      [2, 'deployed', 'tigera-operator-v3.28.1'],
    ]);
    const valuesAfter = await values();
    expect(valuesAfter).toEqual({
      ...valuesBefore,
      installation: {
        ...valuesBefore.installation,
        calicoNetwork: { ...valuesBefore.installation.calicoNetwork, ipPools: [] },
      },
    });
    await waitOperator(cluster, 'v1.34.3');
    expect((await client.get(K.deployment, NS, 'tigera-operator')).spec.template.spec.containers[0].image).toBe('quay.io/tigera/operator:v1.34.3');
    const inst = await client.get(INSTALLATION, undefined, 'default');
    expect(inst.spec.calicoNetwork.ipPools ?? []).toEqual([]);

    // Under the real target operator, reconciles forced by touching the Installation: the pool stays as the user set it.
    const watched = await watchPoolNonAllocating(client, STOPPED, { durationMs: WATCH_MS, touchEveryMs: 20_000, since: started });
    const log = operatorLog(cluster).slice(logBefore);
    const notOwned = log.filter((l) => l.includes(NOT_OWNED)).length;
    console.log(
      `${STOPPED} over ${WATCH_MS / 1000} s (${watched.touches} forced reconciles): ${[...watched.seen].map(([k, n]) => `${k} x${n}`).join(', ')}; ` +
        `operator lines since apply: ${log.length}, "${NOT_OWNED}": ${notOwned}`,
    );
    expect(watched.touches).toBeGreaterThanOrEqual(3);
    expect([...watched.seen.keys()].filter((k) => JSON.parse(k).disabled !== true)).toEqual([]);
    expect(notOwned).toBe(0);
    expect((await client.get(POOL, undefined, STOPPED)).spec.disabled).toBe(true);

    // IPAM's own answer: a new pod gets the user's other pool, the kept pod keeps its address, every address is held.
    await client.create(K.pod, podOn('h9100-new', 'local-node-2'));
    await podIp('h9100-new', /^10\.100\./);
    expect((await client.get(K.pod, 'default', 'h9100-kept')).status.podIP).toBe(keptIp);
    await expectPodAddressesHeld(client, 3);
  }, 1_800_000);
});
