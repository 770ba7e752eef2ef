/**
 * The shipped releases that no other test installs, each on its own real programs (calico-releases.pins): 3.26.5
 * under the tigera operator v1.30.11, and the patch releases 3.27.5 under v1.32.12 and 3.28.5 under v1.34.13 (their
 * own API server, kube-controllers, calicoctl and node side, not their minor's), as `npm run cluster -- up --calico
 * V` runs them. node-side-releases-support.ts says what each test checks.
 */
import { describeReleases } from './node-side-releases-support.js';

describeReleases([
  { version: '3.26.5', operator: 'v1.30.11', nodeTree: 'v3.26.5' },
  { version: '3.27.5', operator: 'v1.32.12', nodeTree: 'v3.27.5' },
  { version: '3.28.5', operator: 'v1.34.13', nodeTree: 'v3.28.5' },
]);
