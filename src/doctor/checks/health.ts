/** TigeraStatus conditions and readiness of the Calico workloads. */
import { KEYS, objectsOf, ref } from '../state.js';
import { CALICO_CRD_GROUP, CALICO_V3_GROUP } from '../../calico/knowledge.js';
import type { Check, Finding } from '../types.js';

const tigeraStatus: Check = {
  name: 'TigeraStatus',
  run(state) {
    const out: Finding[] = [];
    for (const ts of objectsOf(state, KEYS.tigeraStatuses)) {
      const conds: { type: string; status: string; reason?: string; message?: string }[] = ts.status?.conditions ?? [];
      const degraded = conds.find((c) => c.type === 'Degraded' && c.status === 'True');
      const unavailable = conds.find((c) => c.type === 'Available' && c.status === 'False');
      const bad = degraded ?? unavailable;
      if (!bad) continue;
      const detail = [bad.reason, bad.message].filter(Boolean).join(': ');
      out.push({
        id: degraded ? 'tigerastatus-degraded' : 'tigerastatus-unavailable',
        severity: degraded ? 'error' : 'warning',
        title: `TigeraStatus ${ts.metadata.name} is ${degraded ? 'Degraded' : 'not Available'}${detail ? `: ${detail}` : ''}`,
        objects: [ref(ts)],
        why: degraded
          ? `The operator cannot reconcile ${ts.metadata.name} and stops changing it until the cause is fixed; the message above is the operator's own.`
          : `The ${ts.metadata.name} component is not available yet (still rolling out, or its pods are not Ready).`,
        fix:
          `Read the operator's reason: kubectl get tigerastatus ${ts.metadata.name} -o yaml; kubectl logs -n tigera-operator deploy/tigera-operator. ` +
          'Fix the configuration it names (often the Installation or an IP pool), then wait for Available=True.',
      });
    }
    return out;
  },
};

const workloadsReady: Check = {
  name: 'Calico workloads ready',
  run(state) {
    const when = state.source.type === 'bundle' ? ' at export time' : '';
    return state.workloads
      .filter((w) => w.desired > 0 && w.ready < w.desired)
      .map((w) => ({
        id: 'workload-not-ready',
        severity: 'error' as const,
        title: `${w.kind} ${w.namespace}/${w.name}: ${w.ready} of ${w.desired} ready${when}`,
        objects: [`${w.kind}/${w.namespace}/${w.name}`],
        why:
          w.name === 'calico-node'
            ? 'Nodes without a Ready calico-node get no new pod networking and their routes and policies are not updated.'
            : w.name === 'tigera-operator'
              ? 'Without the operator nothing reconciles the Installation; changes to it have no effect yet.'
              : `${w.name} is part of Calico's control plane (${w.name === 'calico-typha' ? 'fans datastore updates out to calico-node' : 'IPAM garbage collection, node and policy controllers'}); while it is down that work stops.`,
        fix: `Find out why: kubectl -n ${w.namespace} describe ${w.kind.toLowerCase()} ${w.name}; kubectl -n ${w.namespace} get pods -o wide; kubectl -n ${w.namespace} logs <pod>. Image pulls, crash loops after a version change and pending scheduling are the usual causes.`,
      }));
  },
};

/**
 * Calico 3.32's v3-CRD mode (src/calico/v3-crds.ts): its data is in projectcalico.org CRDs, which cni-rewind does not
 * read or write yet. Reported instead of calico-crds-missing: the crd.projectcalico.org CRDs are absent on purpose.
 */
const v3CrdMode: Check = {
  name: "Calico's v3-CRD mode",
  run(state) {
    if (!state.v3Crds?.length) return [];
    return [
      {
        id: 'calico-v3-crd-mode',
        severity: 'warning',
        title: `Calico runs in its v3-CRD mode (${state.v3Crds.length} CRDs of group ${CALICO_V3_GROUP}), which cni-rewind does not support yet`,
        objects: state.v3Crds.map((n) => `CustomResourceDefinition/${n}`),
        why:
          'Calico 3.32 can keep its data in native projectcalico.org/v3 CRDs instead of crd.projectcalico.org/v1 (a new install with ' +
          'v3_projectcalico_org.yaml, or a DatastoreMigration). cni-rewind exports and restores the v1 storage only: a backup would hold no ' +
          'Calico data, and restoring an older bundle would create the v1 CRDs again, flipping the operator back to v1 mode over stale data. ' +
          'backup, export, plan, apply and restore refuse in this mode (exit 5).',
        fix:
          "Back up with kubectl (kubectl get ippools.projectcalico.org -o yaml, and each other projectcalico.org kind) and your provider's disk " +
          "snapshots; do not restore a bundle made before the migration. Doctor's other checks read the v1 storage and have nothing to check here.",
      },
    ];
  },
};

/** The aftermath of `kubectl delete -f tigera-operator.yaml` (3.27/3.28): Calico still runs, its CRDs and their objects are gone. */
const crdsMissing: Check = {
  name: 'Calico CRDs present',
  run(state) {
    const running = state.workloads.filter((w) => w.name === 'calico-node' || w.name === 'tigera-operator');
    if (running.length === 0) return [];
    // In v3-CRD mode the v1 CRDs are absent by design: v3CrdMode reports that.
    if (state.v3Crds?.length) return [];
    // Calico in etcd mode has no CRDs by design: re-applying the Kubernetes-datastore manifests would move it to an empty datastore.
    if (state.datastore?.type === 'etcd') {
      return [
        {
          id: 'etcd-datastore',
          severity: 'warning',
          title: `Calico keeps its data in etcd (${state.datastore.evidence}), not in Kubernetes CRDs`,
          objects: running.map((w) => `${w.kind}/${w.namespace}/${w.name}`),
          why:
            'The missing crd.projectcalico.org CRDs are expected here and must not be re-applied: the Kubernetes-datastore manifests would ' +
            'move Calico to an empty datastore. cni-rewind export, backup and restore read and write this etcd (calico-config and ' +
            "calico-etcd-secrets give the endpoints and calico-node's client certificate); plan --to rolls out the target's " +
            'calico-etcd.yaml with these etcd settings carried over (never calico.yaml, after which every CNI ADD would fail).',
          fix:
            'Back up with cni-rewind backup (it reads etcd), then cni-rewind plan --to VERSION (the target calico-etcd.yaml); move to the ' +
            'Kubernetes datastore with cni-rewind plan --migrate-datastore (calicoctl datastore migrate, verified, with a rollback).',
        },
      ];
    }
    const hasPools = state.crds.some((c) => c.spec?.group === CALICO_CRD_GROUP && c.spec?.names?.kind === 'IPPool');
    if (hasPools) return [];
    return [
      {
        id: 'calico-crds-missing',
        severity: 'error',
        title: `Calico runs (${running.map((w) => `${w.namespace}/${w.name}`).join(', ')}) but the crd.projectcalico.org IPPool CRD is missing`,
        objects: running.map((w) => `${w.kind}/${w.namespace}/${w.name}`),
        why:
          'Deleting a CRD deletes every object stored in it: IP pools, IPAM blocks/handles/affinities, policies, FelixConfiguration, BGP ' +
          'configuration. On 3.27/3.28, `kubectl delete -f tigera-operator.yaml` does exactly that. When Calico comes back, IPAM no longer ' +
          'knows which addresses running pods hold and hands them out again (duplicate IPs); policies are gone.',
        fix:
          'Before any new pod is created, restore the Calico resources from the last bundle: cni-rewind restore <bundle> --resources ' +
          '(CRDs first, then pools and IPAM, then the rest). Without a bundle, re-apply the release manifests server-side and recreate every ' +
          'pod so addresses go through IPAM again.',
      },
    ];
  },
};

export const healthChecks: Check[] = [v3CrdMode, crdsMissing, tigeraStatus, workloadsReady];
