/** Fixtures and helpers of test/e2e/doctor.test.ts: Calico kinds, pools, IPAM writes, the Installation and a doctor run. */
import { expect } from 'vitest';
import { INSTALLATION_NUDGE_ANNOTATION } from '../../src/calico/knowledge.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoType, operatorType, runCli } from './helpers.js';

export const NS = 'doctor-e2e';
export const ipPool = calicoType('ippools', 'IPPool');
export const ipamBlock = calicoType('ipamblocks', 'IPAMBlock');
export const ipamHandle = calicoType('ipamhandles', 'IPAMHandle');
export const blockAffinity = calicoType('blockaffinities', 'BlockAffinity');
export const clusterInfo = calicoType('clusterinformations', 'ClusterInformation');
export const installationType = operatorType('installations', 'Installation');
export const MANAGED = { 'app.kubernetes.io/managed-by': 'tigera-operator' };

/** An Installation entry as operator v1.34 leaves it (defaults written back). */
export const entry = (name: string, cidr: string) => ({
  name,
  cidr,
  blockSize: 26,
  encapsulation: 'VXLANCrossSubnet',
  natOutgoing: 'Enabled',
  nodeSelector: 'all()',
  disableBGPExport: false,
  allowedUses: ['Workload', 'Tunnel'],
});
/** The crd.projectcalico.org IPPool the operator writes for such an entry. */
export const poolFor = (name: string, cidr: string, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPPool',
  metadata: { name, labels: MANAGED },
  spec: {
    cidr,
    blockSize: 26,
    ipipMode: 'Never',
    vxlanMode: 'CrossSubnet',
    natOutgoing: true,
    nodeSelector: 'all()',
    allowedUses: ['Workload', 'Tunnel'],
    ...extra,
  },
});

export interface Alloc {
  ip: string;
  node: string;
  handle: string;
  pod?: string;
}

/** IPAM objects as calico-ipam would have written them for these allocations: /26 blocks, handles, affinities. */
export async function writeIpam(client: KubeClient, allocs: Alloc[]): Promise<void> {
  const blocks = new Map<string, { node: string; items: Alloc[] }>();
  for (const a of allocs) {
    const o = a.ip.split('.').map(Number);
    const base = `${o[0]}.${o[1]}.${o[2]}.${o[3]! & ~63}/26`;
    (blocks.get(base) ?? blocks.set(base, { node: a.node, items: [] }).get(base)!).items.push(a);
  }
  for (const [cidr, b] of blocks) {
    const allocations: (number | null)[] = Array(64).fill(null);
    const attributes = b.items.map((a, i) => {
      allocations[Number(a.ip.split('.')[3]) & 63] = i;
      return { handle_id: a.handle, secondary: a.pod ? { namespace: NS, pod: a.pod, node: a.node } : { node: a.node, type: 'vxlanTunnelAddress' } };
    });
    const name = cidr.replace(/[./]/g, '-');
    const unallocated = allocations.map((v, i) => (v === null ? i : -1)).filter((i) => i >= 0);
    await client.apply(ipamBlock, {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPAMBlock',
      metadata: { name },
      spec: { cidr, affinity: `host:${b.node}`, allocations, attributes, unallocated, strictAffinity: false, deleted: false },
    });
    await client.apply(blockAffinity, {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'BlockAffinity',
      metadata: { name: `${b.node}-${name}` },
      spec: { node: b.node, cidr, state: 'confirmed', deleted: 'false' },
    });
    for (const a of b.items) {
      await client.apply(ipamHandle, {
        apiVersion: 'crd.projectcalico.org/v1',
        kind: 'IPAMHandle',
        metadata: { name: a.handle.toLowerCase() },
        spec: { handleID: a.handle, block: { [cidr]: 1 } },
      });
    }
  }
}

export async function setInstallation(client: KubeClient, ipPools: unknown[]): Promise<void> {
  await client.apply(installationType, {
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: { calicoNetwork: { ipPools } },
  });
}

export async function runningPods(client: KubeClient, selector: string, n: number): Promise<KubeObject[]> {
  return client.waitFor(
    `${n} running pods (${selector})`,
    async () => {
      const pods = (await client.listAll(K.pod, { namespace: NS, labelSelector: selector })).filter(
        (p) => p.status?.phase === 'Running' && p.status?.podIP && !p.metadata.deletionTimestamp,
      );
      return pods.length === n ? pods : undefined;
    },
    { timeoutMs: 120_000 },
  );
}

export async function doctor(args: string[] = [], env?: Record<string, string>) {
  const r = await runCli(['doctor', '-o', 'json', ...args], { env });
  let report: any;
  try {
    report = JSON.parse(r.stdout);
  } catch {
    throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
  return { ...r, report, ids: (report.findings as any[]).map((f) => f.id).sort() };
}

/** How long a deletion of the custom resources may wait for the garbage collector before doctor is asked why. */
export const GC_GRACE_MS = 60_000;

/**
 * What a user does when the deletion of the custom resources still waits after GC_GRACE_MS: while calico-apiserver
 * is still here (not Terminating) after its owner's deletion, doctor must name the namespace the garbage collector
 * lost (`namespace-owner-gone`, an error: Calico up to 3.27.4 shares the namespace's UID with its Profile, and
 * 3.27.5 / 3.28.1 change that UID), and the test does what its fix says: restart kube-controller-manager. Returns
 * doctor's title, or undefined when the namespace is gone or going (the operator's own pace, nothing lost).
 */
export async function restartAsDoctorSays(cluster: LocalCluster, client: KubeClient, stuckMs: number): Promise<string | undefined> {
  const ns = await client.getOrUndefined(K.namespace, undefined, 'calico-apiserver');
  if (!ns || ns.metadata.deletionTimestamp) return undefined;
  const d = await doctor();
  const gone = d.report.findings.find((f: any) => f.id === 'namespace-owner-gone');
  expect(gone, `doctor on a deletion stuck for ${Math.round(stuckMs / 1000)} s: ${d.stdout}`).toMatchObject({ severity: 'error' });
  console.log(`doctor: ${gone.title}; restarting kube-controller-manager as it says`);
  await cluster.restartControllerManager();
  // Then the rest of its fix: once the collector deleted the namespace, a change to the Installation so that v1.32
  // sees it now rather than at its periodic reconcile (up to 5 minutes).
  expect(gone.fix).toContain(`kubectl annotate installation default ${INSTALLATION_NUDGE_ANNOTATION}=`);
  await client.waitFor(
    'the collector to delete calico-apiserver',
    async () => ((await client.getOrUndefined(K.namespace, undefined, 'calico-apiserver')) ? undefined : true),
    {
      timeoutMs: 120_000,
      intervalMs: 1000,
    },
  );
  await client
    .mergePatch(operatorType('installations', 'Installation'), undefined, 'default', {
      metadata: { annotations: { [INSTALLATION_NUDGE_ANNOTATION]: String(Date.now()) } },
    })
    .catch(() => undefined);
  return gone.title;
}
