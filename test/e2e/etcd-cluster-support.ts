/**
 * The shared test cluster with Calico on the etcd datastore, installed as calico-etcd.yaml's users install it
 * (src/dev/local-cluster/calico-etcd-install.ts) and run by Calico's real programs in etcd mode: kube-controllers,
 * calico-node's start-up and tunnel allocator per kwok node and the CNI plugin per pod (the supervisor's node side).
 */
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { tlsOptions } from '../../src/dev/local-cluster/calico-etcd.js';
import { addressAt, parseCidr } from '../../src/doctor/ip.js';
import { EtcdGateway } from '../../src/etcd/gateway.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import type { KubeClient } from '../../src/kube/client.js';
import { ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import type { CalicoEtcd } from '../../src/dev/local-cluster/calico-etcd.js';
import { installCalicoEtcdRelease } from '../../src/dev/local-cluster/calico-etcd-install.js';
import { runCalicoctlEtcd } from '../../src/dev/local-cluster/calico-tools.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { clearCalicoFinalizers } from './calico-support.js';
import { deleteNodes, resetCalico, testClient } from './helpers.js';

export interface CalicoOnEtcd {
  cluster: LocalCluster;
  client: () => KubeClient;
  /** The Calico etcd's endpoint and the CA / client certificate files (also LocalCluster.calicoEtcd()). */
  etcd: () => CalicoEtcd;
  /** The real calicoctl of `tree` (default: the installed release's) in etcd mode against that etcd. */
  calicoctl: (args: string[], input?: string) => Promise<string>;
  /** That calicoctl's path, for a script a test runs (wrap's command). */
  calicoctlPath: () => string;
  nodes: string[];
}

/** Removes what calico-etcd.yaml created that resetCalico leaves (its Secret). */
async function removeEtcdInstall(client: KubeClient): Promise<void> {
  await resetCalico(client);
  await client.delete(K.secret, 'kube-system', 'calico-etcd-secrets');
}

/**
 * Registers the file's set-up: the programs of `tree` built (node side included), Calico removed, the Calico etcd
 * started with no data (a fresh datastore), calico-etcd.yaml of `version` installed with two kwok nodes
 * `<prefix>-node-N`, the supervisor started with the node side. Afterwards Calico's programs stopped and its
 * objects and nodes removed; the Calico etcd stays until `down` (the next file's set-up wipes it).
 */
export function withCalicoOnEtcd(nodePrefix: string, version = '3.28.1', tree = `v${version}`): CalicoOnEtcd {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  const nodes = [`${nodePrefix}-node-1`, `${nodePrefix}-node-2`];
  let client: KubeClient | undefined;
  let etcd: CalicoEtcd | undefined;
  let calicoDir: string | undefined;
  beforeAll(async () => {
    calicoDir = await ensureCalicoProgram('calico', tree);
    await ensureCalicoProgram('node-side', tree);
    client = await testClient();
    await cluster.stopCalico();
    await clearCalicoFinalizers(client);
    await removeEtcdInstall(client);
    await cluster.ensureCalicoEtcd({ wipe: true });
    etcd = await installCalicoEtcdRelease(
      client,
      cluster,
      version,
      undefined,
      nodes.map((name) => ({ name })),
    );
    await cluster.startCalico({ nodeSide: true });
  }, 60 * 60_000);
  afterAll(async () => {
    await cluster.stopCalico();
    if (client) {
      await removeEtcdInstall(client);
      await deleteNodes(client, `${nodePrefix}-`);
      client.close();
    }
  }, 600_000);
  const need = <T>(v: T | undefined, what: string): T => {
    if (!v) throw new Error(`the etcd-datastore set-up has not run (${what})`);
    return v;
  };
  return {
    cluster,
    client: () => need(client, 'client'),
    etcd: () => need(etcd, 'etcd'),
    calicoctl: (args, input) => runCalicoctlEtcd(need(etcd, 'etcd'), args, input, tree),
    calicoctlPath: () => path.join(need(calicoDir, 'calicoctl'), 'calicoctl'),
    nodes,
  };
}

/** Every key under `prefix` with its value, as Calico's etcd holds it now. */
export async function etcdValues(real: CalicoOnEtcd, prefix = '/calico/'): Promise<Map<string, string>> {
  const gateway = new EtcdGateway({ endpoints: [real.etcd().endpoint], tls: tlsOptions(real.etcd()) });
  const out = new Map<string, string>();
  for await (const page of gateway.rangePrefix(prefix, 500)) for (const kv of page.kvs) out.set(kv.key, kv.value.toString('utf8'));
  return out;
}

/** Address -> the pod its IPAM block allocation names, over every block in etcd. */
export async function etcdIpamHolders(real: CalicoOnEtcd): Promise<Map<string, string | undefined>> {
  const out = new Map<string, string | undefined>();
  for (const [k, v] of await etcdValues(real, '/calico/ipam/v2/assignment/')) {
    const b = JSON.parse(v) as { cidr: string; allocations: (number | null)[]; attributes: { secondary?: { pod?: string } }[] };
    const cidr = parseCidr(b.cidr);
    if (!cidr) throw new Error(`${k}: no CIDR`);
    b.allocations.forEach((a, o) => a !== null && out.set(addressAt(cidr, o), b.attributes[a]?.secondary?.pod));
  }
  return out;
}

/** A pod on `node` in namespace default, as the etcd tests make them. */
export const podOn = (name: string, node: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { nodeName: node, containers: [{ name: 'web', image: 'nginx' }] },
});

/** The pod's address once the CNI plugin (etcd mode) gave it one from the default pool (192.168.0.0/16). */
export async function waitEtcdPodIp(real: CalicoOnEtcd, name: string): Promise<string> {
  const inPool = (ip: string | undefined) => !!ip && /^192\.168\.\d+\.\d+$/.test(ip);
  return real.client().waitFor(
    `${name} to get its address from the CNI plugin in etcd mode`,
    async () => {
      const pod = await real.client().getOrUndefined<KubeObject>(K.pod, 'default', name);
      return inPool(pod?.status?.podIP) ? (pod!.status.podIP as string) : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
}
