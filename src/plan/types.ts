/**
 * The Plan: what `plan` writes and `apply` executes. A YAML/JSON file that records everything apply needs to
 * redo the same thing later: the cluster it was made for, the target release (and its files' checksums), the
 * bundle it relies on, the findings and the steps.
 */
import type { InstallType } from '../calico/detect.js';
import type { Reconciler } from '../calico/gitops.js';
import type { StepKind } from './steps.js';

export const PLAN_API_VERSION = 'cni-rewind.io/v1';
export const PLAN_KIND = 'Plan';

export type Strategy = 'in-place' | 'reinstall';
/** `migrate-datastore`: the same release moved from the etcd datastore to the Kubernetes one (migrate-plan.ts). */
export type PlanStrategy = Strategy | 'migrate-datastore';

/** What the plan does about a finding. */
export type FindingAction = 'transform' | 'refuse' | 'requires-flag' | 'keep' | 'none';

export interface PlanFinding {
  id: string;
  severity: 'error' | 'warning' | 'info';
  title: string;
  /** `Kind/name` or `Kind/namespace/name` of the objects concerned. */
  objects: string[];
  /** Field paths or values concerned, in words. */
  details: string[];
  action: FindingAction;
  /** What the plan does, in one sentence. */
  plan: string;
  /** For `requires-flag`: the flag that allows the plan to go ahead; `satisfied` once given. */
  flag?: string;
  satisfied?: boolean;
}

export interface PreflightCheck {
  name: string;
  ok: boolean;
  detail: string;
  /** A failed blocking check refuses the plan (exit 5); a non-blocking one is a warning. */
  blocking: boolean;
}

export interface PlanStep {
  /** One of the step catalogue's kinds (steps.ts); apply checks a plan file's ids against it. */
  id: StepKind;
  title: string;
  /** What the step does, for people reading the plan. */
  description: string;
}

export interface InstallationTransform {
  /** Field paths removed from Installation `default` because the target CRD does not know them. */
  removeFields: string[];
  /** Keep only the first pool per IP family in `calicoNetwork.ipPools` (the IPPool objects stay). */
  trimPoolsPerFamily: boolean;
  /**
   * CIDRs of `calicoNetwork.ipPools` entries stopped with `disableNewAllocations: true` (3.29+) that get the target
   * operator's own way to stop allocations instead (3.28: `nodeSelector: "!all()"`), since its CRD prunes the field
   * and its operator would otherwise re-enable the pool (calico#9100).
   */
  stopAllocations?: { cidrs: string[]; field: string; value: unknown };
  /**
   * CIDRs of `calicoNetwork.ipPools` entries removed: disabled pools without the operator's label that the target
   * operator (3.28's) would adopt and re-enable, and cannot own in a non-allocating form without rewriting `disabled`.
   * Unlisted, it leaves them alone.
   */
  unlistPools?: { cidrs: string[] };
  /** Operator finalizers on Installation `default` that the target operator does not define and so never removes (downgrades). */
  removeFinalizers?: string[];
  /** TigeraStatus objects only a newer operator writes: deleted so none keeps a stale Degraded (downgrades). */
  deleteTigeraStatuses?: string[];
  /** A newer operator's finalizers on its other custom resources (by CRD name; cluster-scoped kinds), which the target never removes. */
  removeCustomResourceFinalizers?: { crd: string; name: string; finalizer: string }[];
}

/** True when the plan found what a newer operator leaves behind: the plan then has the step remove-operator-leftovers. */
export const hasOperatorLeftovers = (t: InstallationTransform): boolean =>
  !!(t.removeFinalizers?.length || t.deleteTigeraStatuses?.length || t.removeCustomResourceFinalizers?.length);

/**
 * The rolling node step (`--reboot-nodes`): how apply finds each node's provider again (the same settings as
 * `backup`; files by absolute path, never their contents, so no credential lands in the plan) and the nodes in
 * the order they are rebooted, with the machine each resolved to when the plan was made (apply refuses a node
 * that now resolves to another machine).
 */
export interface RollingNodes {
  provider: string;
  providerModules: string[];
  config?: string;
  mapping?: string;
  drainTimeout: string;
  readyTimeout: string;
  nodes: { node: string; provider: string; machine: string }[];
}

/** Container fields compared and carried for a calico.yaml install: dotted paths inside a container. */
export const MANIFEST_CONTAINER_FIELDS = ['command', 'args', 'livenessProbe.exec.command', 'readinessProbe.exec.command'] as const;
export type ContainerField = (typeof MANIFEST_CONTAINER_FIELDS)[number];

/** Edits of a calico.yaml install found by the plan (manifest-custom.ts) and written into the target's objects. */
export interface ManifestTransform {
  /** The release calico.yaml these edits were found against (`vX.Y.Z`). */
  from: string;
  /** calico-node container env of the calico-node DaemonSet: entries written as given (replacing the release's), names removed. */
  calicoNodeEnv: { set: { name: string; value?: string; valueFrom?: unknown }[]; remove: string[] };
  /** calico-config ConfigMap data keys written with the live value. */
  calicoConfig: Record<string, string>;
  /** Image repositories that differ from the release's (same tag): the release's `<registry>/calico/node` -> `registry.local/calico/node`. */
  repositories: Record<string, string>;
  /** Container fields the API server never defaults, edited (e.g. the bird checks removed from the probes for VXLAN): `kind/name` of the workload, container name, field. */
  containerFields?: { workload: string; container: string; field: ContainerField; value: unknown }[];
}

/**
 * A Helm-installed tigera-operator is changed with Helm (plan/helm-strategy.ts): the release as the cluster's Helm
 * record had it when the plan was made (apply checks it again) and what helm does. The helm binary is never named
 * here: apply resolves it from its own command line or PATH.
 */
export interface HelmStrategy {
  release: string;
  namespace: string;
  /** Where Helm keeps the release's records (its HELM_DRIVER): apply runs helm with the same. */
  storage: 'secret' | 'configmap';
  currentRevision: number;
  currentChart?: string;
  /** `upgrade`: `helm upgrade` with `chart` and the release's values; `rollback`: `helm rollback` to `rollbackRevision`. */
  action: 'upgrade' | 'rollback';
  /** The chart reference or path (upgrade); apply must be given the same one again when it is not the default. */
  chart?: string;
  /** A local chart archive's sha256 when the plan was made: apply refuses another file under the same name. */
  chartSha256?: string;
  rollbackRevision?: number;
  /**
   * Upgrade: the values fields helm upgrade is given edited (helm-values.ts: the Installation transform's pool edits,
   * which Helm renders from `installation.calicoNetwork.ipPools`), as the plan shows them; never a value itself.
   */
  valuesEdits?: string[];
}

export const PLAN_SIGNATURE_ALGORITHM = 'HMAC-SHA256';

/** The plan's HMAC (signature.ts). */
export interface PlanSignature {
  algorithm: typeof PLAN_SIGNATURE_ALGORITHM;
  /** Which key signed it (a hash of the key, not the key), so a mismatch can say "another key". */
  keyId: string;
  value: string;
}

export interface Plan {
  apiVersion: typeof PLAN_API_VERSION;
  kind: typeof PLAN_KIND;
  id: string;
  createdAt: string;
  cluster: { uid: string; name: string; server: string };
  current: { installType: InstallType; version?: string; operatorImage?: string };
  target: {
    version: string;
    operatorImage?: string;
    /** The folder or URL the manifests came from (apply reads them again and checks the checksums). */
    manifests: string;
    files: Record<string, { sha256: string }>;
  };
  direction: 'upgrade' | 'downgrade' | 'same';
  strategy: PlanStrategy;
  options: { rebootNodes: boolean; diskSnapshots: boolean; maxBackupAge: string; flags: string[] };
  bundle: { path: string; id: string; manifestSha256: string; createdAt: string };
  preflight: PreflightCheck[];
  findings: PlanFinding[];
  /** `manifest`: edits of a calico.yaml install carried into the target's calico.yaml (absent for operator installs). */
  transforms: { installation: InstallationTransform; manifest?: ManifestTransform };
  /** Calico objects whose content differed from the bundle when the plan was made (`Kind/name`). */
  drift?: string[];
  /** Argo CD applications and Flux objects that reconcile Calico's objects, as judged when the plan was made (gitops.ts). */
  reconcilers?: Reconciler[];
  /** Present for a tigera-operator installed by Helm: the steps change it with helm (helm-strategy.ts). */
  helm?: HelmStrategy;
  /**
   * `etcd` for a calico-etcd.yaml install upgraded or downgraded on the etcd datastore (etcd-plan.ts); absent for the
   * Kubernetes datastore. apply checks it against the cluster's datastore before the steps run.
   */
  datastore?: 'etcd';
  /** Present for `plan --migrate-datastore`: how a rollback puts calico-etcd.yaml back (migrate-plan.ts). */
  migrate?: DatastoreMigration;
  /** Present when the plan reboots nodes (`--reboot-nodes`). */
  rolling?: RollingNodes;
  steps: PlanStep[];
  /** HMAC of everything else, with the user's plan signing key (signature.ts); apply refuses a plan without a matching one. */
  signature?: PlanSignature;
}

/**
 * A move from the etcd datastore to the Kubernetes one. The forward edits are `transforms.manifest` (the install's
 * edits of calico-etcd.yaml that calico.yaml takes: never its etcd settings); `rollback` are all its edits of
 * calico-etcd.yaml (its etcd settings included), which a rollback writes into the release's calico-etcd.yaml.
 */
export interface DatastoreMigration {
  from: 'etcd';
  to: 'kubernetes';
  rollback: ManifestTransform;
}

/** What every plan starts with: its kind, a new id (`plan-<UTC time>-<4 hex>`) and when it was made. */
export function planHeader(now: Date, random: string): Pick<Plan, 'apiVersion' | 'kind' | 'id' | 'createdAt'> {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return { apiVersion: PLAN_API_VERSION, kind: PLAN_KIND, id: `plan-${stamp}-${random}`, createdAt: now.toISOString() };
}
