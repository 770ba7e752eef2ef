/** The machine side of plan-reboot.test.ts's simulated reboots, and what the test samples while apply runs. */
import { randomUUID } from 'node:crypto';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { Population } from './population.js';
import { podsUsingAddresses, populationPods, type AddressedPod } from './population-pods.js';

export const NOT_READY_LABEL = 'node-not-ready.stage.kwok.x-k8s.io';

const isReady = (n: any) => n?.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');

export const setBootId = (client: KubeClient, node: string, id: string) =>
  client.mergePatch(K.node, undefined, node, { status: { nodeInfo: { bootID: id } } }, { subresource: 'status' });

/** The machine side of a reboot, as a real node would show it in Kubernetes. */
export async function rebootLikeAMachine(client: KubeClient, node: string): Promise<void> {
  await client.mergePatch(K.node, undefined, node, { metadata: { labels: { [NOT_READY_LABEL]: 'true' } } });
  await client.waitFor(`${node} NotReady`, async () => (!isReady(await client.get(K.node, undefined, node)) ? true : undefined), {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  await new Promise((r) => setTimeout(r, 1500)); // the machine is down for a while
  await setBootId(client, node, `boot-${randomUUID()}`);
  await client.mergePatch(K.node, undefined, node, { metadata: { labels: { [NOT_READY_LABEL]: null } } });
}

/** The pods still on a node when its machine reboots that a drain should have evicted. */
export async function evictablePods(client: KubeClient, node: string): Promise<string[]> {
  const pods = await client.listAll(K.pod, { fieldSelector: `spec.nodeName=${node}` });
  // Left on the node at its reboot: pods that are neither DaemonSet pods nor pods that tolerate the cordon (the
  // tigera-operator tolerates every taint, so the scheduler may put its replacement right back; that is expected).
  const toleratesCordon = (p: any) =>
    (p.spec?.tolerations ?? []).some(
      (t: any) => t.operator === 'Exists' && (!t.key || t.key === 'node.kubernetes.io/unschedulable') && (!t.effect || t.effect === 'NoSchedule'),
    );
  return pods
    .filter((p) => !p.metadata.deletionTimestamp && !p.metadata.ownerReferences?.some((o) => o.kind === 'DaemonSet') && !toleratesCordon(p))
    .map((p) => `${p.metadata.namespace}/${p.metadata.name}`);
}

/** Samples the nodes' cordon state until stopped: the most nodes cordoned at once, and in which order. */
export function monitorCordons(client: KubeClient, prefix: string): { stop: () => Promise<{ maxCordoned: number; order: string[] }> } {
  let running = true;
  let maxCordoned = 0;
  const order: string[] = [];
  const loop = (async () => {
    while (running) {
      const cordoned = (await client.listAll(K.node)).filter((n) => n.metadata.name.startsWith(prefix) && n.spec?.unschedulable).map((n) => n.metadata.name);
      maxCordoned = Math.max(maxCordoned, cordoned.length);
      for (const c of cordoned) if (order[order.length - 1] !== c) order.push(c);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { maxCordoned, order };
    },
  };
}

export async function workloadAvailable(client: KubeClient, ns: string): Promise<void> {
  await client.waitFor(
    'the web Deployment to have 2 available replicas and its PDB to allow a disruption',
    async () => {
      const d = await client.get(K.deployment, ns, 'web');
      const pdb = await client.get(K.pdb, ns, 'web');
      return d.status?.availableReplicas === 2 && pdb.status?.disruptionsAllowed === 1 ? true : undefined;
    },
    // A rehearsal timed out here once with nothing to read (2026-12-06): say where the replicas are and why not ready.
    { timeoutMs: 120_000, intervalMs: 500, state: () => workloadState(client, ns) },
  );
}

/** The web Deployment's and PDB's status, each web pod (node, phase, Ready) and each node (cordon, Ready, taints). */
async function workloadState(client: KubeClient, ns: string): Promise<string> {
  const d = await client.get(K.deployment, ns, 'web');
  const pdb = await client.get(K.pdb, ns, 'web');
  const condition = (o: any, type: string) => o?.status?.conditions?.find((c: any) => c.type === type)?.status ?? '?';
  const pods = (await client.listAll(K.pod, { namespace: ns })).map(
    (p: any) =>
      `${p.metadata.name} on ${p.spec?.nodeName ?? '-'} ${p.status?.phase ?? '?'} Ready=${condition(p, 'Ready')}${p.metadata.deletionTimestamp ? ' deleting' : ''}`,
  );
  const nodes = (await client.listAll(K.node)).map(
    (n: any) =>
      `${n.metadata.name}${n.spec?.unschedulable ? ' cordoned' : ''} Ready=${condition(n, 'Ready')} taints=${(n.spec?.taints ?? []).map((t: any) => t.key).join(',') || '-'}`,
  );
  return `deployment ${JSON.stringify(d.status ?? {})}; pdb ${JSON.stringify(pdb.status ?? {})}; pods [${pods.join('; ')}]; nodes [${nodes.join('; ')}]`;
}

/** A workload a careless drain would take down: 2 replicas on different nodes, a PDB that allows one disruption at a time. */
export async function createWebWorkload(client: KubeClient, ns: string): Promise<void> {
  await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const labels = { app: 'web' };
  await client.create(K.deployment, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: ns },
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [{ name: 'web', image: 'registry.k8s.io/pause:3.10' }],
          affinity: {
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' }],
            },
          },
        },
      },
    },
  });
  await client.create(K.pdb, {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: 'web', namespace: ns },
    spec: { minAvailable: 1, selector: { matchLabels: labels } },
  });
}

/** The population's DaemonSets' app label (one DaemonSet per allocation slot of the nodes' blocks). */
const ADDRESSED_APP = 'frb-addressed';

/**
 * Running pods for the population's allocations that the rolling reboot leaves where they are, so that the IPAM check
 * after it (expectPodAddressesHeld) judges pods that still run. A drain evicts every pod but DaemonSet and mirror pods
 * (src/drain/drain.ts podsToEvict, as kubectl drain), and nothing here releases an evicted pod's address (no CNI DEL):
 * pods that were evicted are gone and not judged. So each of these is a DaemonSet's pod: created bound to its node
 * with its address as the CNI plugin leaves it (podsUsingAddresses), then adopted by the DaemonSet of its slot (the
 * last number of its name), which runs on the population's nodes only and never replaces a pod itself (OnDelete).
 */
export async function daemonSetPodsForPopulation(client: KubeClient, population: Population): Promise<AddressedPod[]> {
  const pods = populationPods(population);
  const slotOf = (p: AddressedPod) => p.name.split('-').pop()!;
  await podsUsingAddresses(client, pods);
  for (const p of pods) await client.mergePatch(K.pod, p.namespace, p.name, { metadata: { labels: { app: ADDRESSED_APP, slot: slotOf(p) } } });
  const onNodes = { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [...new Set(pods.map((p) => p.node))] }] };
  for (const slot of new Set(pods.map(slotOf))) {
    const labels = { app: ADDRESSED_APP, slot };
    await client.create(K.daemonSet, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: `${ADDRESSED_APP}-${slot}`, namespace: population.namespace },
      spec: {
        selector: { matchLabels: labels },
        updateStrategy: { type: 'OnDelete' },
        template: {
          metadata: { labels },
          spec: {
            containers: [{ name: 'c', image: 'nginx' }],
            affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [onNodes] } } },
          },
        },
      },
    });
  }
  await client.waitFor(
    `the ${pods.length} addressed pods adopted by their DaemonSets, and no other pod made`,
    async () => {
      const live = (await client.listAll(K.pod, { namespace: population.namespace })).filter((p) => !p.metadata.deletionTimestamp);
      const adopted = live.filter((p) => p.metadata.ownerReferences?.some((o) => o.kind === 'DaemonSet' && o.controller));
      return live.length === pods.length && adopted.length === pods.length ? true : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  return pods;
}

/**
 * What the kubelet does and kwok does not: a Running pod's readiness reported again once its node is Ready. The node
 * lifecycle controller marks every pod of a node it last saw NotReady as not Ready, a pod updated or scheduled there
 * just after the node came back included (nodelifecycle `processPod`, k8s v1.36.3 node_lifecycle_controller.go:1135;
 * its view lags by --node-monitor-period). kwok's pod-ready stage plays only for Pending pods, so such a pod stayed
 * Ready=False on a Ready node for good (a rehearsal: web on frb-1 Running Ready=False, frb-1 Ready, no taints; every
 * later drain then waited on the PDB). A real kubelet reports it Ready again at its next status sync.
 */
export function kubeletReadiness(client: KubeClient, ns: string): { stop: () => Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await reportReadyAgain(client, ns).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function reportReadyAgain(client: KubeClient, ns: string): Promise<void> {
  const readyNodes = new Set((await client.listAll(K.node)).filter(isReady).map((n) => n.metadata.name));
  for (const p of await client.listAll(K.pod, { namespace: ns })) {
    const conditions: any[] = p.status?.conditions ?? [];
    const notReady = conditions.some((c) => c.type === 'Ready' && c.status === 'False');
    if (p.metadata.deletionTimestamp || p.status?.phase !== 'Running' || !notReady || !readyNodes.has(p.spec?.nodeName)) continue;
    const now = new Date().toISOString();
    const again = (c: any) => (c.type === 'Ready' || c.type === 'ContainersReady' ? { ...c, status: 'True', reason: undefined, lastTransitionTime: now } : c);
    await client.mergePatch(
      K.pod,
      ns,
      p.metadata.name,
      {
        metadata: { resourceVersion: p.metadata.resourceVersion },
        status: { conditions: conditions.map(again), containerStatuses: (p.status?.containerStatuses ?? []).map((s: any) => ({ ...s, ready: true })) },
      },
      { subresource: 'status' },
    );
  }
}
