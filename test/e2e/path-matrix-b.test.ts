/**
 * Issue 30's path matrix, part B (path-matrix-support.ts says what each path checks): the older releases, 3.26 to
 * 3.28, with the seed incident's own path (3.27.4 -> 3.28.1). Operator v1.32 (3.27) clears its finalizer on a deleted
 * Installation only once the calico-apiserver namespace is gone (installation/core_controller.go:901-913); the
 * support's touches make it look again every 10 s instead of at its 5-minute periodic reconcile.
 *
 * Not here: 3.26.5 -> 3.27.5. In two runs of three the calico-apiserver namespace stayed Active for over 7 minutes
 * after its owner (APIServer default) was deleted, while other objects of the same owner were collected and
 * kube-controller-manager kept logging "failed to list *v1.PartialObjectMetadata: the server could not find the
 * requested resource" (the harness deletes and re-creates Calico's CRDs between paths): a garbage collector stalled
 * in the test cluster, not yet proven, so the path would fail for a reason that is not the tool's (open in issue 30).
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.27.5', to: '3.26.5' },
  { from: '3.27.4', to: '3.28.1' },
  { from: '3.28.5', to: '3.27.5' },
]);
