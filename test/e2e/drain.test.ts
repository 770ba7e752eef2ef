/**
 * Drain on the real test cluster: kwok nodes, a real scheduler and controllers, real PodDisruptionBudgets and
 * evictions (kwok's pod-delete stage removes evicted pods; their ReplicaSet recreates them elsewhere).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cordon, drainNode, drainPreflight, uncordon } from '../../src/drain/drain.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { deleteNodes, testClient } from './helpers.js';

const NS = 'cnr-drain';
const PREFIX = 'cnr-drain-';
const nodes = [1, 2, 3].map((i) => `${PREFIX}${i}`);

function deployment(name: string, replicas: number): KubeObject {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          nodeSelector: { 'cnr-test': 'drain' },
          // One replica per node, so which node holds which pod is known.
          affinity: {
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' }],
            },
          },
          containers: [{ name: 'c', image: 'registry.invalid/pause:1' }],
        },
      },
    },
  };
}

function pdb(name: string, app: string, minAvailable: number): KubeObject {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name, namespace: NS },
    spec: { minAvailable, selector: { matchLabels: { app } } },
  };
}

describe('drain through the Eviction API (real cluster, kwok nodes, real PDBs)', () => {
  let client: KubeClient;

  const podsOn = async (node: string, app?: string) =>
    (await client.listAll(K.pod, { namespace: NS, fieldSelector: `spec.nodeName=${node}` })).filter(
      (p) => !p.metadata.deletionTimestamp && (!app || p.metadata.labels?.app === app),
    );

  async function waitReadyPods(app: string, n: number) {
    return client.waitFor(
      `${n} ready pods of ${app}`,
      async () => {
        const pods = await client.listAll(K.pod, { namespace: NS, labelSelector: `app=${app}` });
        const ready = pods.filter((p) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'));
        return ready.length >= n ? ready : undefined;
      },
      { timeoutMs: 120_000 },
    );
  }

  async function waitPdb(name: string, allowed: number) {
    await client.waitFor(
      `PDB ${name} disruptionsAllowed=${allowed}`,
      async () => {
        const p = await client.get(K.pdb, NS, name);
        return p.status?.observedGeneration >= 1 && p.status?.disruptionsAllowed === allowed ? true : undefined;
      },
      { timeoutMs: 120_000 },
    );
  }

  beforeAll(async () => {
    client = await testClient();
    await deleteNodes(client, PREFIX);
    await client.delete(K.namespace, undefined, NS);
    await client.waitFor('namespace gone', async () => ((await client.getOrUndefined(K.namespace, undefined, NS)) ? undefined : true), { timeoutMs: 120_000 });
    await createFakeNodes(
      client,
      nodes.map((name, i) => ({ name, labels: { 'cnr-test': 'drain' }, ipIndex: 200 + i })),
    );
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await client.create(K.deployment, deployment('web', 2));
    await client.create(K.pdb, pdb('web', 'web', 1));
    await client.create(K.daemonSet, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'agent', namespace: NS },
      spec: {
        selector: { matchLabels: { app: 'agent' } },
        template: {
          metadata: { labels: { app: 'agent' } },
          spec: { nodeSelector: { 'cnr-test': 'drain' }, containers: [{ name: 'c', image: 'registry.invalid/pause:1' }] },
        },
      },
    });
    await waitReadyPods('web', 2);
    await waitReadyPods('agent', 3);
    await waitPdb('web', 1);
  });

  afterAll(async () => {
    await client.delete(K.namespace, undefined, NS);
    await deleteNodes(client, PREFIX);
    client.close();
  });

  it('drains a node: evicts its Deployment pod (PDB allows 1), keeps the DaemonSet pod; the replacement runs elsewhere', async () => {
    const node = (await Promise.all(nodes.map(async (n) => ((await podsOn(n, 'web')).length ? n : undefined)))).find(Boolean)!;
    const [victim] = await podsOn(node, 'web');
    const pre = await drainPreflight(client, [node]);
    expect(pre.ok).toBe(true);
    expect(pre.evict[node]).toEqual([`${NS}/${victim!.metadata.name}`]); // the DaemonSet pod is not in the list
    const host = new RecordingIoHost();
    await cordon(client, node);
    expect((await client.get(K.node, undefined, node)).spec.unschedulable).toBe(true);
    const res = await drainNode(client, node, { timeoutMs: 120_000, retryIntervalMs: 1000 }, new Reporter(host));
    expect(res.evicted).toEqual([`${NS}/${victim!.metadata.name}`]);
    expect(await podsOn(node, 'web')).toEqual([]);
    expect((await podsOn(node, 'agent')).length).toBe(1);
    // The ReplicaSet recreated the evicted pod on a node that is not cordoned.
    const ready = await waitReadyPods('web', 2);
    expect(ready.every((p) => p.spec.nodeName !== node)).toBe(true);
    await uncordon(client, node);
    expect((await client.get(K.node, undefined, node)).spec.unschedulable).toBeUndefined();
  });

  it('preflight names a PDB that allows no disruption; the drain waits for it, never deletes the pod, and times out clearly', async () => {
    await client.create(K.deployment, deployment('db', 1));
    await client.create(K.pdb, pdb('db', 'db', 1));
    const [pod] = await waitReadyPods('db', 1);
    await waitPdb('db', 0);
    const node = pod!.spec.nodeName as string;
    const pre = await drainPreflight(client, [node]);
    expect(pre.ok).toBe(false);
    expect(pre.blockingPdbs).toEqual([expect.objectContaining({ namespace: NS, name: 'db', disruptionsAllowed: 0, pods: [`${NS}/${pod!.metadata.name}`] })]);
    const host = new RecordingIoHost();
    await cordon(client, node);
    try {
      await expect(drainNode(client, node, { timeoutMs: 6000, retryIntervalMs: 1000 }, new Reporter(host))).rejects.toThrow(
        new RegExp(`drain of node ${node} timed out.*${NS}/${pod!.metadata.name}`),
      );
      expect(host.codes()).toContain('CNR_DRAIN_BLOCKED');
      // Still there, still the same pod: the PDB was not bypassed.
      const still = await client.get(K.pod, NS, pod!.metadata.name);
      expect(still.metadata.uid).toBe(pod!.metadata.uid);
      expect(still.metadata.deletionTimestamp).toBeUndefined();
    } finally {
      await uncordon(client, node);
    }
  });
});
