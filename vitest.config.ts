import { defineConfig } from 'vitest/config';

// Two projects: unit tests (next to the code, no cluster) and end-to-end tests against the real
// control plane (test/e2e), which run one file at a time because they share one cluster.
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'providers/**/*.test.ts', 'examples/**/*.test.ts', 'test/docs/**/*.test.ts', 'test/architecture/**/*.test.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
});
