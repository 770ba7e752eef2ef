/**
 * Schema-aware findings: what the target release's CRDs and operator would do to the objects in the cluster now.
 * Pure functions over (live CRDs, live objects, target release) so they can be tested with the real manifests.
 */
import { checkAgainstSchema, schemaFor } from '../calico/schema.js';
import { CALICO_CRD_GROUP, compareVersions, isOperatorLabelled, OPERATOR_GROUP, operatorPoolBehaviour } from '../calico/knowledge.js';
import { leftoversUnknownTo, operatorFinalizersNotOf } from '../calico/operator-generations.js';
import { isOperatorDefault, valueAt } from '../calico/operator-defaults.js';
import { releaseDefaultsPruned } from './release-defaults.js';
import { crdFindings } from './crd-findings.js';
import { adoptionReason } from '../doctor/checks/pools.js';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { objRef, type LiveCalico } from './live.js';
import { policyFindings } from './policy-names.js';
import { INSTALLATION_POOL_RULES, PLAN_FLAGS, RUNTIME_KINDS } from './rules.js';
import type { InstallationTransform, PlanFinding } from './types.js';

export { isManagedCrd, MANAGED_GROUPS, objRef, type LiveCalico } from './live.js';

export function servedVersion(crd: KubeObject): string | undefined {
  const vs: any[] = crd.spec?.versions ?? [];
  return (vs.find((v) => v.storage) ?? vs.find((v) => v.served) ?? vs[0])?.name;
}

const schemaText = (crd: KubeObject, version: string) => JSON.stringify(schemaFor({ apiVersion: `${crd.spec.group}/${version}` }, crd) ?? null);

/** CRDs whose schema for the served version differs between live and target (only their objects need checking). */
export function changedCrds(live: KubeObject[], target: KubeObject[]): { live: KubeObject; target: KubeObject }[] {
  const byName = new Map(target.map((c) => [c.metadata.name, c]));
  const out: { live: KubeObject; target: KubeObject }[] = [];
  for (const l of live) {
    const t = byName.get(l.metadata.name);
    const v = servedVersion(l);
    if (!t || !v) continue;
    if (schemaText(l, v) !== schemaText(t, v)) out.push({ live: l, target: t });
  }
  return out;
}

export interface FindingsResult {
  findings: PlanFinding[];
  installation: InstallationTransform;
}

export function computeFindings(live: LiveCalico, target: Release, current: { version?: string }, flags: Set<string>): FindingsResult {
  const findings: PlanFinding[] = [];
  const installation: InstallationTransform = { removeFields: [], trimPoolsPerFamily: false };
  const livePools = live.objects.get(`ippools.${CALICO_CRD_GROUP}`) ?? [];
  // Installation values the target's CRD lacks that the user set (not the operator's own defaults): path -> value.
  const installationLost: { obj: KubeObject; path: string }[] = [];

  // 1. Fields the target CRDs prune and values they reject, per kind, against the live objects.
  for (const { live: lc, target: tc } of changedCrds(live.crds, target.crds)) {
    const kind: string = lc.spec.names.kind;
    if (RUNTIME_KINDS.has(kind)) continue;
    const pruned = new Map<string, Set<string>>(); // path (indices folded) -> objects
    const rejected: string[] = [];
    const rejectedObjs = new Set<string>();
    for (const obj of live.objects.get(lc.metadata.name) ?? []) {
      for (const f of checkAgainstSchema(withoutStatus(obj), tc)) {
        if (f.kind === 'pruned') {
          const p = f.path;
          if (!pruned.has(p)) pruned.set(p, new Set());
          pruned.get(p)!.add(objRef(obj));
        } else {
          rejected.push(`${objRef(obj)}: ${f.path}: ${f.detail}`);
          rejectedObjs.add(objRef(obj));
        }
      }
    }
    // Values the newer release wrote by itself (operator-defaults.ts) are not a user's settings: dropped without a flag.
    if (kind !== 'Installation')
      findings.push(...releaseDefaultsPruned(kind, live.objects.get(lc.metadata.name) ?? [], pruned, installationOf(live), target.version));
    if (pruned.size > 0) {
      const objects = [...new Set([...pruned.values()].flatMap((s) => [...s]))];
      const details = [...pruned.keys()].map((p) => `${p} (unknown to ${target.version})`);
      if (kind === 'Installation') {
        installation.removeFields.push(...pruned.keys());
        for (const obj of live.objects.get(lc.metadata.name) ?? []) {
          for (const p of pruned.keys()) {
            if (pruned.get(p)!.has(objRef(obj)) && !isOperatorDefault(obj, p, livePools)) installationLost.push({ obj, path: p });
          }
        }
        findings.push({
          id: 'installation-fields-unknown-to-target',
          severity: 'warning',
          title: `Installation fields that ${target.version}'s CRD does not have`,
          objects,
          details,
          action: 'transform',
          plan:
            `remove these fields from the Installation while the operator is paused, so the ${target.operatorImage ?? 'target'} operator and the API server accept it ` +
            "(values the newer operator filled in by itself are safe to drop; values a user set are listed in 'installation-fields-lost')",
        });
      } else {
        const ok = flags.has(PLAN_FLAGS.dropFields);
        findings.push({
          id: `${kind.toLowerCase()}-fields-pruned`,
          severity: ok ? 'warning' : 'error',
          title: `${kind} fields that ${target.version}'s CRD prunes on the next write`,
          objects,
          details,
          action: 'requires-flag',
          flag: PLAN_FLAGS.dropFields,
          satisfied: ok,
          plan: ok
            ? 'the fields are kept in the bundle and dropped by the cluster on the next write (allowed by --allow-field-loss)'
            : `refused unless --${PLAN_FLAGS.dropFields}: these values would be lost on the next write (they stay in the bundle)`,
        });
      }
    }
    if (rejected.length > 0) {
      findings.push({
        id: `${kind.toLowerCase()}-values-rejected`,
        severity: 'error',
        title: `${kind} values that ${target.version}'s CRD rejects`,
        objects: [...rejectedObjs],
        details: rejected,
        action: 'refuse',
        plan: 'refused: change these values to ones the target accepts first (writes of these objects would fail after the change)',
      });
    }
  }

  // 2. CRDs the target lacks: kept, never deleted while they hold data; an empty one that the target operator
  // misreads (its discovery) is deleted.
  findings.push(...crdFindings(live, target));

  // 3. Installation constraints of the target operator.
  const inst = installationOf(live);
  const pools: any[] = inst?.spec?.calicoNetwork?.ipPools ?? [];
  for (const rule of INSTALLATION_POOL_RULES) {
    if (compareVersions(target.version, rule.until) >= 0) continue;
    const fam = (p: any) => (String(p.cidr ?? '').includes(':') ? 'IPv6' : 'IPv4');
    const counts = new Map<string, number>();
    for (const p of pools) counts.set(fam(p), (counts.get(fam(p)) ?? 0) + 1);
    const over = [...counts].filter(([, n]) => n > rule.maxPoolsPerFamily);
    if (over.length === 0) continue;
    const ok = flags.has(PLAN_FLAGS.trimPools);
    installation.trimPoolsPerFamily = ok;
    findings.push({
      id: 'installation-too-many-pools',
      severity: ok ? 'warning' : 'error',
      title: `the ${target.version} operator accepts ${rule.maxPoolsPerFamily} pool per IP family in the Installation`,
      objects: ['Installation/default'],
      details: over.map(
        ([f, n]) =>
          `${n} ${f} pools: ${pools
            .filter((p) => fam(p) === f)
            .map((p) => p.cidr)
            .join(', ')}`,
      ),
      action: 'requires-flag',
      flag: PLAN_FLAGS.trimPools,
      satisfied: ok,
      plan: ok
        ? 'keep the first pool per family in the Installation; the other IPPool objects stay in the cluster (the older operator does not manage pools)'
        : `refused unless --${PLAN_FLAGS.trimPools} (keep the first pool per family in the Installation; the IPPool objects themselves stay)`,
    });
  }

  // 4. Pools stopped with disableNewAllocations (3.29+) going to a target whose operator manages pools but has no
  // such field (3.28): its CRD prunes the field and its operator rewrites the pool enabled (calico#9100, caused by
  // the plan). Carry the stop over in the target's own terms instead.
  // A pool the source operator does not own (no managed-by label: it never wrote it, so the entry's stop never
  // reached it) would, with its entry stopped the target's way, no longer equal its entry: v1.34.3 would refuse it on
  // every reconcile (5. below says why). Its entry is removed instead, leaving the pool exactly as it is.
  const targetPools = operatorPoolBehaviour(target.version);
  const stopped = pools.filter((p) => p.disableNewAllocations === true);
  if (stopped.length && targetPools.managesPools && targetPools.stopAllocations && targetPools.stopAllocations.field !== 'disableNewAllocations') {
    const { field, value, text } = targetPools.stopAllocations;
    const notOwned = (e: any) => {
      const pool = livePools.find((p) => p.spec?.cidr === e.cidr);
      return pool !== undefined && !isOperatorLabelled(pool);
    };
    const converted = stopped.filter((e) => !notOwned(e));
    const unlisted = stopped.filter(notOwned);
    if (converted.length) installation.stopAllocations = { cidrs: converted.map((p) => String(p.cidr)), field, value };
    if (unlisted.length) installation.unlistPools = { cidrs: unlisted.map((p) => String(p.cidr)) };
    findings.push({
      id: 'installation-pool-stop-allocations-converted',
      severity: 'warning',
      title: `pools stopped with disableNewAllocations: the ${target.version} operator has no such field and would re-enable them`,
      objects: stopped.map((p) => `Installation/default ipPools ${p.name ?? p.cidr}`),
      details: stopped.map((p) =>
        unlisted.includes(p)
          ? `${p.name ?? p.cidr}: the pool has no operator label; its entry is removed, so the operator leaves the pool as it is`
          : `${p.name ?? p.cidr}: disableNewAllocations: true -> ${text}${p[field] !== undefined ? ` (was ${field}: ${JSON.stringify(p[field])})` : ''}`,
      ),
      action: 'transform',
      plan: `${[converted.length ? `set ${text} on the entries of ${converted.map((p) => p.name ?? p.cidr).join(', ')}` : '', unlisted.length ? `remove the entries of ${unlisted.map((p) => p.name ?? p.cidr).join(', ')} (unlisted)` : ''].filter(Boolean).join('; ')} while the operator is paused, so the ${target.operatorImage ?? 'target'} operator keeps them non-allocating (the bundle keeps the original entries)`,
    });
  }

  // 5. Pools disabled on the IPPool object (the way before 3.28) that are listed in the Installation and that the
  // target operator would take over: it rewrites them without `disabled` (calico#9100, the incident this tool exists
  // for). From 3.29 their entries say disableNewAllocations, which that operator converts to `disabled: true`: the
  // pool still equals its entry, stays adopted and disabled. v1.34 (3.28) has no such field: a labelled pool is
  // rewritten with nodeSelector "!all()" (still no new allocations). An unlabelled one would then no longer equal
  // its entry, and v1.34.3 would refuse it on every reconcile ("Cannot update an IP pool not owned by the operator",
  // pool_controller.go:288-292) and never apply a later edit of the entry; so its entry is removed instead: the
  // operator neither owns nor rewrites it (pool_controller.go:236-268 adopts only a labelled pool or one equal to
  // an entry; :332-354 deletes only owned pools), and it stays `disabled: true`. An emptied list is safe while pools
  // exist: ippool/defaults.go defaults a missing list to [] then, and core_controller.go renders calico-node
  // (assign_ipv4, address autodetection) from the pools in the cluster, not from the entries.
  const disabledListed = disabledPoolsTheTargetWouldEnable(live, pools, target.version, inst?.spec?.cni?.type).filter(
    (p) => !installation.stopAllocations?.cidrs.includes(String(p.spec.cidr)),
  );
  if (disabledListed.length && targetPools.stopAllocations) {
    const { field, value, text } = targetPools.stopAllocations;
    const unlist = field === 'disableNewAllocations' ? [] : disabledListed.filter((p) => !isOperatorLabelled(p));
    const stop = disabledListed.filter((p) => !unlist.includes(p));
    if (stop.length)
      installation.stopAllocations = { cidrs: [...(installation.stopAllocations?.cidrs ?? []), ...stop.map((p) => String(p.spec.cidr))], field, value };
    if (unlist.length) installation.unlistPools = { cidrs: [...(installation.unlistPools?.cidrs ?? []), ...unlist.map((p) => String(p.spec.cidr))] };
    findings.push({
      id: 'installation-disabled-pool-stop-allocations',
      severity: 'warning',
      title: `disabled IP pool(s) listed in the Installation: the ${target.version} operator would re-enable them (calico#9100)`,
      objects: disabledListed.map((p) => `IPPool/${p.metadata.name}`).concat('Installation/default'),
      details: disabledListed.map((p) => {
        const entry = pools.find((e) => e.cidr === p.spec.cidr);
        if (unlist.includes(p)) {
          return `${p.metadata.name} (${p.spec.cidr}): disabled: true on the pool, which has no operator label; its Installation entry is removed, so the operator leaves the pool as it is`;
        }
        return `${p.metadata.name} (${p.spec.cidr}): disabled: true on the pool; its Installation entry gets ${text}${entry?.[field] !== undefined ? ` (was ${field}: ${JSON.stringify(entry[field])})` : ''}`;
      }),
      action: 'transform',
      plan:
        [
          stop.length ? `set ${text} on the entries of ${stop.map((p) => p.metadata.name).join(', ')}` : '',
          unlist.length ? `remove the entries of ${unlist.map((p) => p.metadata.name).join(', ')} (unlisted, the pools stay disabled and untouched)` : '',
        ]
          .filter(Boolean)
          .join('; ') +
        ` while the operator is paused, so the ${target.operatorImage ?? 'target'} operator keeps them non-allocating (the pools themselves and the bundle are not changed)`,
    });
  }

  // Set by a user, not filled in by the operator: configuration the downgrade loses, like other kinds' pruned fields.
  // A disableNewAllocations: true carried over in the target's terms (4. above) is not lost.
  const lost = installationLost.filter(
    ({ obj, path }) =>
      !(
        path.endsWith('.disableNewAllocations') &&
        installation.stopAllocations?.cidrs.includes(String(valueAt(obj, path.replace(/\.disableNewAllocations$/, '.cidr'))))
      ),
  );
  if (lost.length) {
    const ok = flags.has(PLAN_FLAGS.dropFields);
    findings.push({
      id: 'installation-fields-lost',
      severity: ok ? 'warning' : 'error',
      title: `Installation settings that ${target.version}'s CRD does not have, set by a user (not the operator's defaults)`,
      objects: [...new Set(lost.map(({ obj }) => objRef(obj)))],
      details: lost.map(({ obj, path }) => `${path}: ${JSON.stringify(valueAt(obj, path))} (unknown to ${target.version})`),
      action: 'requires-flag',
      flag: PLAN_FLAGS.dropFields,
      satisfied: ok,
      plan: ok
        ? 'removed from the Installation with the fields above (allowed by --allow-field-loss); the bundle keeps them'
        : `refused unless --${PLAN_FLAGS.dropFields}: the ${target.version} Installation cannot hold these settings, so the downgrade would lose them (they stay in the bundle)`,
    });
  }

  // 6. What newer operator generations leave that the target operator never clears (a downgrade below 3.28, 3.30,
  // 3.31 or 3.32: OPERATOR_GENERATIONS): every operator finalizer on the Installation the target does not define,
  // the newer reports, and the newer finalizers on other operator custom resources. Removed by their own step.
  const leftovers = leftoversUnknownTo(target.version);
  const finalizers = operatorFinalizersNotOf(inst?.metadata.finalizers ?? [], target.version);
  const statuses = (live.objects.get(`tigerastatuses.${OPERATOR_GROUP}`) ?? []).map((t) => t.metadata.name).filter((n) => leftovers.tigeraStatuses.includes(n));
  const crFinalizers = leftovers.customResourceFinalizers.flatMap(({ crd, finalizer }) =>
    (live.objects.get(crd) ?? []).filter((o) => o.metadata.finalizers?.includes(finalizer)).map((o) => ({ crd, name: o.metadata.name!, finalizer })),
  );
  if (finalizers.length || statuses.length || crFinalizers.length) {
    if (finalizers.length) installation.removeFinalizers = finalizers;
    if (statuses.length) installation.deleteTigeraStatuses = statuses;
    if (crFinalizers.length) installation.removeCustomResourceFinalizers = crFinalizers;
    findings.push({
      id: 'newer-operator-leftovers',
      severity: 'warning',
      title: `the newer operator's finalizers and status objects, which the ${target.operatorImage ?? target.version} operator never clears`,
      objects: [
        ...(finalizers.length ? ['Installation/default'] : []),
        ...statuses.map((n) => `TigeraStatus/${n}`),
        ...crFinalizers.map((c) => `${c.crd.split('.')[0]}/${c.name}`),
      ],
      details: [
        ...finalizers.map((f) => `finalizer ${f}: a later kubectl delete installation default would hang on it`),
        ...statuses.map((n) => `TigeraStatus ${n}: nothing would update it again (it keeps its last condition, e.g. Degraded)`),
        ...crFinalizers.map((c) => `finalizer ${c.finalizer} on ${c.crd} ${c.name}: it and its CRD could never be deleted`),
      ],
      action: 'transform',
      plan: 'step remove-operator-leftovers, while the operator is paused: remove these finalizers (and any other on Installation default the target operator does not define) and delete these TigeraStatus objects; the target operator puts back its own',
    });
  }

  // Only where the two operators treat pools differently (3.30 -> 3.29 changes nothing: both use disableNewAllocations).
  const currentPools = current.version ? operatorPoolBehaviour(current.version) : undefined;
  const poolsChange = currentPools?.managesPools !== targetPools.managesPools || currentPools?.stopAllocations?.text !== targetPools.stopAllocations?.text;
  if (current.version && compareVersions(target.version, current.version) < 0 && pools.length > 0 && poolsChange) {
    const detail = !targetPools.managesPools
      ? `${target.version}'s operator does not write IPPools: the pools stay as they are, and later edits to them stick`
      : `${target.version}'s operator keeps reconciling IPPools from the Installation's ipPools (adopting equal pools, reverting edits, re-enabling ` +
        `a disabled one); ${currentPools?.stopAllocations?.text ?? 'disabling'} becomes ${targetPools.stopAllocations?.text ?? 'not possible'}`;
    findings.push({
      id: 'operator-pool-management-changes',
      severity: 'info',
      title: 'IP pool management changes with the operator version',
      objects: pools.map((p) => `IPPool/${p.name ?? p.cidr}`),
      details: [detail],
      action: 'none',
      plan: targetPools.managesPools
        ? 'see the pool findings; doctor --target checks the pools against the target operator'
        : 'nothing to do: the IPPool objects stay as they are',
    });
  }
  findings.push(...policyFindings(live, target, current));
  return { findings, installation };
}

/**
 * Live pools with `disabled: true` whose CIDR an Installation entry lists, that the target operator would adopt
 * and whose entry does not already stop allocations its way.
 */
function disabledPoolsTheTargetWouldEnable(live: LiveCalico, entries: any[], calicoVersion: string, cniType?: string): KubeObject[] {
  const behaviour = operatorPoolBehaviour(calicoVersion);
  const stop = behaviour.stopAllocations;
  if (!behaviour.managesPools || !stop) return [];
  return (live.objects.get(`ippools.${CALICO_CRD_GROUP}`) ?? []).filter((p) => {
    if (p.spec?.disabled !== true) return false;
    const entry = entries.find((e) => e.cidr === p.spec.cidr);
    if (!entry || JSON.stringify(entry[stop.field]) === JSON.stringify(stop.value)) return false;
    return adoptionReason(p, entries, calicoVersion, cniType) !== undefined;
  });
}

export const installationOf = (live: LiveCalico): KubeObject | undefined =>
  (live.objects.get(`installations.${OPERATOR_GROUP}`) ?? []).find((o) => o.metadata.name === 'default');

function withoutStatus(o: KubeObject): KubeObject {
  const { status: _s, ...rest } = o;
  return rest as KubeObject;
}

/** Apply the Installation transform to a copy of the live Installation. */
export function transformInstallation(inst: KubeObject, t: InstallationTransform): KubeObject {
  const out = structuredClone(inst);
  if (t.removeFinalizers?.length && out.metadata.finalizers) out.metadata.finalizers = out.metadata.finalizers.filter((f) => !t.removeFinalizers!.includes(f));
  // Before removing fields: the stop is read from the entries' own disableNewAllocations.
  if (t.stopAllocations) {
    for (const p of out.spec?.calicoNetwork?.ipPools ?? []) {
      if (t.stopAllocations.cidrs.includes(String(p.cidr))) p[t.stopAllocations.field] = t.stopAllocations.value;
    }
  }
  for (const p of t.removeFields) deletePath(out, p);
  if (t.trimPoolsPerFamily) {
    const pools: any[] = out.spec?.calicoNetwork?.ipPools ?? [];
    const seen = new Set<string>();
    out.spec.calicoNetwork.ipPools = pools.filter((p) => {
      const f = String(p.cidr ?? '').includes(':') ? '6' : '4';
      if (seen.has(f)) return false;
      seen.add(f);
      return true;
    });
  }
  // Last: removeFields may name entries by index.
  if (t.unlistPools?.cidrs.length && Array.isArray(out.spec?.calicoNetwork?.ipPools)) {
    out.spec.calicoNetwork.ipPools = out.spec.calicoNetwork.ipPools.filter((p: any) => !t.unlistPools!.cidrs.includes(String(p.cidr)));
  }
  return out;
}

/** Delete `a.b[0].c` (and, for `a.b[].c` style paths, in every element). */
export function deletePath(obj: any, p: string): void {
  const parts = p.split('.').flatMap((seg) => {
    const m = /^([^[\]]+)((?:\[\d*\])*)$/.exec(seg);
    if (!m) return [seg];
    const idx = [...m[2]!.matchAll(/\[(\d*)\]/g)].map((x) => (x[1] === '' ? '*' : Number(x[1])));
    return [m[1]!, ...idx];
  });
  const walk = (node: any, i: number): void => {
    if (node === null || typeof node !== 'object') return;
    const key = parts[i]!;
    const last = i === parts.length - 1;
    if (key === '*') {
      if (Array.isArray(node)) for (const el of node) walk(el, i + 1);
      return;
    }
    if (last) {
      if (Array.isArray(node) && typeof key === 'number') node.splice(key, 1);
      else delete node[key as any];
      return;
    }
    walk(node[key as any], i + 1);
  };
  walk(obj, 0);
}
