/**
 * The only runtime import of @kubernetes/client-node (connection.ts loads this module when a command first opens
 * the cluster; everything else takes the library's types only). The library is 900 module files with its own
 * dependencies, and resolving them was most of a cluster command's start-up (docs/BENCHMARKS.md, start-up): so
 * `npm run build` replaces what tsc compiles from this file with one bundled file of KubeConfig and
 * what it uses (tools/bundle-kube-library.mjs). Tests that import src/ get the library itself through this re-export.
 */
export { KubeConfig } from '@kubernetes/client-node';
