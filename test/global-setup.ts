import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildCacheRoot } from '../src/dev/local-cluster/paths.js';
import { LocalCluster } from '../src/dev/local-cluster/cluster.js';
import { packageRoot } from '../src/core/package-root.js';
import { e2eWorkers, slotBaseFromEnv, slotCluster, type SlotBase } from './support/e2e-clusters.js';
import { writeMatrixDocs } from './support/path-matrix-docs.js';

/**
 * The end-to-end files run on up to `e2eWorkers()` clusters at once, one per vitest worker slot, each started by
 * the first file that runs in its slot (test/e2e/cluster-setup.ts) and reused by the next. This runs once, in the
 * main process: it tells the workers which clusters are theirs, and afterwards stops every slot's cluster that was
 * not already running when the run began (one started with `npm run cluster -- up` is left running).
 */
export default async function setup(project: TestProject) {
  const base = slotBaseFromEnv();
  const workers = e2eWorkers();
  const slots = Array.from({ length: workers }, (_, i) => slotCluster(i + 1, base));
  const running = new Set<string>();
  for (const s of slots) if (await new LocalCluster({ name: s.name, portBase: s.portBase }).isUp()) running.add(s.name);
  console.log(
    `[e2e clusters] up to ${workers} files at once, each on its own cluster: ${slots.map((s) => `${s.name} (:${s.portBase}${running.has(s.name) ? ', reused' : ''})`).join(', ')}`,
  );
  project.provide('e2eSlotBase', base);
  const startedAt = new Date().toISOString();
  return async () => {
    stopBackgroundBuilds();
    const matrix = writeMatrixDocs(path.join(buildCacheRoot(), 'path-matrix.tsv'), path.join(packageRoot(), 'docs', 'calico-differences.md'), startedAt);
    if (matrix) console.log(matrix);
    for (const s of slots) {
      if (running.has(s.name)) continue;
      const cluster = new LocalCluster({ name: s.name, portBase: s.portBase });
      if (cluster.readState()) await cluster.down();
    }
  };
}

/**
 * test/prereqs.sh builds Calico's programs in the background (its own process group); a run that ends before them
 * (one file, or failures) does not leave compilers running after it. A half-built program is not cached.
 * CNI_REWIND_KEEP_BUILDER=1 leaves it running: for a run of one file beside a longer run that started the builder
 * (the builder and its PID file are shared by every checkout on the machine).
 */
function stopBackgroundBuilds(): void {
  if (process.env.CNI_REWIND_KEEP_BUILDER === '1') return;
  try {
    const pid = Number(readFileSync(path.join(buildCacheRoot(), 'calico-programs-builder.pid'), 'utf8').trim());
    // Only that builder: a PID file outlives its process, and PIDs are reused.
    if (pid > 0 && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('build-programs')) process.kill(-pid, 'SIGTERM');
  } catch {
    // no builder, or it has ended
  }
}

declare module 'vitest' {
  export interface ProvidedContext {
    e2eSlotBase: SlotBase;
  }
}
