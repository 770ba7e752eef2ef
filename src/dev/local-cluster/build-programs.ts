/**
 * `node dist/src/dev/local-cluster/build-programs.js`: builds (or finds cached) every Calico program the end-to-end
 * tests run, one after the other in the order the longest tests need them. test/prereqs.sh starts it in the
 * background so that a cold machine compiles while the unit tests and the files without Calico's programs run; a
 * test that needs a program first waits for it on the build lock instead of building it twice.
 */
import { ensureCalicoProgram, type CalicoProgramKind } from './calico-programs.js';

/** Kind and tag, in the order the test files that start first (the longest) need them. */
export const PROGRAMS_FOR_TESTS: ReadonlyArray<readonly [CalicoProgramKind, string]> = [
  ['calico', 'v3.28.1'],
  ['operator', 'v1.32.10'],
  // The seed's 3.27.4 on its own API server and kube-controllers (most files install it).
  ['calico', 'v3.27.4'],
  ['operator', 'v1.34.3'],
  ['ipam-driver', 'v3.28.1'],
  ['operator', 'v1.36.16'],
  ['calico', 'v3.29.7'],
  ['operator', 'v1.38.13'],
  ['calico', 'v3.30.7'],
  // The node side last: only `npm run cluster -- up --calico` and the node-side tests run it (each minor its own
  // tree: node-side-releases.test.ts runs 3.29, 3.30 and 3.27).
  ['node-side', 'v3.28.1'],
  ['node-side', 'v3.29.7'],
  ['node-side', 'v3.30.7'],
  ['node-side', 'v3.27.4'],
  // 3.31 and 3.32 (calico-releases.pins): node-side-releases-new.test.ts.
  ['operator', 'v1.40.15'],
  ['calico', 'v3.31.7'],
  ['node-side', 'v3.31.7'],
  ['operator', 'v1.42.3'],
  ['calico', 'v3.32.1'],
  ['node-side', 'v3.32.1'],
  // 3.26.5 and the patch releases 3.27.5 and 3.28.5, each on its own: node-side-releases-older.test.ts.
  ['operator', 'v1.30.11'],
  ['calico', 'v3.26.5'],
  ['node-side', 'v3.26.5'],
  ['operator', 'v1.32.12'],
  ['calico', 'v3.27.5'],
  ['node-side', 'v3.27.5'],
  ['operator', 'v1.34.13'],
  ['calico', 'v3.28.5'],
  ['node-side', 'v3.28.5'],
];

async function main(): Promise<number> {
  let failed = 0;
  for (const [kind, tag] of PROGRAMS_FOR_TESTS) {
    try {
      const bin = await ensureCalicoProgram(kind, tag, (l) => console.log(l));
      console.log(`[build-programs] ${kind} ${tag}: ${bin}`);
    } catch (err) {
      // The tests that run it fail loudly on their own; the others still run.
      failed++;
      console.log(`[build-programs] could not build Calico's ${kind} ${tag}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return failed ? 1 : 0;
}

if (process.argv[1] && /build-programs\.[jt]s$/.test(process.argv[1])) main().then((code) => process.exit(code));
