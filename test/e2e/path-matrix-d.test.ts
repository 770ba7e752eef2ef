/**
 * Issue 30's path matrix, part D (path-matrix-support.ts says what each path checks): down from 3.32, to its
 * neighbour and the jump users make back to 3.28. Both leave 3.32's policy naming behind: the plan's step
 * rename-policies-back gives default-tier policies their old names, and the test reads them by name with the
 * target release's calicoctl.
 *
 * And 3.26.5 -> 3.27.5 (here for the files' lengths; part B has the other old releases): 3.27.5's API server gives
 * projectcalico.org/v3 objects UIDs of their own (3.26's Profiles carried their Namespace's). Without the restart of
 * kube-controller-manager the plan asks for (finding v3-uids-change), its garbage collector never collected the
 * calico-apiserver namespace once APIServer default was deleted, and operator v1.32's Installation finalizer waited
 * for it for ever (3 runs of 3; the collector's log showed the Namespace's node replaced by the Profile's of the same
 * UID, then dropped).
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.32.1', to: '3.31.7', fullMatrixOnly: true },
  { from: '3.32.1', to: '3.28.5' },
  { from: '3.26.5', to: '3.27.5' },
]);
