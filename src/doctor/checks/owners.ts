/** Calico namespaces the garbage collector should have deleted: every owner gone, the namespace still here. */
import { OPERATOR_GROUP } from '../../calico/knowledge.js';
import { ref } from '../state.js';
import type { Check, Finding } from '../types.js';

/**
 * The operator makes calico-apiserver with APIServer `default` as its controller owner, so deleting that object
 * deletes the namespace through kube-controller-manager's garbage collector. After the Calico API server changed the
 * UIDs it gives projectcalico.org/v3 objects (3.27.5 / 3.28.1; plan finding v3-uids-change) the collector's graph,
 * keyed by UID, had lost the namespace, and it stayed until kube-controller-manager restarted; operator v1.32's
 * Installation finalizer waits for that namespace (core_controller.go:901-907), so `kubectl delete installation
 * default` hung with it (path matrix 3.26.5 -> 3.27.5, docs/calico-differences.md).
 */
const namespaceOwnerGone: Check = {
  name: 'Calico namespaces whose owner is gone',
  run(state) {
    const live = new Set<string>();
    for (const [key, objs] of Object.entries(state.objects))
      if (key.endsWith(`.${OPERATOR_GROUP}`)) for (const o of objs) if (o.metadata.uid) live.add(o.metadata.uid);
    const installation = (state.objects[`installations.${OPERATOR_GROUP}`] ?? []).find((o) => o.metadata.name === 'default');
    const installationStuck = !!installation?.metadata.deletionTimestamp;
    const out: Finding[] = [];
    for (const ns of state.namespaces ?? []) {
      if (ns.terminating || !ns.owners.length) continue;
      // Only owners of the operator's kinds are judged (their objects are in the state); all of them must be gone.
      if (!ns.owners.every((o) => o.apiVersion.startsWith(`${OPERATOR_GROUP}/`) && !live.has(o.uid))) continue;
      const owners = ns.owners.map((o) => `${o.kind}/${o.name}`).join(', ');
      out.push({
        id: 'namespace-owner-gone',
        severity: installationStuck ? 'error' : 'warning',
        title: `namespace ${ns.name} is still here though its owner ${owners} is gone${installationStuck ? ', and Installation default is stuck deleting' : ''}`,
        objects: [`Namespace/${ns.name}`, ...(installationStuck && installation ? [ref(installation)] : [])],
        why:
          `Deleting ${owners} should have deleted ${ns.name} through kube-controller-manager's garbage collector. After the Calico API server ` +
          'changed the UIDs of projectcalico.org/v3 objects (upgrades or downgrades across 3.27.5 / 3.28.1, calico #9191) the collector no ' +
          "longer knows the namespace's owner until it restarts; operator v1.32 (Calico 3.27) will not finish deleting the Installation " +
          'while calico-apiserver exists. (Just after the owner was deleted, this may also be the collector still at work: look again in a minute.)',
        fix:
          'Restart kube-controller-manager (kubeadm: move /etc/kubernetes/manifests/kube-controller-manager.yaml out of the folder and back); the ' +
          `collector then deletes ${ns.name}. Or delete it yourself if nothing else should live there: kubectl delete namespace ${ns.name}.`,
      });
    }
    return out;
  },
};

export const ownerChecks: Check[] = [namespaceOwnerGone];
