/**
 * The step remove-operator-leftovers (a downgrade below a newer operator generation, finding
 * newer-operator-leftovers): what a newer tigera operator put into the cluster that the target operator never
 * clears. Run while the operator is paused, right before the Installation is rewritten for the target.
 * - Installation default: every operator finalizer the target does not define. The v1.34+ core controller waits for
 *   every finalizer but its own before it tears Calico down and clears its own, so one left (3.30's whisker and
 *   goldmane after a downgrade to 3.29) makes every later delete of the Installation hang. Read live again: one a
 *   newer controller added after the plan (guardian, for a ManagementClusterConnection made since) goes too.
 * - The newer operator's finalizers on its other custom resources (v1.42's Istio), which the target does not know.
 * - The TigeraStatus reports only a newer operator writes, which would keep their last condition for ever.
 */
import { leftoversUnknownTo, operatorFinalizersNotOf } from '../calico/operator-generations.js';
import type { Release } from '../calico/release.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType } from '../kube/discovery.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { TIGERA_STATUS } from '../calico/detect.js';

const INSTALLATION_CRD = 'installations.operator.tigera.io';
const CONFLICT_RETRIES = 5;

/**
 * Take `unwanted(finalizers)` off object `name`, with its resourceVersion so that a write by another controller in
 * between is not undone (a conflict re-reads). Returns the finalizers removed (none when it has none of them or is gone).
 */
async function dropFinalizers(client: KubeClient, type: ResourceType, name: string, unwanted: (finalizers: string[]) => string[]): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    const live: KubeObject | undefined = await client.getOrUndefined(type, undefined, name);
    const finalizers = live?.metadata.finalizers ?? [];
    const drop = unwanted(finalizers);
    if (!live || !drop.length) return [];
    try {
      const kept = finalizers.filter((f) => !drop.includes(f));
      await client.mergePatch(type, undefined, name, { metadata: { resourceVersion: live.metadata.resourceVersion, finalizers: kept.length ? kept : null } });
      return drop;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.conflict) || attempt >= CONFLICT_RETRIES) throw err;
    }
  }
}

/** Runs the step for a downgrade to `target`; returns its one-line summary. */
export async function removeOperatorLeftovers(client: KubeClient, target: Release): Promise<string> {
  const leftovers = leftoversUnknownTo(target.version);
  const done: string[] = [];

  const instCrd = await client.getOrUndefined(K.crd, undefined, INSTALLATION_CRD);
  if (instCrd) {
    const removed = await dropFinalizers(client, crdResourceType(instCrd), 'default', (f) => operatorFinalizersNotOf(f, target.version));
    if (removed.length) done.push(`finalizers ${removed.join(', ')} from Installation default`);
  }

  for (const { crd, finalizer } of leftovers.customResourceFinalizers) {
    const def = await client.getOrUndefined(K.crd, undefined, crd);
    if (!def) continue;
    const type = crdResourceType(def);
    for (const o of await client.listAll(type)) {
      const removed = await dropFinalizers(client, type, o.metadata.name!, (f) => f.filter((x) => x === finalizer));
      if (removed.length) done.push(`finalizer ${finalizer} from ${def.spec.names.kind} ${o.metadata.name}`);
    }
  }

  const deleted: string[] = [];
  if (await client.getOrUndefined(K.crd, undefined, `${TIGERA_STATUS.plural}.${TIGERA_STATUS.group}`)) {
    for (const name of leftovers.tigeraStatuses) if (await client.delete(TIGERA_STATUS, undefined, name)) deleted.push(name);
  }
  if (deleted.length) done.push(`TigeraStatus ${deleted.join(', ')} deleted`);
  return done.length ? `removed ${done.join('; ')}` : `nothing a newer operator left is there (any more) for the ${target.version} operator`;
}
