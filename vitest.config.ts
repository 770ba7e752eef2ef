import { defineConfig } from 'vitest/config';
import { e2eWorkers } from './test/support/e2e-clusters.js';
import DurationSequencer from './test/support/duration-sequencer.js';

// Two projects in one pool of workers: unit tests (next to the code, no cluster) and end-to-end tests, each e2e file
// on the cluster of its worker slot (test/e2e/cluster-setup.ts), so up to e2eWorkers() files run at once without
// sharing any cluster state. Longest files start first; the run ends with a table of every file's wall time.
export default defineConfig({
  test: {
    reporters: ['default', './test/support/timing-reporter.ts'],
    maxWorkers: e2eWorkers(),
    sequence: { sequencer: DurationSequencer },
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            'src/**/*.test.ts',
            'providers/**/*.test.ts',
            'examples/**/*.test.ts',
            'test/docs/**/*.test.ts',
            'test/architecture/**/*.test.ts',
            'test/support/**/*.test.ts',
          ],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          setupFiles: ['test/e2e/cluster-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
});
