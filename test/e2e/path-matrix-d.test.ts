/**
 * Issue 30's path matrix, part D (path-matrix-support.ts says what each path checks): down from 3.32, to its
 * neighbour and the jump users make back to 3.28. Both leave 3.32's policy naming behind: the plan's step
 * rename-policies-back gives default-tier policies their old names, and the test reads them by name with the
 * target release's calicoctl.
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.32.1', to: '3.31.7' },
  { from: '3.32.1', to: '3.28.5' },
]);
