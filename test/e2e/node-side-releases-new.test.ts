/**
 * The releases users upgrade to today, on their own real programs: 3.31.7 under the tigera operator v1.40.15 and
 * 3.32.1 under v1.42.3 (control-plane/calico-releases.pins), each with its own API server, kube-controllers, calicoctl
 * and node side, as `npm run cluster -- up --calico V` runs them (node-side-releases-support.ts says what each test
 * checks). From 3.31 the operator renders the API server in calico-system, not calico-apiserver.
 */
import { describeReleases } from './node-side-releases-support.js';

describeReleases([
  { version: '3.31.7', operator: 'v1.40.15', nodeTree: 'v3.31.7' },
  { version: '3.32.1', operator: 'v1.42.3', nodeTree: 'v3.32.1' },
]);
