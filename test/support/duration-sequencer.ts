import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { knownDurations } from './test-timings.js';

/**
 * Longest file first, over both projects: the end-to-end files run in parallel on one cluster each, so the run
 * ends when its longest file does unless that file starts first; the seconds-long unit files fill the gaps.
 * Durations come from test/file-durations.json (committed) and the last runs on this machine; a file not measured
 * yet counts as a minute (e2e) or a second (unit).
 */
export default class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = files[0]?.project.config.root ?? process.cwd();
    const known = knownDurations(root);
    const guess = (s: TestSpecification) => known.get(path.relative(root, s.moduleId)) ?? (s.project.name === 'e2e' ? 60_000 : 1_000);
    return [...files].sort((a, b) => guess(b) - guess(a) || a.moduleId.localeCompare(b.moduleId));
  }
}
