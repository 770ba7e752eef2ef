/**
 * Issue 30's path matrix, part A (path-matrix-support.ts says what each path checks): up to and between the newest
 * releases. Down from 3.32 is part D.
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.30.7', to: '3.31.7' },
  { from: '3.31.7', to: '3.32.1' },
  { from: '3.31.7', to: '3.30.7' },
  { from: '3.30.7', to: '3.32.1', fullMatrixOnly: true },
]);
