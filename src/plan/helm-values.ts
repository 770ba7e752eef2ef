/**
 * The plan's Installation transform carried into a Helm release's values (issue 31): on a Helm install the chart
 * renders Installation `default` from the values (charts/tigera-operator/templates/crs/custom-resources.yaml of
 * Calico 3.27.4, 3.28.1 and 3.29.7 alike: `spec` is `.Values.installation` without `enabled`, plus imagePullSecrets
 * and kubeletVolumePluginPath), so a pool entry rewritten behind Helm's back would be undone by the next helm upgrade
 * and `helm get values` would not tell the truth. The pool edits (stop allocations the target operator's way, one
 * pool per family) go into `installation.calicoNetwork.ipPools` of the values helm upgrade is given instead.
 *
 * Values without ipPools (the chart's values.yaml has none): the operator filled the Installation's entries in
 * itself (v1.32 writes its default pool into the spec; a Helm 3 three-way merge or a Helm 4 apply of a manifest
 * without the field leaves them there), and the target operator reconciles pools from those entries (calico#9100).
 * A list cannot be edited in part, so the Installation's own entries, edited, become the values' list: the values
 * then say what the Installation holds, and no later helm upgrade can bring the stopped entry back enabled.
 *
 * Pure: values in, values out; the values are never part of a message (they may hold secrets), the CIDRs are.
 */
import { RefusedError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import type { InstallationTransform } from './types.js';

/** The values path the chart renders the Installation's pool entries from. */
export const HELM_POOLS_PATH = 'installation.calicoNetwork.ipPools';

type Values = Record<string, unknown>;
const isObject = (v: unknown): v is Values => typeof v === 'object' && v !== null && !Array.isArray(v);
const family = (p: any) => (String(p?.cidr ?? '').includes(':') ? '6' : '4');

/** True when the transform rewrites pool entries: then a Helm plan carries it in the values. */
export const editsPools = (t: InstallationTransform): boolean => !!(t.trimPoolsPerFamily || t.stopAllocations?.cidrs.length || t.unlistPools?.cidrs.length);

/** The edits as the plan shows them: which values fields change, and for which pools (never a value of the user's). */
export function plannedValuesEdits(t: InstallationTransform): string[] {
  if (!editsPools(t)) return [];
  const s = t.stopAllocations;
  return [
    ...(s?.cidrs.length ? [`${HELM_POOLS_PATH}[cidr ${s.cidrs.join(', ')}].${s.field}: ${JSON.stringify(s.value)}`] : []),
    ...(t.trimPoolsPerFamily ? [`${HELM_POOLS_PATH}: the first pool per IP family kept`] : []),
    ...(t.unlistPools?.cidrs.length ? [`${HELM_POOLS_PATH}[cidr ${t.unlistPools.cidrs.join(', ')}]: entry removed`] : []),
  ];
}

/** Fields of pool entries the transform removes (the target CRD lacks them): `spec.calicoNetwork.ipPools[0].x` -> `x`. */
function entryFieldsRemoved(t: InstallationTransform): Set<string> {
  const out = new Set<string>();
  for (const p of t.removeFields) {
    const m = /^spec\.calicoNetwork\.ipPools(?:\[\d*\])?\.([^.[\]]+)$/.exec(p);
    if (m) out.add(m[1]!);
  }
  return out;
}

export interface EditedValues {
  values: Values;
  /** What changed, as the step reports it (CIDRs and field names, no values). Empty when nothing did. */
  edits: string[];
  /** Where the edited list came from: the values' own ipPools, or Installation default's entries (the values had none). */
  source: 'values' | 'installation';
}

/**
 * `values` (`helm get values`, the user's own) with the transform's pool edits made in `installation.calicoNetwork.
 * ipPools`, the rest untouched. `installation`: the live Installation `default`, whose entries are used when the
 * values have none. Idempotent: edited values edit to themselves (a resumed apply computes the same file).
 * Undefined when the transform has no pool edits. Refuses (exit 5) values the chart renders no Installation from.
 */
export function editHelmValues(values: unknown, installation: KubeObject | undefined, t: InstallationTransform): EditedValues | undefined {
  if (!editsPools(t)) return undefined;
  if (values !== null && values !== undefined && !isObject(values)) throw new RefusedError("the release's values are not a map of values");
  const out: Values = structuredClone(values ?? {}) as Values;
  const inst = out.installation;
  if (inst !== undefined && inst !== null && !isObject(inst)) throw new RefusedError("the release's value installation is not a map");
  if (isObject(inst) && inst.enabled === false) {
    throw new RefusedError(
      "the release's values turn the chart's Installation off (installation.enabled: false), so its pool entries are not Helm's to edit; the plan's pool edits have no values to go into",
      { hint: 'edit Installation default the plan names by hand first, then make a new plan' },
    );
  }
  const net = isObject(inst) ? inst.calicoNetwork : undefined;
  if (net !== undefined && net !== null && !isObject(net)) throw new RefusedError("the release's value installation.calicoNetwork is not a map");
  const own = isObject(net) ? net.ipPools : undefined;
  const source = Array.isArray(own) ? 'values' : 'installation';
  const live = installation?.spec?.calicoNetwork?.ipPools;
  const entries: any[] = structuredClone(Array.isArray(own) ? own : Array.isArray(live) ? live : []);
  // Only unlisting, on values that list nothing (an apply resumed after the edit emptied them): nothing to do.
  const onlyUnlists = !t.trimPoolsPerFamily && !t.stopAllocations?.cidrs.length;
  if (!entries.length && !(onlyUnlists && source === 'values')) {
    throw new RefusedError(
      `the plan edits pool entries, and neither the release's values (${HELM_POOLS_PATH}) nor Installation default have any: the cluster changed since the plan`,
      { hint: 'make a new plan with `cni-rewind plan`' },
    );
  }
  const edits: string[] = [];
  const s = t.stopAllocations;
  const missing = s?.cidrs.filter((c) => !entries.some((e) => isObject(e) && String(e.cidr) === c)) ?? [];
  if (missing.length) {
    throw new RefusedError(
      `the plan stops allocations from ${missing.join(', ')}, which ${source === 'values' ? `the release's ${HELM_POOLS_PATH}` : 'Installation default'} does not list: the cluster changed since the plan`,
      {
        hint: 'make a new plan with `cni-rewind plan`',
      },
    );
  }
  const removed = entryFieldsRemoved(t);
  for (const e of entries) {
    if (!isObject(e)) continue;
    if (s && s.cidrs.includes(String(e.cidr)) && JSON.stringify(e[s.field]) !== JSON.stringify(s.value)) {
      e[s.field] = s.value;
      edits.push(`${e.cidr}: ${s.field} ${JSON.stringify(s.value)}`);
    }
    // As transform-installation does on the live object: fields the target CRD lacks would only be pruned from the
    // rendered Installation, and the values would keep saying them.
    for (const f of removed) {
      if (f in e) {
        delete e[f];
        edits.push(`${e.cidr}: ${f} removed (unknown to the target)`);
      }
    }
  }
  let kept = entries;
  if (t.trimPoolsPerFamily) {
    const seen = new Set<string>();
    kept = entries.filter((e) => {
      const f = family(e);
      if (seen.has(f)) {
        edits.push(`${e?.cidr}: entry dropped (one pool per family)`);
        return false;
      }
      seen.add(f);
      return true;
    });
  }
  if (t.unlistPools?.cidrs.length) {
    kept = kept.filter((e) => {
      if (!t.unlistPools!.cidrs.includes(String(e?.cidr))) return true;
      edits.push(`${e?.cidr}: entry removed`);
      return false;
    });
  }
  if (source === 'installation') edits.unshift(`${HELM_POOLS_PATH} written from Installation default's ${entries.length} entries (the values had none)`);
  out.installation = { ...(isObject(inst) ? inst : {}), calicoNetwork: { ...(isObject(net) ? net : {}), ipPools: kept } };
  return { values: out, edits, source };
}
