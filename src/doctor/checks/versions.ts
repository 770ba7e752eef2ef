/** Version skew between Calico's parts, and CRD schemas newer than the running operator (a half-done downgrade). */
import {
  calicoMinorForOperator,
  calicoVersionForOperator,
  CRD_SCHEMA_MARKERS,
  imageTag,
  normalizeVersion,
  OPERATOR_DEPLOYMENT,
} from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';
import { KEYS, objectsOf, workload, type CalicoState } from '../state.js';
import type { Check, Finding } from '../types.js';

const minor = (v: string) => normalizeVersion(v).split('.').slice(0, 2).join('.');

/** Calico version the running operator belongs to: exact when the image is a known release, else `vX.Y` of its series. */
export function operatorCalicoVersion(state: CalicoState): { version: string; exact: boolean; image: string } | undefined {
  const image = workload(state, OPERATOR_DEPLOYMENT)?.image;
  const tag = imageTag(image);
  if (!image || !tag) return undefined;
  const exact = calicoVersionForOperator(tag);
  if (exact) return { version: exact, exact: true, image };
  const m = calicoMinorForOperator(tag);
  return m ? { version: `${m}.0`, exact: false, image } : undefined;
}

/** The version the install runs: the operator's for an operator install, calico-node's otherwise. */
export function installedCalicoVersion(state: CalicoState): string | undefined {
  const op = operatorCalicoVersion(state);
  if (op) return op.version;
  const tag = imageTag(workload(state, 'calico-node')?.image);
  return tag && /^v?\d+\.\d+\.\d+/.test(tag) ? normalizeVersion(tag) : undefined;
}

const versionSkew: Check = {
  name: 'version skew',
  run(state) {
    const seen: { what: string; version: string; exact: boolean; obj: string }[] = [];
    const op = operatorCalicoVersion(state);
    if (op) seen.push({ what: `operator ${op.image}`, version: op.version, exact: op.exact, obj: `Deployment/tigera-operator/${OPERATOR_DEPLOYMENT}` });
    const ci = objectsOf(state, KEYS.clusterInformations).find((o) => o.metadata.name === 'default');
    const civ: string | undefined = ci?.spec?.calicoVersion;
    if (civ && /^v?\d+\.\d+\.\d+/.test(civ))
      seen.push({ what: 'ClusterInformation default calicoVersion', version: normalizeVersion(civ), exact: true, obj: 'ClusterInformation/default' });
    const node = workload(state, 'calico-node');
    const nodeTag = imageTag(node?.image);
    if (node && nodeTag && /^v?\d+\.\d+\.\d+/.test(nodeTag))
      seen.push({ what: `calico-node ${node.image}`, version: normalizeVersion(nodeTag), exact: true, obj: `DaemonSet/${node.namespace}/calico-node` });
    if (seen.length < 2) return [];
    // Compare exactly where both sides are exact, by minor otherwise (an unknown operator patch only tells its series).
    const differ = seen.some((a) => seen.some((b) => (a.exact && b.exact ? a.version !== b.version : minor(a.version) !== minor(b.version))));
    if (!differ) return [];
    const minorsDiffer = new Set(seen.map((s) => minor(s.version))).size > 1;
    return [
      {
        id: 'version-skew',
        severity: minorsDiffer ? 'error' : 'warning',
        title: `Calico parts disagree on the version: ${seen.map((s) => `${s.what} = ${s.version}${s.exact ? '' : ' series'}`).join('; ')}`,
        objects: seen.map((s) => s.obj),
        why:
          'The operator, the calico-node DaemonSet and ClusterInformation (written by calico-node) should name one release. ' +
          'A difference that lasts means an upgrade or downgrade stopped half way: components of two releases share one datastore ' +
          (minorsDiffer ? 'across a minor version, which Calico does not support.' : '(a patch difference, usually harmless while a rollout finishes).'),
        fix:
          "Finish the change to one release: apply that release's manifests (operator install: tigera-operator.yaml server-side with " +
          '--force-conflicts, then custom-resources; manifest install: calico.yaml), or let cni-rewind do it: cni-rewind plan --to <version>, then cni-rewind apply <plan>. ' +
          'Wait until calico-node is Ready everywhere and ClusterInformation shows the new version.',
      },
    ];
  },
};

/** Does the schema of this CRD contain the marker path (`spec.a.b[].c`)? */
export function schemaHasPath(crd: KubeObject, markerPath: string): boolean {
  const versions: any[] = crd.spec?.versions ?? [];
  return versions.some((v) => {
    let s = v.schema?.openAPIV3Schema;
    for (const part of markerPath.split('.')) {
      const isArray = part.endsWith('[]');
      s = s?.properties?.[isArray ? part.slice(0, -2) : part];
      if (isArray) s = s?.items;
      if (!s) return false;
    }
    return true;
  });
}

/** The newest Calico minor whose schema markers the installed CRDs carry. */
export function crdSchemaMinor(crds: KubeObject[]): { since: string; evidence: string } | undefined {
  let best: { since: string; evidence: string } | undefined;
  for (const m of CRD_SCHEMA_MARKERS) {
    const crd = crds.find((c) => c.spec?.names?.kind === m.kind);
    if (!crd || !schemaHasPath(crd, m.path)) continue;
    if (!best || Number(m.since.split('.')[1]) > Number(best.since.split('.')[1])) best = { since: m.since, evidence: `${m.kind} ${m.path}` };
  }
  return best;
}

const crdsNewerThanOperator: Check = {
  name: 'CRDs newer than the running operator',
  run(state) {
    const running = installedCalicoVersion(state);
    const crdMinor = crdSchemaMinor(state.crds);
    if (!running || !crdMinor) return [];
    const runMinor = Number(minor(running).split('.')[1]);
    if (Number(crdMinor.since.split('.')[1]) <= runMinor) return [];
    const op = operatorCalicoVersion(state);
    const who = op ? `the running operator ${op.image} (Calico ${op.version}${op.exact ? '' : ' series'})` : `calico-node ${running}`;
    return [
      {
        id: 'crds-newer-than-operator',
        severity: 'error',
        title: `Calico CRDs are from ${crdMinor.since} or later, but ${who} is older`,
        objects: state.crds
          .filter((c) => CRD_SCHEMA_MARKERS.some((m) => m.kind === c.spec?.names?.kind && Number(m.since.split('.')[1]) > runMinor && schemaHasPath(c, m.path)))
          .map((c) => `CustomResourceDefinition/${c.metadata.name}`),
        why:
          `The CRD schemas carry ${crdMinor.evidence}, a field Calico ${crdMinor.since} introduced. An older operator neither knows nor ` +
          'maintains these fields; objects written under the newer schema keep values the running version cannot read, and a later ' +
          'write with the older schema prunes or rejects them. This is the state a half-done downgrade leaves (operator replaced, CRDs not).',
        fix:
          `Apply the CRDs of the running release in place, never by deleting them (deleting a CRD deletes every object in it): ` +
          `kubectl replace -f <the ${running} operator-crds.yaml> (kubectl create -f for any CRD it says is missing). Not kubectl apply: ` +
          'an apply keeps the fields of the newer schema that another field manager wrote (kubectl create, the operator), which leaves a merged schema; ' +
          `a replace writes the older CRD exactly. Or run cni-rewind plan --to ${running} and apply it (it replaces the CRDs exactly). ` +
          `Check first with cni-rewind doctor --target ${running} which objects the older schema would prune.`,
      },
    ];
  },
};

export const versionChecks: Check[] = [versionSkew, crdsNewerThanOperator];
export type { Finding };
