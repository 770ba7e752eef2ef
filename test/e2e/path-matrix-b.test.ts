/**
 * Issue 30's path matrix, part B (path-matrix-support.ts says what each path checks): the older releases, 3.26 to
 * 3.28, with the seed incident's own path (3.27.4 -> 3.28.1). Operator v1.32 (3.27) clears its finalizer on a deleted
 * Installation only once the calico-apiserver namespace is gone (installation/core_controller.go:901-913); the
 * support's touches make it look again every 10 s instead of at its 5-minute periodic reconcile.
 *
 * 3.26.5 -> 3.27.5 is in part D (the restart of kube-controller-manager it needs is said there).
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.27.5', to: '3.26.5', fullMatrixOnly: true },
  { from: '3.27.4', to: '3.28.1' },
  { from: '3.28.5', to: '3.27.5' },
]);
