/** What a plan says about who reconciles Calico besides its operator (src/calico/gitops.ts judges them). */
import { describeReconciler, type Reconciler } from '../calico/gitops.js';
import type { PlanFinding } from './types.js';

/** One finding per owner: apply refuses the blocking ones (exit 5) unless --owner-suspended, the others are said. */
export function reconcilerFindings(reconcilers: Reconciler[]): PlanFinding[] {
  return reconcilers.map((r) => ({
    id: 'gitops-owner',
    severity: r.blocksApply ? 'warning' : 'info',
    title: describeReconciler(r),
    objects: r.objects,
    details: [`suspend it with: ${r.suspendCommand}`],
    action: 'none',
    plan: r.blocksApply
      ? `apply refuses while it may revert the change: suspend it (${r.suspendCommand}), then apply with --owner-suspended`
      : r.state === 'syncs-on-git-change'
        ? `apply goes ahead; a commit to its Git source during or after the change syncs its manifests over it (${r.suspendCommand} stops that)`
        : 'apply goes ahead: it does not revert live changes',
  }));
}
