/**
 * Issue 30's path matrix, part A (path-matrix-support.ts says what each path checks): the newest releases. Paths
 * down from 3.32 are not here: a default-tier policy 3.32 stores under its v3 name cannot be read by name under
 * 3.31 (docs/calico-differences.md, "3.32's policy names"), which the plan does not handle yet.
 */
import { describePaths } from './path-matrix-support.js';

describePaths([
  { from: '3.30.7', to: '3.31.7' },
  { from: '3.31.7', to: '3.32.1' },
  { from: '3.31.7', to: '3.30.7' },
  { from: '3.30.7', to: '3.32.1' },
]);
