/**
 * Issue 30's path matrix, part B (path-matrix-support.ts says what each path checks): the older releases, 3.26 to
 * 3.28, up and down, with the seed incident's own path (3.27.4 -> 3.28.1). Paths to 3.27 are slow at the end: operator
 * v1.32 removes its finalizer from the deleted Installation only once the calico-apiserver namespace is gone, and it
 * watches no namespace, so it sees that at its periodic reconcile, every 5 minutes (installation/core_controller.go
 * :901-913 and :325, utils.PeriodicReconcileTime); on a fresh 3.27.5 install too, without cni-rewind.
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.26.5', to: '3.27.5' },
  { from: '3.27.5', to: '3.26.5' },
  { from: '3.27.4', to: '3.28.1' },
  { from: '3.28.5', to: '3.27.5' },
]);
