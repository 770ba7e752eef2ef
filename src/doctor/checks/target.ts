/** With --target: what the target release's CRDs would prune or reject from the objects in the cluster (or bundle). */
import { checkAgainstSchema } from '../../calico/schema.js';
import { groupOf, type KubeObject } from '../../kube/types.js';
import { ref, type CalicoState } from '../state.js';
import type { Check, Finding } from '../types.js';

/** What the API server keeps for itself or regenerates: never part of what a CRD schema judges on a write. */
function writableView(obj: KubeObject): KubeObject {
  const { status: _status, ...rest } = obj;
  return {
    ...rest,
    metadata: {
      name: obj.metadata.name,
      ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
      labels: obj.metadata.labels,
      annotations: obj.metadata.annotations,
    },
  };
}

const targetSchemas: Check = {
  name: 'target release CRD schemas',
  run(state: CalicoState, ctx) {
    const target = ctx.target;
    if (!target) return [];
    const crdFor = new Map(target.crds.map((c) => [`${c.spec.group}/${c.spec.names.kind}`, c]));
    const out: Finding[] = [];
    const missingKinds = new Map<string, string[]>();
    for (const objs of Object.values(state.objects)) {
      for (const obj of objs) {
        const crd = crdFor.get(`${groupOf(obj.apiVersion)}/${obj.kind}`);
        if (!crd) {
          (missingKinds.get(obj.kind) ?? missingKinds.set(obj.kind, []).get(obj.kind)!).push(ref(obj));
          continue;
        }
        // The target CRD serves the same group; judge the object at a version the target serves (storage version).
        const served = (crd.spec.versions ?? []).map((v: any) => v.name);
        const view = writableView(obj);
        if (!served.includes(obj.apiVersion.split('/')[1]))
          view.apiVersion = `${crd.spec.group}/${(crd.spec.versions.find((v: any) => v.storage) ?? crd.spec.versions[0]).name}`;
        const findings = checkAgainstSchema(view, crd);
        const rejected = findings.filter((f) => f.kind === 'rejected');
        const pruned = findings.filter((f) => f.kind === 'pruned');
        if (rejected.length > 0) {
          out.push({
            id: 'target-schema-reject',
            severity: 'error',
            title: `${ref(obj)} would be rejected by the Calico ${target.version} CRD: ${rejected.map((f) => `${f.path} ${f.detail}`).join('; ')}`,
            objects: [ref(obj)],
            why: `Under the ${target.version} schema the API server refuses to create or update this object as it is, so a restore or an operator write of it fails after the change.`,
            fix: `Change the object to a form ${target.version} accepts before the change (remove or correct ${rejected.map((f) => f.path).join(', ')}), or keep the current version. cni-rewind plan --to ${target.version} shows the same list.`,
          });
        }
        if (pruned.length > 0) {
          out.push({
            id: 'target-schema-prune',
            severity: 'warning',
            title: `${ref(obj)}: the Calico ${target.version} CRD would drop ${pruned.map((f) => f.path).join(', ')}`,
            objects: [ref(obj)],
            why: `The ${target.version} schema does not know these fields: the API server silently drops them on the next write (and strict field validation refuses a create that carries them). Their settings are lost after the change.`,
            fix: `Decide whether the settings matter on ${target.version}. If the object was written by a newer operator (e.g. ipPools[].name, allowedUses), let the ${target.version} operator rewrite it; otherwise record the values (a cni-rewind backup keeps them) and remove the fields before the change.`,
          });
        }
      }
    }
    for (const [kind, refs] of missingKinds) {
      out.push({
        id: 'target-kind-missing',
        severity: 'warning',
        title: `Calico ${target.version} has no CRD for ${kind}; ${refs.length} object(s) exist`,
        objects: refs,
        why: `After a change to ${target.version} nothing serves ${kind}. If its CRD is deleted, Kubernetes deletes these objects with it.`,
        fix: `Keep the ${kind} CRD in place during the change (never delete a CRD that holds data) and back the objects up first: cni-rewind backup.`,
      });
    }
    return out;
  },
};

export const targetChecks: Check[] = [targetSchemas];
