/**
 * The reset that lets the next file reuse a worker's cluster (test/support/cluster-reset.ts): after a file that
 * installed Calico's CRDs and the operator's objects with their finalizers, scheduled pods on kwok nodes, and left
 * objects in kube-system and cluster-wide, nothing of it is left, and the next reset has nothing to do.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { leftovers, readBaseline, resetToBaseline, type Baseline } from '../support/cluster-reset.js';
import { applyFixture, calicoType, operatorType, testClient } from './helpers.js';

describe('the reset between two files on one cluster', () => {
  let client: KubeClient;
  let baseline: Baseline;

  beforeAll(async () => {
    client = await testClient();
    const state = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME }).readState();
    baseline = readBaseline(path.join(state!.workDir, 'baseline.json'))!;
    expect(baseline, 'cluster-setup.ts records the baseline of a fresh cluster').toBeDefined();
  });
  afterAll(() => client?.close());

  it('leaves nothing of what a file created, finalizers and all', async () => {
    // What a real-Calico file leaves when it fails half-way: CRDs with objects held by the operator's finalizers,
    // the operator's namespace with a workload, nodes with pods, calico.yaml's kube-system objects, cluster RBAC.
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    const INSTALLATION = operatorType('installations', 'Installation');
    await client.waitFor(
      'the installations CRD to be served',
      async () =>
        (await client
          .listAll(INSTALLATION)
          .then(() => true)
          .catch(() => undefined)) || undefined,
    );
    await client.create(INSTALLATION, {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default', finalizers: ['tigera.io/operator-cleanup'] },
      spec: {},
    });
    await client.create(calicoType('ippools', 'IPPool'), {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPPool',
      metadata: { name: 'reset-pool', finalizers: ['example.com/keep'] },
      spec: { cidr: '10.77.0.0/16' },
    });
    await createFakeNodes(client, [{ name: 'reset-node-1' }]);
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'reset-ns' } });
    await client.create(K.configMap, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'held', namespace: 'reset-ns', finalizers: ['example.com/keep'] },
    });
    await client.create(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'reset-pod', namespace: 'reset-ns' },
      spec: { nodeName: 'reset-node-1', containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    await client.create(K.configMap, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'calico-config', namespace: 'kube-system' }, data: {} });
    await client.create(K.clusterRole, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'reset-role' }, rules: [] });

    const before = await leftovers(client, baseline);
    expect(Object.keys(before['customresourcedefinitions.apiextensions.k8s.io'] ?? {}).length).toBeGreaterThan(0);
    expect(Object.keys(before['namespaces.core'] ?? {})).toEqual(expect.arrayContaining(['reset-ns', 'tigera-operator']));

    const removed = await resetToBaseline(client, baseline);
    expect(Object.keys(removed['nodes.core'] ?? {})).toEqual(['reset-node-1']);
    expect(await leftovers(client, baseline)).toEqual({});
    for (const [r, ns, name] of [
      [K.namespace, undefined, 'reset-ns'],
      [K.namespace, undefined, 'tigera-operator'],
      [K.node, undefined, 'reset-node-1'],
      [K.configMap, 'kube-system', 'calico-config'],
      [K.clusterRole, undefined, 'reset-role'],
      [K.crd, undefined, 'installations.operator.tigera.io'],
      [K.crd, undefined, 'ippools.crd.projectcalico.org'],
    ] as const)
      expect(await client.getOrUndefined(r, ns, name), `${r.kind} ${name}`).toBeUndefined();
  });

  it('has nothing to do on a cluster that is at its baseline', async () => {
    expect(await resetToBaseline(client, baseline)).toEqual({});
  });
});
