/**
 * What `calicoctl datastore migrate export` demands of Calico's Nodes in etcd, checked before a migration plan exists
 * and again right before etcd is locked: every Node needs a `k8s` orchestrator reference, the name it gets in the
 * Kubernetes datastore (calicoctl v3.28.1 export.go: "Unable to export data unless every node has a 'k8s'
 * orchestrator reference"). Found by the export only, that is after the lock: every CNI ADD would fail until a
 * rollback. A reference to a Kubernetes node that does not exist is imported as nothing (import.go skips the Node
 * with a warning): said, not refused.
 */
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { openCalicoEtcd } from '../calico/etcd-connection.js';
import { ETCD_RESOURCES_PREFIX } from '../calico/etcd-datastore.js';
import { RefusedError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';

export interface EtcdNodeRefs {
  /** Calico Nodes without a `k8s` orchestrator reference: calicoctl's export stops on them. */
  withoutK8sRef: string[];
  /** `calico node -> Kubernetes node` references to Kubernetes nodes that do not exist: skipped by the import. */
  toMissingK8sNodes: string[];
  nodes: number;
}

/** A Calico Node's `k8s` orchestrator reference (the last, as calicoctl takes it), or undefined. */
export function k8sNodeName(node: unknown): string | undefined {
  const refs = (node as { spec?: { orchRefs?: { orchestrator?: string; nodeName?: string }[] } })?.spec?.orchRefs ?? [];
  let name: string | undefined;
  for (const r of refs) if (r.orchestrator === 'k8s' && r.nodeName) name = r.nodeName;
  return name;
}

export async function judgeEtcdNodes(client: KubeClient, flags: EtcdAccessFlags = {}): Promise<EtcdNodeRefs> {
  const { etcd } = await openCalicoEtcd(client, flags);
  const k8s = new Set((await client.listAll(K.node)).map((n) => n.metadata.name));
  const out: EtcdNodeRefs = { withoutK8sRef: [], toMissingK8sNodes: [], nodes: 0 };
  const prefix = `${ETCD_RESOURCES_PREFIX}nodes/`;
  for await (const page of etcd.rangePrefix(prefix)) {
    for (const kv of page.kvs) {
      const name = kv.key.slice(prefix.length);
      out.nodes++;
      let value: unknown;
      try {
        value = JSON.parse(kv.value.toString('utf8'));
      } catch {
        value = undefined;
      }
      const ref = k8sNodeName(value);
      if (!ref) out.withoutK8sRef.push(name);
      else if (!k8s.has(ref)) out.toMissingK8sNodes.push(`${name} -> ${ref}`);
    }
  }
  return out;
}

/** Refuses (exit 5) when calicoctl's export would stop on a Node; `outcome` says what did not happen. */
export function refuseNodesWithoutK8sRef(r: EtcdNodeRefs, outcome: string): void {
  if (!r.withoutK8sRef.length) return;
  throw new RefusedError(
    `Calico Node(s) ${r.withoutK8sRef.join(', ')} in etcd have no 'k8s' orchestrator reference: calicoctl datastore migrate export stops on them (after etcd is locked); ${outcome}`,
    {
      hint: 'a Node of a host that is no Kubernetes node cannot move to the Kubernetes datastore: remove it (calicoctl delete node NAME, which releases its addresses) or keep the etcd datastore',
    },
  );
}
