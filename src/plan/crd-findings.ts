/**
 * The Calico CRDs a cluster has and the target release does not ship. They are kept with their data, except one
 * whose mere presence changes what the target operator does (calico/operator-discovery.ts: 3.30's
 * ManagementClusterConnection makes the v1.32-v1.36 operators take the cluster for Calico Enterprise): an empty
 * one is deleted by `apply` (after the backup verified, while the operator is paused); one that holds objects
 * refuses the plan, since deleting it would delete them.
 */
import { operatorEffectOfCrd } from '../calico/operator-discovery.js';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { isManagedCrd, objRef, type LiveCalico } from './live.js';
import type { PlanFinding } from './types.js';

export interface CrdRemoval {
  crd: string;
  kind: string;
  /** What the target operator would do while the CRD is served. */
  effect: string;
}

/** Live Calico CRDs that the target release lacks and whose presence changes what its operator does. */
export function crdsTheTargetOperatorMisreads(liveCrds: KubeObject[], target: Release): CrdRemoval[] {
  const shipped = new Set(target.crds.map((c) => c.metadata.name));
  const out: CrdRemoval[] = [];
  for (const c of liveCrds) {
    if (shipped.has(c.metadata.name) || !isManagedCrd(c)) continue;
    const effect = operatorEffectOfCrd(c, target.version);
    if (effect) out.push({ crd: c.metadata.name, kind: String(c.spec.names?.kind), effect });
  }
  return out;
}

/** Findings for every Calico CRD the target lacks (`crd-not-in-target`, `crd-changes-target-operator`). */
export function crdFindings(live: LiveCalico, target: Release): PlanFinding[] {
  const findings: PlanFinding[] = [];
  const misread = new Map(crdsTheTargetOperatorMisreads(live.crds, target).map((r) => [r.crd, r]));
  const shipped = new Set(target.crds.map((c) => c.metadata.name));
  for (const lc of live.crds) {
    if (shipped.has(lc.metadata.name) || !isManagedCrd(lc)) continue;
    const objs = live.objects.get(lc.metadata.name) ?? [];
    const n = objs.length;
    const bad = misread.get(lc.metadata.name);
    if (bad) {
      findings.push({
        id: 'crd-changes-target-operator',
        severity: n > 0 ? 'error' : 'warning',
        title: `CRD ${lc.metadata.name} is not part of ${target.version}, and while it is served the ${target.operatorImage ?? target.version} operator misreads the cluster`,
        objects: objs.slice(0, 20).map(objRef),
        details: [`kind ${bad.kind}: ${bad.effect}`, `${n} object(s) stored`],
        action: n > 0 ? 'refuse' : 'transform',
        plan:
          n > 0
            ? `refused: deleting the CRD would delete its ${n} object(s) (they are in the bundle); delete them yourself if they are not needed, then plan again`
            : 'deleted by apply-crds while the operator is paused (it holds no object; the bundle has its definition)',
      });
      continue;
    }
    findings.push({
      id: 'crd-not-in-target',
      severity: n > 0 ? 'warning' : 'info',
      title: `CRD ${lc.metadata.name} is not part of ${target.version}`,
      objects: objs.slice(0, 20).map(objRef),
      details: [`${n} object(s) stored`],
      action: 'keep',
      plan:
        n > 0
          ? 'kept with its objects (a CRD that holds data is never deleted); the target version ignores them'
          : 'kept (harmless; delete it by hand if you no longer want it)',
    });
  }
  return findings;
}
