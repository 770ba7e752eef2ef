/**
 * Issue 30's path matrix, part C (path-matrix-support.ts says what each path checks): the older releases, 3.28 to
 * 3.30, up and down one minor and up two.
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.28.5', to: '3.29.7' },
  { from: '3.29.7', to: '3.28.5' },
  { from: '3.29.7', to: '3.30.7' },
  { from: '3.30.7', to: '3.29.7', fullMatrixOnly: true },
  { from: '3.28.5', to: '3.30.7', fullMatrixOnly: true },
]);
