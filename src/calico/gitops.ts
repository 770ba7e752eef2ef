/**
 * Who reconciles Calico's objects besides its operator (issue 31, item 4): the Argo CD Application or Flux
 * Kustomization/HelmRelease that the marks on the operator Deployment, the Installation and calico-node name
 * (install-method.ts finds the marks), read for real and judged: would it revert a change cni-rewind makes?
 *
 * What upstream says, and what the judgement follows:
 * - Argo CD (docs/user-guide/auto_sync.md, argoproj/argo-cd): without `spec.syncPolicy.automated` an application
 *   syncs only when someone syncs it. With `automated` (and `automated.enabled` not false) it syncs when Git and the
 *   live state differ, but "by default, changes that are made to the live cluster will not trigger automated sync":
 *   it syncs once per commit and parameters, so a change cni-rewind makes stays until the next Git change. Only with
 *   `selfHeal: true` is "the sync attempted again after self-heal timeout (5 seconds by default)": it reverts apply.
 *   An application an ApplicationSet generates ignores changes to its own `syncPolicy.automated` (the same page):
 *   the ApplicationSet is what must be changed.
 * - Flux: the kustomize-controller runs a server-side apply every `spec.interval` and corrects drift (its README:
 *   "detects drift ... corrects drift by patching objects with Kubernetes server-side apply"); the helm-controller
 *   upgrades the release on every chart or values change and corrects drift with `spec.driftDetection.mode: enabled`.
 *   `flux suspend` sets `spec.suspend: true`, the one switch that stops both (fluxcd.io, flux suspend kustomization).
 */
import { RefusedError } from '../core/errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { CalicoObjects } from './calico-objects.js';
import { argoAppRef, INSTALLATION_TYPE, installMethod, type GitOpsOwner, type InstallMethod } from './install-method.js';
import { OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE } from './knowledge.js';

/**
 * - `self-healing`: reverts a live change within seconds or minutes (Argo CD selfHeal, Flux not suspended);
 * - `syncs-on-git-change`: Argo CD automated sync without selfHeal, keeps a live change until the next commit;
 * - `manual`: Argo CD without automated sync; `suspended`: Flux `spec.suspend: true`;
 * - `unknown`: the object could not be read (no CRD, not found, forbidden).
 */
export type ReconcilerState = 'self-healing' | 'syncs-on-git-change' | 'manual' | 'suspended' | 'unknown';

export interface Reconciler {
  tool: GitOpsOwner['tool'];
  kind: GitOpsOwner['ref']['kind'];
  namespace: string;
  name: string;
  /** The objects carrying its marks, `Kind/namespace/name`. */
  objects: string[];
  state: ReconcilerState;
  /** One line: the field that decided, or why it could not be read. */
  reason: string;
  /** The exact command that stops it reverting a change. */
  suspendCommand: string;
  /** apply refuses without --owner-suspended: it would revert the change, or nobody can tell. */
  blocksApply: boolean;
}

/** Argo CD's own namespace in its install manifests; an application elsewhere is named `<namespace>_<name>` in marks. */
export const ARGOCD_NAMESPACE = 'argocd';
/** Where `flux bootstrap` puts Flux and its Kustomizations. */
export const FLUX_NAMESPACE = 'flux-system';

/** Served versions, newest first: Argo CD's Application has one; Flux's went v1beta2 -> v1 (2.0) and v2beta1 -> v2 (2.3). */
const RESOURCES: Record<Reconciler['kind'], { group: string; plural: string; versions: string[] }> = {
  Application: { group: 'argoproj.io', plural: 'applications', versions: ['v1alpha1'] },
  Kustomization: { group: 'kustomize.toolkit.fluxcd.io', plural: 'kustomizations', versions: ['v1', 'v1beta2'] },
  HelmRelease: { group: 'helm.toolkit.fluxcd.io', plural: 'helmreleases', versions: ['v2', 'v2beta2', 'v2beta1'] },
};

export function resourceTypeOf(kind: Reconciler['kind'], version = RESOURCES[kind].versions[0]!): ResourceType {
  const r = RESOURCES[kind];
  return { group: r.group, version, plural: r.plural, kind, namespaced: true };
}

/** Argo CD's verdict from the Application's sync policy (auto_sync.md, quoted at the top). */
export function argoState(app: KubeObject): { state: ReconcilerState; reason: string } {
  const automated = app.spec?.syncPolicy?.automated;
  if (!automated) return { state: 'manual', reason: 'no automated sync (spec.syncPolicy.automated unset): it syncs only when someone syncs it' };
  if (automated.enabled === false) return { state: 'manual', reason: 'automated sync switched off (spec.syncPolicy.automated.enabled: false)' };
  if (automated.selfHeal === true) return { state: 'self-healing', reason: 'automated sync with selfHeal: it reverts live changes within seconds' };
  return {
    state: 'syncs-on-git-change',
    reason: 'automated sync without selfHeal: live changes stay until its next Git change, which syncs its manifests over them',
  };
}

/** Flux's verdict: `spec.suspend` is what `flux suspend` sets; anything else reconciles every interval. */
export function fluxState(obj: KubeObject, kind: 'Kustomization' | 'HelmRelease'): { state: ReconcilerState; reason: string } {
  if (obj.spec?.suspend === true) return { state: 'suspended', reason: 'suspended (spec.suspend: true)' };
  const every = typeof obj.spec?.interval === 'string' ? ` every ${obj.spec.interval}` : '';
  if (kind === 'Kustomization') return { state: 'self-healing', reason: `reconciles${every} and corrects drift by server-side apply (spec.suspend not set)` };
  const drift = obj.spec?.driftDetection?.mode === 'enabled' ? ' and corrects drift (driftDetection.mode: enabled)' : '';
  return { state: 'self-healing', reason: `reconciles${every}, upgrades the release on any chart or values change${drift} (spec.suspend not set)` };
}

function suspendCommand(kind: Reconciler['kind'], namespace: string, name: string, qualified: boolean, appSet?: string): string {
  if (kind === 'Application') {
    if (appSet)
      return `remove syncPolicy.automated from the template of ApplicationSet ${namespace}/${appSet} (argocd app set has no effect on its applications)`;
    return `argocd app set ${qualified ? `${namespace}/${name}` : name} --sync-policy none`;
  }
  return `flux suspend ${kind.toLowerCase()} ${name} -n ${namespace}`;
}

/** The state an object gives, or undefined when it was not found at any served version. */
async function readObject(client: KubeClient, kind: Reconciler['kind'], namespace: string, name: string): Promise<KubeObject | undefined> {
  for (const version of RESOURCES[kind].versions) {
    const obj = await client.getOrUndefined(resourceTypeOf(kind, version), namespace, name);
    if (obj) return obj;
  }
  return undefined;
}

async function crdExists(client: KubeClient, kind: Reconciler['kind']): Promise<boolean> {
  const r = RESOURCES[kind];
  try {
    return !!(await client.getOrUndefined(K.crd, undefined, `${r.plural}.${r.group}`));
  } catch {
    return true; // CRDs not readable: say "not found", not "not installed"
  }
}

/** One owner read and judged; a candidate (Argo CD's plain instance label) is dropped when its Application is not found. */
async function judge(
  client: KubeClient,
  ref: GitOpsOwner['ref'],
  tool: GitOpsOwner['tool'],
  objects: string[],
  candidate: boolean,
): Promise<Reconciler | undefined> {
  const namespace = ref.namespace ?? (ref.kind === 'Application' ? ARGOCD_NAMESPACE : FLUX_NAMESPACE);
  const base = { tool, kind: ref.kind, namespace, name: ref.name, objects };
  const qualified = ref.kind === 'Application' && ref.namespace !== undefined;
  const unknown = (reason: string): Reconciler => ({
    ...base,
    state: 'unknown',
    reason,
    suspendCommand: suspendCommand(ref.kind, namespace, ref.name, qualified),
    blocksApply: true,
  });
  let obj: KubeObject | undefined;
  try {
    obj = await readObject(client, ref.kind, namespace, ref.name);
  } catch (err) {
    if (candidate) return undefined;
    const forbidden = err instanceof KubeApiError && err.statusCode === 403;
    return unknown(
      forbidden
        ? `not allowed to read ${ref.kind} ${namespace}/${ref.name} (get on ${RESOURCES[ref.kind].plural}.${RESOURCES[ref.kind].group})`
        : `${ref.kind} ${namespace}/${ref.name} could not be read: ${(err as Error).message}`,
    );
  }
  if (!obj) {
    if (candidate) return undefined;
    if (!(await crdExists(client, ref.kind)))
      return unknown(`no ${ref.kind} CRD in this cluster: ${tool} may run in another cluster and manage this one from there`);
    return unknown(`${ref.kind} ${namespace}/${ref.name} not found`);
  }
  const appSet: string | undefined = obj.metadata.ownerReferences?.find((o: { kind: string }) => o.kind === 'ApplicationSet')?.name;
  const verdict = ref.kind === 'Application' ? argoState(obj) : fluxState(obj, ref.kind);
  return {
    ...base,
    ...verdict,
    suspendCommand: suspendCommand(ref.kind, namespace, ref.name, qualified, appSet),
    blocksApply: verdict.state === 'self-healing',
  };
}

/**
 * Argo CD's default tracking label (resource_tracking.md): `app.kubernetes.io/instance`. Helm charts set it too, so it
 * names an owner only when an Application of that name exists.
 */
const ARGO_DEFAULT_LABEL = 'app.kubernetes.io/instance';

/** Every owner the marks name, read and judged; objects sharing an owner are listed together. */
export async function judgeOwners(client: KubeClient, owners: GitOpsOwner[], marked: (KubeObject | undefined)[] = []): Promise<Reconciler[]> {
  const byKey = new Map<string, { owner: GitOpsOwner; objects: string[]; candidate: boolean }>();
  const add = (owner: GitOpsOwner, candidate: boolean) => {
    const key = `${owner.ref.kind}/${owner.ref.namespace ?? ''}/${owner.ref.name}`;
    const seen = byKey.get(key);
    if (seen) {
      if (!seen.objects.includes(owner.object)) seen.objects.push(owner.object);
      seen.candidate &&= candidate;
    } else byKey.set(key, { owner, objects: [owner.object], candidate });
  };
  for (const o of owners) add(o, false);
  for (const obj of marked) {
    const app = obj?.metadata.labels?.[ARGO_DEFAULT_LABEL];
    if (!obj || !app) continue;
    const object = obj.metadata.namespace ? `${obj.kind}/${obj.metadata.namespace}/${obj.metadata.name}` : `${obj.kind}/${obj.metadata.name}`;
    add({ tool: 'Argo CD', name: `application ${app}`, object, ref: argoAppRef(app) }, true);
  }
  const judged = await Promise.all([...byKey.values()].map((e) => judge(client, e.owner.ref, e.owner.tool, e.objects, e.candidate)));
  return judged.filter((r): r is Reconciler => !!r);
}

async function getQuiet(client: KubeClient, r: ResourceType, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
  try {
    const obj = await client.getOrUndefined(r, namespace, name);
    return obj && { ...obj, kind: r.kind };
  } catch {
    return undefined; // not readable: that object's marks stay unknown, as status shows them
  }
}

/** The objects that carry the marks: the operator Deployment, the Installation and calico-node. */
export interface MarkedObjects {
  operator?: KubeObject;
  installation?: KubeObject;
  calicoNode?: KubeObject;
}

/** The marked objects among those a command already read (calico-objects.ts): apply and plan read them once. */
export function markedObjects(objs: CalicoObjects): MarkedObjects {
  return { operator: objs.operator, installation: objs.installation, calicoNode: objs.calicoNodeSystem ?? objs.calicoNodeKube };
}

/** The marked objects, read here for doctor. */
export async function readMarkedObjects(client: KubeClient): Promise<MarkedObjects> {
  const [operator, installation, nodeSystem, nodeKube] = await Promise.all([
    getQuiet(client, K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT),
    getQuiet(client, INSTALLATION_TYPE, undefined, 'default'),
    getQuiet(client, K.daemonSet, 'calico-system', 'calico-node'),
    getQuiet(client, K.daemonSet, 'kube-system', 'calico-node'),
  ]);
  return { operator, installation, calicoNode: nodeSystem ?? nodeKube };
}

/** Who reconciles Calico here, from marked objects already read (their owners are read and judged now). */
export async function judgeReconcilers(client: KubeClient, marked: MarkedObjects, method?: InstallMethod): Promise<Reconciler[]> {
  const owners = (method ?? installMethod(marked)).gitOps;
  return judgeOwners(client, owners, [marked.operator, marked.installation, marked.calicoNode]);
}

/** Who reconciles Calico here, from the cluster: marks read, owners read and judged. */
export async function readReconcilers(client: KubeClient): Promise<Reconciler[]> {
  return judgeReconcilers(client, await readMarkedObjects(client));
}

/** One line per owner, as doctor, plan and apply say it. */
export function describeReconciler(r: Reconciler): string {
  return `${r.tool} ${r.kind} ${r.namespace}/${r.name} (on ${r.objects.join(', ')}): ${r.state === 'unknown' ? `unknown, ${r.reason}` : r.reason}`;
}

/**
 * apply's refusal (exit 5) while an owner would revert the change mid-plan, or nobody can tell; with
 * `ownerSuspended` (the user's word, `--owner-suspended`) the blocking owners are returned for one warning instead.
 */
export function refuseReconcilers(reconcilers: Reconciler[], ownerSuspended: boolean): Reconciler[] {
  const blocking = reconcilers.filter((r) => r.blocksApply);
  if (!blocking.length || ownerSuspended) return blocking;
  const first = blocking[0]!;
  const what = blocking.map(describeReconciler).join('; ');
  const it = blocking.length > 1 ? 'they' : 'it';
  throw new RefusedError(`${what}: ${it} would revert the plan's changes while they run, so the plan was not applied`, {
    hint: `suspend ${blocking.length > 1 ? 'them' : 'it'} first: ${blocking.map((r) => r.suspendCommand).join(' and ')}; then rerun with --owner-suspended${
      first.state === 'unknown' ? ' (or pass --owner-suspended once you know it does not reconcile these objects)' : ''
    }`,
  });
}
