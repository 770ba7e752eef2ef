/**
 * Keeping Calico from fighting a restore, and always putting things back:
 * - the tigera-operator Deployment is scaled to 0 (it would re-create, rewrite or delete pools and
 *   Installation-derived objects while we write them) and returned to its prior replica count;
 * - ClusterInformation default .spec.datastoreReady=false is held while pools and IPAM are written (what
 *   `calicoctl datastore migrate lock` does) and returned to its prior value (true when it was unset).
 *   While it is held every CNI ADD/DEL fails and Felix restarts on every node: keep it short.
 * The prior values are also recorded in an annotation on the object, so a restore interrupted hard
 * (SIGKILL, lost connection) can be finished by the next run, which reads them back.
 */
import { OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE } from '../calico/knowledge.js';
import { errorMessage } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { CLUSTER_INFORMATION } from './order.js';

export const PRIOR_REPLICAS_ANNOTATION = 'cni-rewind.io/restore-prior-replicas';
export const PRIOR_DATASTORE_READY_ANNOTATION = 'cni-rewind.io/restore-prior-datastore-ready';

export interface Release {
  /** What was changed, in words (for the result). */
  what: string;
  release(): Promise<void>;
}

/** The operator's pause: `wasRunning` is false when it was already at 0 replicas (apply stops it before a restore step). */
export interface OperatorPause extends Release {
  wasRunning: boolean;
}

/** Scale the operator to 0. Returns undefined when there is no operator Deployment (manifest install, or deleted). */
export async function pauseOperator(client: KubeClient, reporter: Reporter): Promise<OperatorPause | undefined> {
  const dep = await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
  if (!dep) return undefined;
  const recorded = dep.metadata.annotations?.[PRIOR_REPLICAS_ANNOTATION];
  // A previous run that died while the operator was paused left the real prior count in the annotation.
  const prior = recorded !== undefined && Number.isInteger(Number(recorded)) ? Number(recorded) : ((dep.spec?.replicas as number | undefined) ?? 1);
  await client.mergePatch(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT, {
    metadata: { annotations: { [PRIOR_REPLICAS_ANNOTATION]: String(prior) } },
    spec: { replicas: 0 },
  });
  reporter.info('CNR_RESTORE_OPERATOR_PAUSED', `paused the tigera operator (replicas ${prior} -> 0) so it does not rewrite what is being restored`, { prior });
  const release: OperatorPause = {
    what: `tigera-operator replicas ${prior}`,
    wasRunning: prior > 0,
    async release() {
      await client.mergePatch(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT, {
        metadata: { annotations: { [PRIOR_REPLICAS_ANNOTATION]: null } },
        spec: { replicas: prior },
      });
      reporter.info('CNR_RESTORE_OPERATOR_RESUMED', `tigera operator back to ${prior} replica(s)`, { replicas: prior });
    },
  };
  try {
    await waitForOperatorPodsGone(client, dep);
  } catch (err) {
    await release.release().catch(() => undefined);
    throw err;
  }
  return release;
}

/** How long a paused operator's pod may take to go (its terminationGracePeriodSeconds is 60 in the manifests). */
const OPERATOR_STOP_TIMEOUT_MS = 120_000;

/**
 * Scaling the operator to 0 only asks: its pod keeps running (and reconciling: rewriting pools, re-creating the
 * TigeraStatus objects a step just deleted) until its container has exited, while the Deployment already reports 0
 * replicas once the pod is terminating. Wait until no pod of the Deployment is left.
 */
export async function waitForOperatorPodsGone(client: KubeClient, dep: KubeObject): Promise<void> {
  const selector = Object.entries<string>(dep.spec?.selector?.matchLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  if (!selector) return;
  await client.waitFor(
    'the tigera operator pod to be gone',
    async () => ((await client.listAll(K.pod, { namespace: OPERATOR_NAMESPACE, labelSelector: selector })).length === 0 ? true : undefined),
    { timeoutMs: OPERATOR_STOP_TIMEOUT_MS, intervalMs: 500 },
  );
}

/**
 * Set datastoreReady=false on ClusterInformation default. `priorOverride` is the value from before the restore
 * began (the restore may have re-created the object from the bundle since). Undefined when there is no
 * ClusterInformation to lock.
 */
export async function lockDatastore(client: KubeClient, type: ResourceType, reporter: Reporter, priorOverride?: boolean): Promise<Release | undefined> {
  const ci = await client.getOrUndefined(type, undefined, CLUSTER_INFORMATION.name);
  if (!ci) {
    reporter.warn('CNR_RESTORE_NO_DATASTORE_LOCK', 'ClusterInformation default does not exist: IPAM is written without the datastore lock');
    return undefined;
  }
  const recorded = recordedPrior(ci);
  const prior: boolean | undefined = recorded ? recorded.value : (priorOverride ?? (ci.spec?.datastoreReady as boolean | undefined));
  await client.mergePatch(type, undefined, CLUSTER_INFORMATION.name, {
    metadata: { annotations: { [PRIOR_DATASTORE_READY_ANNOTATION]: prior === undefined ? 'unset' : String(prior) } },
    spec: { datastoreReady: false },
  });
  reporter.info('CNR_RESTORE_DATASTORE_LOCKED', 'ClusterInformation default: datastoreReady=false while pools and IPAM are written', { prior });
  return {
    what: `ClusterInformation datastoreReady ${prior === undefined ? 'unset' : prior}`,
    async release() {
      await client.mergePatch(type, undefined, CLUSTER_INFORMATION.name, {
        metadata: { annotations: { [PRIOR_DATASTORE_READY_ANNOTATION]: null } },
        // Never back to unset: Calico's CNI plugin dereferences spec.datastoreReady without a nil check, so an unset
        // value fails every pod network setup until calico-node rewrites it. A prior false (another tool's lock) stays.
        spec: { datastoreReady: prior ?? true },
      });
      reporter.info('CNR_RESTORE_DATASTORE_RELEASED', `ClusterInformation default: datastoreReady back to ${prior ?? true}`, { datastoreReady: prior ?? true });
    },
  };
}

/** The prior datastoreReady a restore recorded on ClusterInformation default when it locked it (undefined: none recorded). */
export function recordedPrior(ci: KubeObject | undefined): { value: boolean | undefined } | undefined {
  const recorded = ci?.metadata.annotations?.[PRIOR_DATASTORE_READY_ANNOTATION];
  if (recorded === 'true' || recorded === 'false') return { value: recorded === 'true' };
  return recorded === 'unset' ? { value: undefined } : undefined;
}

/** Release in reverse order; a failing release is reported (with what to do by hand) and does not stop the others. */
export async function releaseAll(releases: Release[], reporter: Reporter): Promise<string[]> {
  const problems: string[] = [];
  for (const r of [...releases].reverse()) {
    try {
      await r.release();
    } catch (err) {
      const msg = `could not put back ${r.what}: ${errorMessage(err)}`;
      problems.push(msg);
      reporter.error('CNR_RESTORE_RELEASE_FAILED', `${msg} (set it by hand)`);
    }
  }
  return problems;
}
