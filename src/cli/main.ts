#!/usr/bin/env node
import { BUNDLE_FORMAT_VERSION } from '../bundle/format.js';
import { ExitCode } from '../core/errors.js';
import { toolVersion } from '../core/version.js';
import { cachedHelp, helpWidth } from './help-cache.js';

/**
 * The answers that need no argument parser, for exactly these command lines: `--version`, `version` and `--help`
 * (`-h`) on their own. They print what the parser would print (tests compare them); everything else, and these
 * under another name (`kubectl cni-rewind`) or without a usable help cache, goes through the parser.
 */
export function fastAnswer(argv: readonly string[], columns: number | undefined, asKubectlPlugin: boolean): string | undefined {
  if (argv.length !== 1 || asKubectlPlugin) return undefined;
  const [word] = argv;
  if (word === '--version') return `${toolVersion()}\n`;
  if (word === 'version') return `cni-rewind ${toolVersion()} (bundle format ${BUNDLE_FORMAT_VERSION}, node ${process.version})\n`;
  if (word === '--help' || word === '-h') return cachedHelp(helpWidth(columns));
  return undefined;
}

const invokedDirectly = (() => {
  const arg = process.argv[1] ?? '';
  return /(?:main\.js|cni-rewind|kubectl-cni_rewind)$/.test(arg);
})();
if (invokedDirectly) {
  // The AWS SDK warns on every run under Node 20 that its releases after January 2027 need Node 22. This tool pins
  // an SDK release that supports Node 20 (its supported range), so the eight-line warning tells the user nothing
  // they can act on; a user who wants it back sets the variable to anything but "true".
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const argv = process.argv.slice(2); // what yargs' hideBin gives under Node, without loading yargs
  const fast = fastAnswer(argv, process.stdout.columns, (process.argv[1] ?? '').endsWith('kubectl-cni_rewind'));
  if (fast !== undefined) process.stdout.write(fast);
  else
    import('./parser.js')
      .then(({ main }) => main(argv))
      .catch((err) => {
        process.stderr.write(`cni-rewind: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exitCode = ExitCode.BadInput;
      });
}
