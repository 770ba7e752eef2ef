/** Who reconciles Calico besides its operator: each Argo CD / Flux owner, as src/calico/gitops.ts judged it. */
import { describeReconciler, type Reconciler } from '../../calico/gitops.js';
import type { CalicoState } from '../state.js';
import type { Check, Finding } from '../types.js';

const WHY: Record<Reconciler['state'], string> = {
  'self-healing':
    'It puts its own manifests back over live changes: an upgrade or downgrade made beside it (cni-rewind apply, kubectl) is reverted ' +
    'mid-change, leaving Calico parts of two releases. cni-rewind apply refuses while it reconciles (exit 5).',
  unknown:
    'Its marks are on Calico objects but its own object could not be read, so nobody can tell whether it reverts live changes. ' +
    'cni-rewind apply refuses until you say it is suspended (--owner-suspended).',
  'syncs-on-git-change': 'Automated sync without selfHeal keeps live changes until the next commit to its Git source, which syncs its manifests over them.',
  manual: 'It syncs only when someone syncs it; a sync after a cni-rewind change puts its manifests back.',
  suspended: 'Suspended: it reconciles nothing until resumed; resuming it puts its manifests back unless Git has the new release.',
};

const gitOpsOwners: Check = {
  name: 'GitOps owners',
  run(state: CalicoState): Finding[] {
    return (state.reconcilers ?? []).map((r) => ({
      id: 'gitops-owner',
      severity: r.blocksApply ? 'warning' : 'info',
      title: describeReconciler(r),
      objects: r.objects,
      why: WHY[r.state],
      fix: r.blocksApply
        ? `Suspend it for the change: ${r.suspendCommand}; then cni-rewind apply <plan> --owner-suspended. Afterwards, put the new release into its Git source before resuming it.`
        : `Put the new release into its Git source as part of the change (to stop it meanwhile: ${r.suspendCommand}).`,
    }));
  },
};

export const gitOpsChecks: Check[] = [gitOpsOwners];
