/**
 * Calico facts the planner relies on, as data (see docs/calico-differences.md). Kept beside the
 * planner because nothing else uses them; move them to calico/knowledge.ts if another module needs them.
 */

/** Operator constraints on `Installation.spec.calicoNetwork.ipPools`, by the first Calico version they no longer apply to. */
export const INSTALLATION_POOL_RULES = [
  {
    /** Operator v1.32 (Calico 3.27) accepts at most one pool per IP family in the Installation. */
    until: 'v3.28.0',
    maxPoolsPerFamily: 1,
  },
] as const;

/** Calico kinds whose live objects are runtime state, not data the plan must preserve. */
export const RUNTIME_KINDS = new Set(['TigeraStatus', 'CalicoNodeStatus', 'ClusterInformation']);

/** Namespaces where the target's pods run (checked Ready by the rollout wait). */
export const CALICO_POD_NAMESPACES = { operator: ['tigera-operator', 'calico-system'], manifest: ['kube-system'] } as const;
/** A manifest install's pods in kube-system (calico.yaml and calico-typha.yaml label them k8s-app); the namespace holds other pods too. */
export const MANIFEST_POD_SELECTOR = 'k8s-app in (calico-node,calico-kube-controllers,calico-typha)';

/** Flags that allow a plan finding of action `requires-flag`. */
export const PLAN_FLAGS = {
  dropFields: 'allow-field-loss',
  trimPools: 'trim-installation-pools',
  /** Put Calico objects that changed since the backup back as the bundle has them (e.g. a pool the 3.28 operator re-enabled). */
  restoreDrift: 'restore-drift',
} as const;
