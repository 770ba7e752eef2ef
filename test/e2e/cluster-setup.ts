/**
 * Runs before every end-to-end file, in its worker: the file gets the cluster of its worker slot
 * (test/support/e2e-clusters.ts). A slot's first file starts it and records what a fresh cluster has; every later
 * file finds it reset to that (test/support/cluster-reset.ts: Calico's programs stopped, everything the previous file
 * created deleted). Everything a file reads to find its cluster is set here: KUBECONFIG, and CNI_REWIND_CLUSTER_NAME /
 * CNI_REWIND_E2E_PORT_BASE for the files that hold a LocalCluster handle themselves or derive ports from it.
 * A failed test's message gets what held it up (test/support/failure-diagnostics.ts): the next file's reset wipes it.
 */
import path from 'node:path';
import { beforeEach, inject } from 'vitest';
import { KubeClient } from '../../src/kube/client.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { currentSlot, slotCluster } from '../support/e2e-clusters.js';
import { readBaseline, recordBaseline, resetToBaseline } from '../support/cluster-reset.js';
import { clusterDiagnostics } from '../support/failure-diagnostics.js';

const slot = slotCluster(currentSlot(), inject('e2eSlotBase'));
process.env.CNI_REWIND_CLUSTER_NAME = slot.name;
process.env.CNI_REWIND_E2E_PORT_BASE = String(slot.portBase);
const log = (l: string) => console.log(`[e2e cluster ${slot.name}] ${l}`);
const cluster = new LocalCluster({ name: slot.name, portBase: slot.portBase, log });
const reused = await cluster.isUp();
const state = await cluster.up();
process.env.KUBECONFIG = state.kubeconfig;

const baselineFile = path.join(state.workDir, 'baseline.json');
const baseline = reused ? readBaseline(baselineFile) : undefined;
const client = await KubeClient.connect({ kubeconfig: state.kubeconfig });
try {
  if (!baseline) {
    await recordBaseline(client, baselineFile);
  } else {
    await cluster.stopCalico();
    const removed = await resetToBaseline(client, baseline);
    const n = Object.values(removed).reduce((sum, byName) => sum + Object.keys(byName).length, 0);
    if (n) log(`reset: removed ${n} object(s) an earlier file left`);
  }
} finally {
  client.close();
}

beforeEach(({ onTestFailed }) => {
  const startedAt = Date.now();
  onTestFailed(async ({ task }) => {
    const text = await clusterDiagnostics(cluster, state.kubeconfig, startedAt).catch((e: Error) => `cluster diagnostics failed: ${e.message}`);
    for (const err of task.result?.errors ?? []) err.message = `${err.message}\n${text}`;
  });
});
