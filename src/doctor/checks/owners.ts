/** Calico namespaces that do not go: the garbage collector lost their owner, or discovery of Calico's API fails while they are deleted. */
import { CALICO_API_SERVICE, CALICO_V3_GROUP, INSTALLATION_NUDGE_ANNOTATION, OPERATOR_GROUP } from '../../calico/knowledge.js';
import { ref } from '../state.js';
import type { Check, Finding } from '../types.js';

/**
 * The operator makes calico-apiserver with APIServer `default` as its controller owner, so deleting that object
 * deletes the namespace through kube-controller-manager's garbage collector, whose graph is keyed by UID. Calico up to
 * 3.27.4 gives each Namespace's Profile (`kns.<name>`, served by its API server) the Namespace's own UID, so the
 * collector may take the Profile's owners (none) for the namespace's; and once the API server changed those UIDs
 * (3.27.5 / 3.28.1; plan finding v3-uids-change) it may drop the node. Either way the namespace stays until
 * kube-controller-manager restarts, and operator v1.32 and v1.34, whose Installation finalizer waits for that
 * namespace (v1.32 core_controller.go:901-907), hold `kubectl delete installation default` with it (path matrix
 * 3.26.5 -> 3.27.5 and 3.27.4 -> 3.28.1, the node-side night on 3.27.4: docs/calico-differences.md).
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
          `Deleting ${owners} should have deleted ${ns.name} through kube-controller-manager's garbage collector, which keys objects by UID. ` +
          "Calico up to 3.27.4 gives each namespace's projectcalico.org/v3 Profile the namespace's own UID, and 3.27.5 / 3.28.1 change those " +
          "UIDs (calico #9191): either can leave the collector without the namespace's owner until it restarts, and the tigera operator " +
          '(3.27, 3.28) will not finish deleting the Installation while calico-apiserver exists. (Just after the owner was deleted, this may ' +
          'also be the collector still at work: look again in a minute.)',
        fix:
          'Restart kube-controller-manager (kubeadm: move /etc/kubernetes/manifests/kube-controller-manager.yaml out of the folder and back); the ' +
          `collector then deletes ${ns.name}. Or delete it yourself if nothing else should live there: kubectl delete namespace ${ns.name}.` +
          (installationStuck
            ? ' Operator v1.32 sees the namespace gone only at its next periodic reconcile (up to 5 minutes); a change to the Installation makes it now: ' +
              `kubectl annotate installation default ${INSTALLATION_NUDGE_ANNOTATION}="$(date +%s)" --overwrite`
            : ''),
      });
    }
    return out;
  },
};

/**
 * A Calico namespace being deleted that cannot finish because the aggregated projectcalico.org/v3 API has no server:
 * the namespace controller lists every served kind before it empties a namespace, and discovery fails while the
 * APIService `v3.projectcalico.org` is registered with nothing behind it (the API server the operator's teardown
 * removed, or one deleted by hand). Seen on the node-side night: `kubectl delete -f tigera-operator.yaml` waited 300 s
 * on namespace tigera-operator ("stale GroupVersion discovery: projectcalico.org/v3", four times a minute apart).
 */
const namespaceStuckOnStaleApi: Check = {
  name: 'Calico namespaces stuck deleting on a stale Calico API',
  run(state) {
    return (state.namespaces ?? [])
      .filter((ns) => ns.terminating && ns.discoveryFailure?.includes(`${CALICO_V3_GROUP}/v3`))
      .map((ns) => ({
        id: 'namespace-stuck-on-stale-api',
        severity: 'error' as const,
        title: `namespace ${ns.name} cannot finish deleting: discovery of ${CALICO_V3_GROUP}/v3 fails`,
        objects: [`Namespace/${ns.name}`, `APIService/${CALICO_API_SERVICE}`],
        why:
          `kube-controller-manager lists every served kind before it empties a namespace; APIService ${CALICO_API_SERVICE} is still registered ` +
          "but no Calico API server answers it (the operator's teardown removed it, or it was deleted), so discovery fails and the namespace " +
          `stays Terminating, and with it whatever waits on it (kubectl delete -f tigera-operator.yaml). kube-controller-manager says: ${ns.discoveryFailure}`,
        fix:
          `kubectl delete apiservice ${CALICO_API_SERVICE} (the tigera operator registers it again when it deploys the Calico API server); ` +
          `the namespace then finishes deleting within a minute.`,
      }));
  },
};

export const ownerChecks: Check[] = [namespaceOwnerGone, namespaceStuckOnStaleApi];
