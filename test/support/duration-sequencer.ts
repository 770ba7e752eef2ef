import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { calicoProgramCached } from '../../src/dev/local-cluster/calico-programs.js';
import { PROGRAMS_FOR_TESTS } from '../../src/dev/local-cluster/build-programs.js';
import { knownDurations } from './test-timings.js';

/**
 * Longest file first, over both projects: the end-to-end files run in parallel on one cluster each, so the run
 * ends when its longest file does unless that file starts first; the seconds-long unit files fill the gaps.
 * Durations come from test/file-durations.json (committed) and the last runs on this machine; a file not measured
 * yet counts as a minute (e2e) or a second (unit).
 *
 * While Calico's programs are not all built yet (a cold machine: test/prereqs.sh builds them in the background),
 * the files that run them go last: started first they would only hold every worker while waiting for the builds.
 */
export default class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = files[0]?.project.config.root ?? process.cwd();
    const known = knownDurations(root);
    const guess = (s: TestSpecification) => known.get(path.relative(root, s.moduleId)) ?? (s.project.name === 'e2e' ? 60_000 : 1_000);
    const cold = !PROGRAMS_FOR_TESTS.every(([kind, tag]) => calicoProgramCached(kind, tag));
    const waits = (s: TestSpecification) => (cold && s.project.name === 'e2e' && runsCalicoPrograms(s.moduleId) ? 1 : 0);
    return [...files].sort((a, b) => waits(a) - waits(b) || guess(b) - guess(a) || a.moduleId.localeCompare(b.moduleId));
  }
}

/** A file that runs Calico's real programs (through the real-Calico helpers, `cluster up --calico`, the supervisor, or the demo). */
function runsCalicoPrograms(file: string): boolean {
  try {
    return /calico-support|node-side-releases-support|path-matrix-support|clusterCli\(|ensureCalicoProgram|startCalico\(|cni-rewind demo|'demo'/.test(
      readFileSync(file, 'utf8'),
    );
  } catch {
    return false;
  }
}
