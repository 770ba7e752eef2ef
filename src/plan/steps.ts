/**
 * The catalogue of plan step kinds and what each says to the people reading a plan. The executor's table of
 * implementations (executor/plan-steps.ts) is typed by `StepKind`, so a kind added here without an implementation,
 * or a plan laid out with a kind not listed here (plan.ts stepsFor), does not compile.
 */
export interface StepText {
  title: string;
  description: string;
}

export const STEP_TEXT = {
  preflight: {
    title: 'preflight',
    description: 'check again: the bundle verifies, is of this cluster and recent; the cluster runs the version the plan was made for; nodes Ready',
  },
  'pause-operator': {
    title: 'pause the tigera operator',
    description: "remember the operator Deployment's replicas (in the journal) and scale it to 0, so no operator writes while versions are mixed",
  },
  'apply-crds': {
    title: 'apply the target CRDs',
    description:
      "replace each CRD with the target's exactly (create or update, so no field of the old schema survives), then wait until Established; CRDs the target lacks stay with their data, except an empty one whose mere presence changes what the target operator does (finding crd-changes-target-operator), which is deleted",
  },
  'apply-operator': {
    title: 'apply the target operator manifest',
    description:
      'create or replace the objects of tigera-operator.yaml without its CRDs exactly as released; the operator Deployment stays at 0 replicas until resumed',
  },
  'apply-calico-manifest': {
    title: 'apply the target calico.yaml',
    description: 'create or replace the objects of calico.yaml exactly as released (CRDs already in place)',
  },
  'remove-operator-leftovers': {
    title: "remove the newer operator's leftovers",
    description:
      "a downgrade below a newer operator generation: remove from Installation default every tigera operator finalizer the target operator does not define (read live again, so one added since the plan goes too; a later delete of the Installation would hang on it), the newer operator's finalizers on its other custom resources, and the TigeraStatus reports only it writes, while the operator is paused (a Helm plan: once helm started the target operator, which never puts them back)",
  },
  'helm-upgrade': {
    title: 'helm upgrade the release to the target chart',
    description:
      "`helm upgrade` of the tigera-operator release with the target chart and the release's own values (`helm get values`, passed as a file, never shown; the plan's pool edits, if any, made in installation.calicoNetwork.ipPools), run by the helm of apply's command line or PATH; Helm's history gets the new revision",
  },
  'helm-rollback': {
    title: 'helm rollback the release to the target revision',
    description:
      "`helm rollback` of the tigera-operator release to the newest revision of the target chart (that revision's chart and values); Helm's history gets the new revision",
  },
  'transform-installation': {
    title: 'make the Installation valid for the target',
    description:
      'remove the fields the target CRD lacks (and extra pools, when allowed), stop pools in the target operator\'s own terms (3.28: nodeSelector "!all()" for disableNewAllocations), and write it with strict field validation',
  },
  'remove-old': {
    title: 'remove the old version',
    description:
      "delete the operator custom resources (orphaning what they own: calico-system keeps running and the target operator adopts it), the operator Deployment and RBAC, and every Calico CRD (with all their objects): the users' delete step, safe because the bundle verified",
  },
  'install-target': { title: 'install the target version', description: 'apply the target CRDs and operator manifest (operator kept at 0 replicas)' },
  'restore-data': {
    title: 'restore all Calico data from the bundle',
    description: 'IP pools, IPAM, policies, BGP/Felix, Installation (fields the target lacks dropped), under the datastore lock',
  },
  'restore-drift': {
    title: 'restore objects changed since the backup',
    description:
      'write the objects the plan found changed since the backup as the bundle has them (the Installation excepted), under the datastore lock, before the operator resumes',
  },
  'resume-operator': { title: 'resume the tigera operator', description: 'scale the operator Deployment back to the replica count remembered in the journal' },
  'wait-rollout': {
    title: 'wait for the rollout',
    description:
      'operator Deployment available with the target image; TigeraStatus calico Available when the operator reports it; calico-node DaemonSet rolled out; pods in the Calico namespaces Ready',
  },
  'rename-policies-back': {
    title: 'give default-tier policies their pre-3.32 names back',
    description:
      "a downgrade from 3.32+: once the target's kube-controllers replaced 3.32's (whose migrator renames them), every default-tier policy stored under its v3 name <name> is re-created under the name the target looks it up by (default.<name>; 3.29-3.31 leave dotted names as they are) with the same labels, annotations and spec and the old object deleted (uid and resourceVersion as preconditions), read live so one made since the plan is renamed too; the target release can then read, change and delete it by name",
  },
  'verify-data': {
    title: 'verify the Calico data against the bundle',
    description:
      'every IPPool, IPAM object, policy and BGP/Felix object of the bundle is present and unchanged; the Installation differs only by the planned transform and the defaults the target operator writes where a field was unset',
  },
  'reboot-nodes': {
    title: 'reboot the nodes one at a time',
    description:
      "per node: cordon, drain through the Eviction API (PodDisruptionBudgets respected), reboot through its provider, wait for a new boot id and Ready with its DaemonSet pods Ready, uncordon; each node's progress is journaled",
  },
  'migrate-lock-etcd': {
    title: "lock Calico's etcd",
    description:
      "`calicoctl datastore migrate lock` on Calico's etcd (found as calico-node finds it; calico-config's etcd settings remembered in the journal): ClusterInformation default says datastoreReady false, so the CNI plugin gives out no address until the migration ends or is rolled back",
  },
  'migrate-copy': {
    title: 'copy the Calico data into the Kubernetes datastore',
    description:
      '`calicoctl datastore migrate export` from the locked etcd into a private file, then `calicoctl datastore migrate import` into the Kubernetes datastore (calicoctl applies the CRDs and keeps it locked); the file is removed; etcd keeps every key',
  },
  'verify-migrated': {
    title: 'verify the copy against etcd',
    description:
      'every pool, policy, network set, BGP and Felix object in etcd is in the Kubernetes datastore with the same spec (read by calicoctl from both), and every IPAM block allocation, handle and block affinity in etcd is there too, while both stay locked',
  },
  'migrate-unlock': {
    title: 'unlock the Kubernetes datastore',
    description:
      '`calicoctl datastore migrate unlock` on the Kubernetes datastore: pods get addresses again, from the copied IPAM; etcd stays locked (nothing writes to it any more)',
  },
} satisfies Record<string, StepText>;

export type StepKind = keyof typeof STEP_TEXT;

export const STEP_KINDS = Object.keys(STEP_TEXT) as StepKind[];

/** A plan file is input: its step ids are checked against the catalogue before anything runs them. */
export function isStepKind(id: unknown): id is StepKind {
  return typeof id === 'string' && Object.hasOwn(STEP_TEXT, id);
}

/** What differs for a calico.yaml install (no operator, no Installation; the workloads live in kube-system). */
export const MANIFEST_STEP_TEXT: Partial<Record<StepKind, Pick<StepText, 'description'>>> = {
  'apply-crds': {
    description:
      "replace each crd.projectcalico.org CRD of calico.yaml with the target's exactly (create or update), then wait until Established; no CRD is deleted, no operator CRD is added",
  },
  'apply-calico-manifest': {
    description:
      'create or replace the other objects of calico.yaml as released, with the edits of the current calico.yaml the plan found (finding calico-manifest-edits) written in',
  },
  'wait-rollout': {
    description:
      "the calico-node DaemonSet and the calico-kube-controllers Deployment in kube-system carry the target calico.yaml's images and finished their rollout (every pod updated and available); their pods Ready",
  },
  'verify-data': {
    description:
      'every IPPool, IPAM object, policy and BGP/Felix object of the bundle is present and unchanged (fields the target CRDs prune excepted, as the findings say)',
  },
};

/** An upgrade or downgrade of a calico-etcd.yaml install (the etcd datastore stays): no CRDs, its data stays in etcd. */
export const ETCD_STEP_IDS: StepKind[] = ['preflight', 'apply-calico-manifest', 'wait-rollout', 'verify-data'];

/** What the shared steps do for a calico-etcd.yaml install. */
export const ETCD_STEP_TEXT: Partial<Record<StepKind, Partial<StepText>>> = {
  'apply-calico-manifest': {
    title: 'apply the target calico-etcd.yaml',
    description:
      "create or replace the objects of the target's calico-etcd.yaml, with every edit of the current calico-etcd.yaml the plan found written in (its etcd endpoints and certificate paths included, checked again before anything is written); Secret calico-etcd-secrets is never written",
  },
  'wait-rollout': {
    description:
      "the calico-node DaemonSet and the calico-kube-controllers Deployment in kube-system carry the target calico-etcd.yaml's images and finished their rollout (every pod updated and available); their pods Ready",
  },
  'verify-data': {
    description:
      "read Calico's etcd: every pool, policy, network set, BGP and Felix object of the bundle is there unchanged (those already changed when the plan was made excepted), and a restore of the bundle would have no IPAM record to write (every allocation of a pod that still exists is held by its handle; no address is held twice)",
  },
};

/** The datastore migration's steps (etcd to Kubernetes, `plan --migrate-datastore`), in order. */
export const MIGRATE_STEP_IDS: StepKind[] = [
  'preflight',
  'migrate-lock-etcd',
  'migrate-copy',
  'apply-calico-manifest',
  'wait-rollout',
  'verify-migrated',
  'migrate-unlock',
];

/** What the shared steps do in a datastore migration. */
export const MIGRATE_STEP_TEXT: Partial<Record<StepKind, Pick<StepText, 'description'>>> = {
  'apply-calico-manifest': {
    description:
      "replace the objects of calico-etcd.yaml with those of calico.yaml of the same release (the Kubernetes datastore), the install's own edits of calico-etcd.yaml carried over except its etcd settings; Secret calico-etcd-secrets stays",
  },
  'wait-rollout': {
    description:
      'the calico-node DaemonSet and the calico-kube-controllers Deployment in kube-system rolled out with calico.yaml (every pod updated and available)',
  },
};
