/**
 * A Calico namespace that outlives its owner while restore waits for deletions to finish. The operator makes
 * calico-system a dependent of Installation `default` and calico-apiserver of APIServer `default`, so the garbage
 * collector deletes them once those are gone. But its graph is keyed by UID, and Calico up to 3.27.4 gives each
 * namespace's projectcalico.org/v3 Profile the namespace's own UID, while 3.27.5 / 3.28.1 change those UIDs: either
 * can leave the collector without the namespace's owner until kube-controller-manager restarts (doctor's
 * namespace-owner-gone). Operators v1.32 and v1.34 keep the Installation's finalizer while the namespace exists, so
 * the seed's own night (3.27.4, the hand upgrade to 3.28.1, the CRDs deleted, then restore) waited for ever.
 * After a grace the collector would have long used, restore deletes such a namespace as the collector would: its
 * owner is gone, so everything in it is already due for deletion. Decided from live objects only.
 */
import { INSTALLATION } from '../calico/detect.js';
import { INSTALLATION_NUDGE_ANNOTATION } from '../calico/knowledge.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';

/** How long a namespace may outlive its owner before restore takes it for lost by the collector. */
export const COLLECTOR_GRACE_MS = 60_000;

/** Asked on each turn of restore's wait for deletions, with the namespaces whose owner is gone now. */
export class OrphanedNamespaces {
  private readonly firstSeen = new Map<string, number>();
  private readonly deleted = new Set<string>();
  private nudged = false;

  constructor(
    private readonly client: KubeClient,
    private readonly reporter: Reporter,
    private readonly graceMs = COLLECTOR_GRACE_MS,
  ) {}

  async tick(orphaned: readonly string[], now = Date.now()): Promise<void> {
    for (const ns of orphaned) {
      const since = this.firstSeen.get(ns) ?? now;
      this.firstSeen.set(ns, since);
      if (this.deleted.has(ns) || now - since < this.graceMs) continue;
      this.deleted.add(ns);
      this.reporter.warn(
        'CNR_RESTORE_COLLECT_NAMESPACE',
        `namespace ${ns} outlived its owner for ${Math.round((now - since) / 1000)} s: kube-controller-manager's garbage collector has lost it ` +
          '(doctor: namespace-owner-gone); deleting it as the collector would. Restart kube-controller-manager afterwards so that its graph is right again',
        { namespace: ns },
      );
      await this.client.delete(K.namespace, undefined, ns).catch(() => undefined);
    }
    if (this.nudged || !this.deleted.size) return;
    for (const ns of this.deleted) if (await this.client.getOrUndefined(K.namespace, undefined, ns)) return;
    // Operator v1.32 watches no namespace: a change to the Installation makes it see the namespace gone now, not at
    // its periodic reconcile up to five minutes later. Only an Installation being deleted is touched.
    this.nudged = true;
    const installation = await this.client.getOrUndefined(INSTALLATION, undefined, 'default');
    if (installation?.metadata.deletionTimestamp)
      await this.client
        .mergePatch(INSTALLATION, undefined, 'default', { metadata: { annotations: { [INSTALLATION_NUDGE_ANNOTATION]: String(now) } } })
        .catch(() => undefined);
  }
}
