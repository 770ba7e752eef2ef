import type { TestProject } from 'vitest/node';
import { KubeClient } from '../src/kube/client.js';
import { LocalCluster } from '../src/dev/local-cluster/cluster.js';

/**
 * Starts the real control plane once for all end-to-end tests (or reuses one started with
 * `npm run cluster -- up`), prints the API server's version so the run shows what it talked to,
 * and stops it afterwards if it started it.
 */
export default async function setup(project: TestProject) {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e', log: (l) => console.log(`[e2e cluster] ${l}`) });
  const reused = await cluster.isUp();
  const state = await cluster.up();
  const client = await KubeClient.connect({ kubeconfig: state.kubeconfig });
  const v = await client.serverVersion();
  client.close();
  console.log(`[e2e cluster] tests talk to a real kube-apiserver ${v.gitVersion} at ${state.server}${reused ? ' (reused)' : ''}`);
  project.provide('kubeconfig', state.kubeconfig);
  project.provide('kubeVersion', v.gitVersion);
  process.env.KUBECONFIG = state.kubeconfig;
  return async () => {
    if (!reused) await cluster.down();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfig: string;
    kubeVersion: string;
  }
}
