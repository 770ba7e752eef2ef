/**
 * `--existing replace` deletes a differing object and creates it again. That is safe only for an object nothing
 * else holds: a finalizer keeps a deleted object Terminating until its controller runs its teardown (the tigera
 * operator's `tigera.io/operator-cleanup` on Installation `default`: deleted while the restore pauses the operator,
 * the resumed operator uninstalls Calico, pkg/controller/installation/core_controller.go), and the garbage
 * collector deletes every object whose owner is deleted. Such an object is updated in place instead.
 */
import { OPERATOR_GROUP } from '../calico/knowledge.js';
import { groupOf, type KubeObject } from '../kube/types.js';

/**
 * Why the live object must not be deleted to replace it (undefined: it may be). `dependents`: the objects found
 * naming it as their owner (OwnerLookup.dependentsOf, which cannot see every type: there is no reverse index of
 * ownerReferences); the operator's custom resources are known owners even when none is found: the operator sets
 * each as owner of everything it renders for it (pkg/controller/utils/component.go SetControllerReference).
 */
export function whyNotDeleted(live: KubeObject, dependents: readonly string[] = []): string | undefined {
  const finalizers = live.metadata.finalizers ?? [];
  if (finalizers.length)
    return `it has finalizers (${finalizers.join(', ')}): deleted, it would stay Terminating and its controller would tear down what it manages`;
  if (dependents.length) return dependentsReason(dependents);
  if (groupOf(live.apiVersion) === OPERATOR_GROUP)
    return 'the tigera operator makes it the owner of everything it renders: deleted, the garbage collector would delete those';
  return undefined;
}

/** Why an object others name as their owner is not deleted. */
export function dependentsReason(dependents: readonly string[]): string {
  const shown = dependents.slice(0, 3).join(', ') + (dependents.length > 3 ? ` and ${dependents.length - 3} more` : '');
  return `${dependents.length} object(s) name it as their owner (${shown}): deleted, the garbage collector would delete them`;
}

export const UPDATED_IN_PLACE = 'updated in place, not deleted and re-created';

/** The note of a replace done as an update in place. */
export function updatedInPlaceNote(why: string): string {
  return `${UPDATED_IN_PLACE} (--existing replace never deletes such an object): ${why}`;
}
