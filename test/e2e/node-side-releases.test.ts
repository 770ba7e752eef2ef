/**
 * Calico's node side from each release's own tree under its own operator, as `npm run cluster -- up --calico V` runs
 * it (node-side-releases-support.ts says what each test checks): 3.29.7 under the real v1.36.16 operator, 3.30.7
 * under v1.38.13 and 3.27.4 (the seed's release) under v1.32.10. 3.31 and 3.32 are node-side-releases-new.test.ts,
 * so the two files run side by side.
 */
import { describeReleases } from './node-side-releases-support.js';

describeReleases([
  { version: '3.29.7', operator: 'v1.36.16', nodeTree: 'v3.29.7' },
  { version: '3.30.7', operator: 'v1.38.13', nodeTree: 'v3.30.7' },
  { version: '3.27.4', operator: 'v1.32.10', nodeTree: 'v3.27.4' },
]);
