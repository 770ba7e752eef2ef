/**
 * The only runtime import of yargs (parser.ts; elsewhere its types only). yargs and the packages it imports are
 * about 40 module files, loaded by every command that is not answered from the help cache: `npm run build`
 * replaces what tsc compiles from this file with one bundled file (tools/bundle-libraries.mjs), which loads in
 * about half the time (docs/BENCHMARKS.md, start-up). Tests that import src/ get yargs itself through this re-export.
 */
export { default as yargs } from 'yargs';
export { hideBin } from 'yargs/helpers';
