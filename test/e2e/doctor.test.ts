/**
 * doctor against the real control plane: a healthy population (operator 3.28.1, pool + IPAM matching the pods kwok
 * runs), the problems the issue names (labelled pool not listed, handle of a deleted pod, block of a deleted node),
 * the #9100 incident, the same checks offline on a bundle, --target, and bad input.
 * The operator here is the kwok-faked Deployment, not Calico's real programs, because what doctor must find are
 * states the real ones do not hold still: the v1.34 operator deletes an owned pool missing from the Installation
 * (pool_controller.go) and recomputes TigeraStatus every 5 s, and IPAM that agrees with the pods has to be written by
 * hand, since kwok gives pods their addresses itself (the IPAM driver's allocations have no Pod). The real operators'
 * view of the #9100 trap is tested in calico-9100-plan.test.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes, waitNodeReady } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, deleteNodes, operatorType, resetCalico, runCli, testClient } from './helpers.js';
import {
  NS,
  ipPool,
  ipamBlock,
  ipamHandle,
  blockAffinity,
  clusterInfo,
  entry,
  poolFor,
  Alloc,
  writeIpam,
  setInstallation,
  runningPods,
  doctor,
} from './doctor-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

describe('doctor on a real cluster', () => {
  let client: KubeClient;
  const allocs: Alloc[] = [];

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await client.delete(K.namespace, undefined, NS);
    await client.waitFor(`namespace ${NS} gone`, async () => ((await client.getOrUndefined(K.namespace, undefined, NS)) ? undefined : true), {
      timeoutMs: 120_000,
    });
    await deleteNodes(client, 'doc-');
    await createFakeNodes(client, [{ name: 'doc-1' }, { name: 'doc-2' }]);

    // Calico 3.28.1 as the operator installs it: CRDs + operator (kwok runs its pod), calico-node, ClusterInformation.
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'calico-system' } });
    await client.apply(K.daemonSet, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'calico-node', namespace: 'calico-system' },
      spec: {
        selector: { matchLabels: { 'k8s-app': 'calico-node' } },
        template: {
          metadata: { labels: { 'k8s-app': 'calico-node' } },
          spec: {
            hostNetwork: true,
            nodeSelector: { type: 'kwok' },
            tolerations: [{ operator: 'Exists' }],
            containers: [{ name: 'calico-node', image: 'docker.io/calico/node:v3.28.1' }],
          },
        },
      },
    });
    await client.apply(clusterInfo, {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'ClusterInformation',
      metadata: { name: 'default' },
      spec: { calicoVersion: 'v3.28.1', datastoreReady: true, clusterType: 'k8s,bgp,operator' },
    });
    await client.waitFor(
      'tigera-operator and calico-node ready',
      async () => {
        const d = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
        const ds = await client.get(K.daemonSet, 'calico-system', 'calico-node');
        const nodes = (await client.listAll(K.node)).filter((n) => n.metadata.labels?.type === 'kwok').length;
        return d.status?.readyReplicas === 1 && ds.status?.numberReady === nodes && nodes > 0 ? true : undefined;
      },
      { timeoutMs: 120_000 },
    );

    // Workloads: kwok gives pod IPs from 10.244.0.0/16; the pool and IPAM say the same.
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await client.apply(K.deployment, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: NS },
      spec: {
        replicas: 4,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { nodeSelector: { type: 'kwok' }, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'web', image: 'nginx' }] },
        },
      },
    });
    const pods = await runningPods(client, 'app=web', 4);
    for (const p of pods)
      allocs.push({ ip: p.status!.podIP, node: p.spec!.nodeName, pod: p.metadata.name, handle: `k8s-pod-network.${p.metadata.uid!.replace(/-/g, '')}` });
    await setInstallation(client, [entry('kwok-ipv4-ippool', '10.244.0.0/16')]);
    await client.apply(ipPool, poolFor('kwok-ipv4-ippool', '10.244.0.0/16'));
    await writeIpam(client, allocs);
  });

  afterAll(async () => {
    await client.delete(K.namespace, undefined, NS);
    await deleteNodes(client, 'doc-');
    client.close();
  });

  it('a healthy population: exit 0 and no findings', async () => {
    const r = await doctor();
    expect(r.report.findings, r.stdout).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.report.calico).toMatchObject({ installType: 'operator', version: 'v3.28.1' });
    expect(r.report.notes).toEqual([]);
    const table = await runCli(['doctor']);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain('No problems found.');
    // The IPAM written by hand agrees with the pods by an independent reading too, so "healthy" is judged on a
    // healthy state: each web pod's address (in the pool) is allocated, none twice.
    await expectPodAddressesHeld(client, allocs.length);
  });

  it('reports a labelled pool missing from the Installation, a handle whose pod is gone and a block of a deleted node', async () => {
    // A pool the operator labelled earlier, no longer listed in the Installation.
    await client.apply(ipPool, poolFor('legacy-pool', '10.77.0.0/16'));
    // A pod that got an address, then went away: its IPAM handle and allocation stay behind.
    await client.apply(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'ghost', namespace: NS, labels: { app: 'ghost' } },
      spec: { nodeSelector: { type: 'kwok' }, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: 'busybox' }] },
    });
    const [ghost] = await runningPods(client, 'app=ghost', 1);
    const ghostHandle = `k8s-pod-network.${ghost!.metadata.uid!.replace(/-/g, '')}`;
    await writeIpam(client, [...allocs, { ip: ghost!.status!.podIP, node: ghost!.spec!.nodeName, pod: 'ghost', handle: ghostHandle }]);
    await client.delete(K.pod, NS, 'ghost', { gracePeriodSeconds: 0 });
    await client.waitFor('pod ghost deleted', async () => ((await client.getOrUndefined(K.pod, NS, 'ghost')) ? undefined : true), { timeoutMs: 60_000 });
    // A node that had a block, then was deleted.
    await createFakeNodes(client, [{ name: 'doc-gone', ipIndex: 9 }]);
    await waitNodeReady(client, 'doc-gone');
    await writeIpam(client, [{ ip: '10.99.0.0', node: 'doc-gone', handle: 'vxlan-tunnel-addr-doc-gone' }]);
    await client.delete(K.node, undefined, 'doc-gone');
    await client.waitFor('node doc-gone deleted', async () => ((await client.getOrUndefined(K.node, undefined, 'doc-gone')) ? undefined : true), {
      timeoutMs: 60_000,
    });

    const r = await doctor();
    expect(r.ids, r.stdout).toEqual(['ipam-block-affinity-missing-node', 'ipam-handle-without-pod', 'pool-managed-not-listed']);
    expect(r.code).toBe(2);
    const by = Object.fromEntries(r.report.findings.map((f: any) => [f.id, f]));
    expect(by['pool-managed-not-listed'].objects).toEqual(['IPPool/legacy-pool', 'Installation/default']);
    expect(by['ipam-handle-without-pod'].objects).toEqual([`IPAMHandle/${ghostHandle} (pod ${NS}/ghost) holds ${ghost!.status!.podIP}`]);
    expect(by['ipam-block-affinity-missing-node'].title).toContain('node doc-gone');
    expect(by['ipam-block-affinity-missing-node'].objects).toEqual([
      'IPAMBlock/10-99-0-0-26',
      'BlockAffinity/doc-gone-10-99-0-0-26',
      'IPAMHandle/vxlan-tunnel-addr-doc-gone',
    ]);

    // Clean up these three problems; the population is healthy again.
    await client.delete(ipPool, undefined, 'legacy-pool');
    await client.delete(ipamHandle, undefined, ghostHandle);
    await writeIpam(client, allocs);
    await client.delete(ipamBlock, undefined, '10-99-0-0-26');
    await client.delete(blockAffinity, undefined, 'doc-gone-10-99-0-0-26');
    await client.delete(ipamHandle, undefined, 'vxlan-tunnel-addr-doc-gone');
    const again = await doctor();
    expect(again.report.findings, again.stdout).toEqual([]);
    expect(again.code).toBe(0);
  });

  it('the #9100 incident: the disabled default-ipv4-ippool equal to the Installation entry, with the 3.28 fix (unlist it)', async () => {
    await setInstallation(client, [entry('kwok-ipv4-ippool', '10.244.0.0/16'), entry('default-ipv4-ippool', '192.168.0.0/16')]);
    const p = poolFor('default-ipv4-ippool', '192.168.0.0/16', { disabled: true });
    delete p.metadata.labels; // not labelled yet: adopted because it equals the entry
    await client.apply(ipPool, p);
    const r = await doctor();
    expect(r.ids, r.stdout).toEqual(['pool-disabled-will-be-reenabled']);
    expect(r.code).toBe(2);
    const f = r.report.findings[0];
    expect(f.objects).toEqual(['IPPool/default-ipv4-ippool', 'Installation/default']);
    expect(f.why).toMatch(/equals entry 1 of Installation default/);
    expect(f.why).toMatch(/disabled: false/);
    // Unlabelled: stopped with nodeSelector "!all()", its entry would no longer equal it and the operator would refuse
    // it on every reconcile; unlisted, the operator leaves it alone, disabled.
    expect(f.fix).not.toContain('!all()');
    expect(f.fix).toContain(
      `kubectl patch installation default --type=json -p '[{"op":"test","path":"/spec/calicoNetwork/ipPools/1/cidr","value":"192.168.0.0/16"},{"op":"remove","path":"/spec/calicoNetwork/ipPools/1"}]'`,
    );
    const table = await runCli(['doctor']);
    expect(table.code).toBe(2);
    expect(table.stdout).toMatch(/Errors \(1\)/);
    expect(table.stdout).toContain('[pool-disabled-will-be-reenabled]');
    expect(table.stdout).toContain("fix: Take the pool out of the operator's hands: remove entry 1 (cidr 192.168.0.0/16)");
  });

  it('--target 3.27.4 on the same state: 3.27 schema prunes the 3.28 fields and allows one pool per family', async () => {
    const r = await doctor(['--target', '3.27.4']);
    expect(r.code).toBe(2);
    expect(r.ids).toContain('installation-pools-per-family');
    expect(r.ids).not.toContain('pool-disabled-will-be-reenabled'); // the 3.27 operator never writes pools
    const prune = r.report.findings.find((f: any) => f.id === 'target-schema-prune' && f.objects[0] === 'Installation/default');
    expect(prune?.title).toContain('spec.calicoNetwork.ipPools[0].name');
    expect(r.report.calico.target).toBe('v3.27.4');
  });

  it('doctor BUNDLE runs the same checks offline (no cluster reachable)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cnr-doctor-'));
    const out = path.join(dir, 'bundle');
    const ex = await runCli(['export', '--out', out, '-o', 'json']);
    expect(ex.code, ex.stderr).toBe(0);
    writeFileSync(
      path.join(dir, 'kc'),
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    );
    const r = await doctor([out, '--kubeconfig', path.join(dir, 'kc')]);
    expect(r.ids, r.stdout + r.stderr).toEqual(['pool-disabled-will-be-reenabled']);
    expect(r.code).toBe(2);
    expect(r.report.source).toMatchObject({ type: 'bundle', path: out });
    expect(r.report.notes.join(' ')).toMatch(/bundles keep no pods/);
  });

  it('a half-done downgrade (3.28.1 CRDs, operator v1.32.10) with a Degraded TigeraStatus and kube-controllers not Ready', async () => {
    await setInstallation(client, [entry('kwok-ipv4-ippool', '10.244.0.0/16')]);
    await client.delete(ipPool, undefined, 'default-ipv4-ippool');
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', {
      spec: { template: { spec: { containers: [{ name: 'tigera-operator', image: 'quay.io/tigera/operator:v1.32.10' }] } } },
    });
    await client.waitFor(
      'operator v1.32.10 rolled out',
      async () => {
        const d = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
        const st = d.status ?? {};
        return st.observedGeneration === d.metadata.generation && st.updatedReplicas === 1 && st.readyReplicas === 1 && st.replicas === 1 ? true : undefined;
      },
      { timeoutMs: 120_000 },
    );
    const tsType = operatorType('tigerastatuses', 'TigeraStatus');
    await client.apply(tsType, { apiVersion: 'operator.tigera.io/v1', kind: 'TigeraStatus', metadata: { name: 'calico' }, spec: {} });
    await client.apply(
      tsType,
      {
        apiVersion: 'operator.tigera.io/v1',
        kind: 'TigeraStatus',
        metadata: { name: 'calico' },
        status: {
          conditions: [
            {
              type: 'Degraded',
              status: 'True',
              reason: 'ResourceReadError',
              message: 'Error querying installation',
              lastTransitionTime: new Date().toISOString(),
            },
          ],
        },
      },
      { subresource: 'status' },
    );
    await client.apply(K.deployment, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'calico-kube-controllers', namespace: 'calico-system' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { 'k8s-app': 'calico-kube-controllers' } },
        // No node matches: the pod stays Pending, as when the image cannot run after a version change.
        template: {
          metadata: { labels: { 'k8s-app': 'calico-kube-controllers' } },
          spec: {
            nodeSelector: { 'doctor-e2e/none': 'x' },
            containers: [{ name: 'calico-kube-controllers', image: 'docker.io/calico/kube-controllers:v3.28.1' }],
          },
        },
      },
    });
    const r = await doctor();
    expect(r.ids, r.stdout).toEqual(['crds-newer-than-operator', 'tigerastatus-degraded', 'version-skew', 'workload-not-ready']);
    expect(r.code).toBe(2);
    const by = Object.fromEntries(r.report.findings.map((f: any) => [f.id, f]));
    expect(by['crds-newer-than-operator'].title).toMatch(
      /CRDs are from v3.28 or later, but the running operator quay.io\/tigera\/operator:v1.32.10 \(Calico v3.27.4\)/,
    );
    expect(by['crds-newer-than-operator'].objects).toContain('CustomResourceDefinition/installations.operator.tigera.io');
    expect(by['version-skew']).toMatchObject({ severity: 'error' });
    expect(by['version-skew'].title).toContain('ClusterInformation default calicoVersion = v3.28.1');
    expect(by['tigerastatus-degraded'].title).toBe('TigeraStatus calico is Degraded: ResourceReadError: Error querying installation');
    expect(by['workload-not-ready'].title).toBe('Deployment calico-system/calico-kube-controllers: 0 of 1 ready');
  });

  it('bad input: one clear line and exit 2, distinguishable from findings', async () => {
    const r = await runCli(['doctor', '/nonexistent/bundle']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^cni-rewind: \/nonexistent\/bundle: no such bundle/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const t = await runCli(['doctor', '--target', '3.x']);
    expect(t.code).toBe(2);
    expect(t.stderr).toMatch(/"3.x" is not a Calico version/);
    const m = await runCli(['doctor', '--manifests', '/tmp']);
    expect(m.code).toBe(2);
    expect(m.stderr).toMatch(/--manifests needs --target/);
  });
});
