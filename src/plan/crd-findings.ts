/**
 * The Calico CRDs a cluster has and the target release does not ship. They are kept with their data, except one
 * whose mere presence changes what the target operator does (calico/operator-discovery.ts: 3.30's
 * ManagementClusterConnection makes the v1.32-v1.36 operators take the cluster for Calico Enterprise): an empty
 * one is deleted by `apply` (after the backup verified, while the operator is paused); one that holds objects
 * refuses the plan, since deleting it would delete them.
 */
import { operatorEffectOfCrd } from '../calico/operator-discovery.js';
import { OPERATOR_GROUP } from '../calico/knowledge.js';
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
    const components = n > 0 && lc.spec?.group === OPERATOR_GROUP ? operatorComponentDetails(lc, objs, target) : [];
    findings.push({
      id: 'crd-not-in-target',
      severity: n > 0 ? 'warning' : 'info',
      title: `CRD ${lc.metadata.name} is not part of ${target.version}`,
      objects: objs.slice(0, 20).map(objRef),
      details: [`${n} object(s) stored`, ...components],
      action: 'keep',
      plan:
        n > 0
          ? `kept with its objects (a CRD that holds data is never deleted); the target version ignores them${components.length ? ', and the workloads the newer operator made for them keep running' : ''}`
          : 'kept (harmless; delete it by hand if you no longer want it)',
    });
  }
  return findings;
}

/**
 * An operator kind the target's operator does not run (3.30's Goldmane and Whisker, say, below 3.30): the newer
 * operator rendered each object's workloads (Deployments, Services, Secrets in calico-system) with the object as their
 * owner (tigera/operator v1.38.13 `goldmane/controller.go:226`, `whisker/controller.go:230`: NewComponentHandler with
 * the CR, `utils/component.go:98-104` SetControllerReference). Nothing of the target updates or removes them: they keep
 * running the newer release's images until the objects are deleted, which the garbage collector follows.
 */
function operatorComponentDetails(crd: KubeObject, objs: KubeObject[], target: Release): string[] {
  const plural = String(crd.spec?.names?.plural ?? crd.metadata.name.split('.')[0]);
  return [
    `the workloads a newer operator made for ${objs.map(objRef).join(', ')} (owned by them) keep running its images: no ${target.version} component manages or removes them`,
    `to remove them once you stay on ${target.version}: kubectl delete ${plural}.${OPERATOR_GROUP} --all (the owned workloads follow; the bundle keeps the objects)`,
  ];
}
