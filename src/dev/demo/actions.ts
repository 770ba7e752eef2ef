import { readShippedFile } from '../../calico/shipped.js';
import type { KubeClient } from '../../kube/client.js';
import { K } from '../../kube/builtin.js';
import { applyManifests, parseManifests } from '../../kube/manifests.js';
import { pool } from '../../util/pool.js';
import type { KubeObject, ResourceType } from '../../kube/types.js';
import { OPERATOR_MANAGED_LABEL } from '../../calico/knowledge.js';
import type { LocalCluster } from '../local-cluster/cluster.js';
import { runCalicoctl, waitApiServiceAvailable, waitOperator } from '../local-cluster/calico-tools.js';
import { CALICO_TYPES, createDemoPopulation } from './population.js';

/**
 * Cluster-side actions of the demo: what a user does with kubectl and calicoctl. What Calico does in reply is
 * done by its real programs (the local cluster's Calico supervisor runs the tigera operator of the Deployment's
 * image, the Calico API server and kube-controllers); the demo only waits for it and shows it.
 */

function fixture(version: string, file: string): KubeObject[] {
  const got = readShippedFile(version, file);
  if (!got) throw new Error(`Calico ${version} ships no ${file}`);
  return parseManifests(got.text, got.path);
}

const V3_POOL: ResourceType = { group: 'projectcalico.org', version: 'v3', plural: 'ippools', kind: 'IPPool', namespaced: false };
const POOL_METADATA_ANNOTATION = 'projectcalico.org/metadata';

/** The migrated pool setup of the incident: the Installation's default pool disabled, a new pool (kwok's pod range) active. */
const DEMO_POOLS = [
  { name: 'default-ipv4-ippool', cidr: '192.168.0.0/16' },
  { name: 'new-pool', cidr: '10.244.0.0/16' },
];

export interface DemoCalico {
  client: KubeClient;
  cluster: LocalCluster;
  kubeconfig: string;
  log: (line: string) => void;
}

/**
 * Calico 3.27.4 as its docs install it, under the real v1.32.10 operator: tigera-operator.yaml, then
 * custom-resources.yaml (default-ipv4-ippool listed in the Installation). Then the user's pool migration, through
 * projectcalico.org/v3 as calico-node and calicoctl write pools (so their metadata lives in the
 * `projectcalico.org/metadata` annotation, where the operator reads it), and the rest of the population.
 */
export async function installCalico(c: DemoCalico, version: string): Promise<Record<string, number>> {
  await applyManifests(c.client, fixture(version, 'tigera-operator.yaml'), { fieldManager: 'kubectl' });
  await applyManifests(c.client, fixture(version, 'custom-resources.yaml'), { fieldManager: 'kubectl' });
  const st = await waitOperator(c.cluster, 'v1.32.10');
  c.log(`   the real tigera operator v1.32.10 runs (pid ${st.operator?.pid}); waiting for the Calico API server it renders`);
  await waitApiServiceAvailable(c.client, 300_000);
  for (const p of DEMO_POOLS) {
    await c.client.create(V3_POOL, {
      apiVersion: 'projectcalico.org/v3',
      kind: 'IPPool',
      metadata: { name: p.name },
      spec: { cidr: p.cidr, blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' },
    });
  }
  await c.client.mergePatch(V3_POOL, undefined, 'default-ipv4-ippool', { spec: { disabled: true } });
  // Created by the Calico API server and kube-controllers (libcalico-go's EnsureInitialized); the backup must hold it.
  await c.client.waitFor(
    'ClusterInformation default',
    async () => (await c.client.getOrUndefined(CALICO_TYPES.clusterInfo, undefined, 'default')) ?? undefined,
    {
      timeoutMs: 300_000,
    },
  );
  const created = await createDemoPopulation(c.client);
  return { IPPool: DEMO_POOLS.length, ...created };
}

export interface ReEnabled {
  operatorPid?: number;
  seconds: number;
  managedBy?: string;
  wide: string;
}

/**
 * The upgrade as users did it: `kubectl apply --server-side` of 3.28.1's tigera-operator.yaml. The operator
 * Deployment's image changes, the supervisor runs the real v1.34.3 operator, and that operator adopts the disabled
 * pool listed in the Installation and rewrites it through projectcalico.org/v3 without `disabled` (Calico #9100).
 * Waits until the pool is seen enabled and returns what shows who did it.
 */
export async function upgradeByHand(c: DemoCalico): Promise<ReEnabled> {
  await applyManifests(c.client, fixture('3.28.1', 'tigera-operator.yaml'), { fieldManager: 'kubectl' });
  const st = await waitOperator(c.cluster, 'v1.34.3');
  const started = Date.now();
  c.log(`   the supervisor now runs the real tigera operator v1.34.3 (pid ${st.operator?.pid}); waiting for it to reconcile the pools`);
  const pool = await c.client.waitFor(
    'operator v1.34.3 to rewrite default-ipv4-ippool',
    async () => {
      const p = await c.client.get(CALICO_TYPES.ippool, undefined, 'default-ipv4-ippool');
      return p.spec?.disabled ? undefined : p;
    },
    { timeoutMs: 300_000, intervalMs: 250 },
  );
  // As the Calico API server serves it: 3.28's keeps v3 labels in the metadata annotation, 3.27.4's (still running
  // when the new operator writes first) on the crd object itself.
  const v3 = await c.client.request<KubeObject>('GET', '/apis/projectcalico.org/v3/ippools/default-ipv4-ippool').catch(() => undefined);
  const meta = JSON.parse(pool.metadata.annotations?.[POOL_METADATA_ANNOTATION] ?? '{}');
  return {
    operatorPid: st.operator?.pid,
    seconds: (Date.now() - started) / 1000,
    managedBy: (v3?.metadata.labels ?? meta.labels ?? pool.metadata.labels)?.[OPERATOR_MANAGED_LABEL],
    wide: await runCalicoctl(c.kubeconfig, ['get', 'ippool', '-o', 'wide']),
  };
}

/** What `kubectl delete -f tigera-operator.yaml` does on 3.27/3.28: every Calico CRD, and all objects in them, gone. */
export async function deleteCalicoCrds(client: KubeClient): Promise<{ deleted: number; terminating: string[] }> {
  const crds = (await client.listAll(K.crd)).filter((c) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(c.spec.group));
  await pool(crds, 8, async (c) => {
    await client.delete(K.crd, undefined, c.metadata.name);
  });
  await client.waitFor(
    'Calico CRDs to be gone',
    async () => ((await client.listAll(K.crd)).some((c) => c.spec.group === 'crd.projectcalico.org') ? undefined : true),
    { timeoutMs: 120_000 },
  );
  // The operator's own CRDs stay while their objects carry the running operator's finalizers.
  const terminating = (await client.listAll(K.crd)).filter((c) => c.spec.group === 'operator.tigera.io').map((c) => c.metadata.name);
  return { deleted: crds.length, terminating };
}

export async function countPools(client: KubeClient): Promise<{ name: string; disabled: boolean }[]> {
  try {
    const pools = await client.listAll(CALICO_TYPES.ippool);
    return pools.map((p) => ({ name: p.metadata.name, disabled: !!p.spec?.disabled }));
  } catch {
    return [];
  }
}

/** `calicoctl ipam check --show-problem-ips`: the real IPAM consistency check. */
export function ipamCheck(kubeconfig: string): Promise<string> {
  return runCalicoctl(kubeconfig, ['ipam', 'check', '--show-problem-ips']);
}
