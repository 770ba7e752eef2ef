/** The machine side of plan-reboot.test.ts's simulated reboots, and what the test samples while apply runs. */
import { randomUUID } from 'node:crypto';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';

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
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}
