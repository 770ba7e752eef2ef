import type { Argv } from 'yargs';
import { hideBin, yargs } from './cli-library.js';
import { ExitCode } from '../core/errors.js';
import { toolVersion } from '../core/version.js';
import { commandName, commandTable, commandWord, type CommandEntry } from './commands/index.js';
import type { Command, GlobalArgs } from './context.js';
import { helpWidth } from './help-cache.js';

/**
 * Which command modules to import for this command line: only the one it names (`--help`, `version` and a
 * mistyped command import none of the others), or all of them (shell completion, which may complete any
 * command's flags).
 */
async function loadCommands(argv: readonly string[], all: boolean): Promise<Map<CommandEntry, Command<any>>> {
  const word = commandWord(argv);
  const wanted = all || argv.includes('--get-yargs-completions') ? commandTable : commandTable.filter((e) => commandName(e) === word);
  return new Map(await Promise.all(wanted.map(async (e) => [e, await e.load()] as const)));
}

/**
 * Build the yargs parser (exported so tests and the docs checker can parse without running). Commands whose
 * module was not imported are registered by name and description only; should yargs choose one of them after
 * all (the command word was guessed wrong), the command line is parsed again with every command loaded.
 */
export async function buildParser(argv: string[], opts: { allCommands?: boolean; width?: number } = {}) {
  const loaded = await loadCommands(argv, !!opts.allCommands);
  let parser: Argv<any> = yargs(argv)
    .scriptName(process.argv[1]?.endsWith('kubectl-cni_rewind') ? 'kubectl cni-rewind' : 'cni-rewind')
    .usage('$0 <command> [options]\n\nMake risky Calico changes safe to attempt and quick to undo.')
    .option('kubeconfig', { type: 'string', describe: 'path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)', global: true })
    .option('context', { type: 'string', describe: 'kubeconfig context to use', global: true })
    .option('as', { type: 'string', describe: 'impersonate this user for every Kubernetes request', global: true })
    .option('as-group', { type: 'string', array: true, describe: 'impersonate this group (repeatable)', global: true })
    .option('request-timeout', { type: 'string', describe: 'give up on one Kubernetes request after this long (30s, 2m; 0 = never)', global: true })
    .option('output', { alias: 'o', choices: ['table', 'json', 'yaml'] as const, default: 'table' as const, describe: 'output format', global: true })
    .option('yes', { alias: 'y', type: 'boolean', default: false, describe: 'do not ask for confirmation', global: true })
    .option('verbose', { alias: 'v', type: 'boolean', default: false, describe: 'show debug messages and stack traces', global: true })
    .option('quiet', { alias: 'q', type: 'boolean', default: false, describe: 'only print results and errors', global: true })
    .option('color', { type: 'boolean', default: true, describe: 'colour output (--no-color to disable; NO_COLOR is honoured)', global: true })
    .completion('completion', 'print a bash/zsh completion script')
    .version(toolVersion())
    .help()
    .alias('help', 'h')
    .strict()
    .middleware(
      ((argv: Record<string, unknown>, y: unknown) => {
        // yargs turns a repeated single-value option into an array, which the commands do not expect: say so instead.
        // `--nodes` may be repeated as well as comma-separated (the commands split and join it).
        const arrays = new Set<string>([...((y as any).getOptions?.().array ?? []), 'nodes']);
        const dup = Object.keys(argv).find((k) => /^[a-z][a-z0-9-]+$/.test(k) && Array.isArray(argv[k]) && !arrays.has(k));
        if (dup) usageError(`--${dup} was given more than once; give it once`);
      }) as any,
      true,
    )
    .demandCommand(1, 'name a command; see --help')
    .recommendCommands()
    .wrap(opts.width ?? helpWidth(process.stdout.columns))
    .epilogue(
      'Exit codes: 0 success · 1 differences or warnings · 2 usage error or bad input · 3 partial failure · 4 environment error · 5 refused by a safety check',
    )
    .fail((msg, err) => {
      // One clear line for usage errors, never a stack trace.
      if (err) throw err;
      // yargs spreads some messages over several lines ("Invalid values:\n  Argument: ..."): keep it to one.
      usageError(String(msg).replace(/:?\s*\n\s*/g, ': '));
    });
  for (const e of commandTable) {
    const full = loaded.get(e);
    parser = parser.command(
      full ?? ({ command: e.command, describe: e.describe, builder: (y: Argv) => y.strict(false), handler: () => main(argv, { allCommands: true }) } as any),
    );
  }
  function usageError(line: string): never {
    process.stderr.write(`cni-rewind: ${line}\n  see: cni-rewind --help\n`);
    process.exit(ExitCode.BadInput);
  }
  skipHelpRenderingOnRun(parser);
  return parser as Argv<GlobalArgs>;
}

/**
 * yargs renders the whole help text of the command being run right after its handler starts (synchronously, before
 * the handler's first await resumes), in case the handler shows it later; no handler here does (usage errors print
 * one line), and the rendering (cliui, string-width) cost a cluster command about a tenth of its CPU before its first
 * request (docs/BENCHMARKS.md, start-up). `--help` and `getHelp()` render it when asked, as before.
 */
function skipHelpRenderingOnRun(parser: Argv<any>): void {
  const usage = (parser as unknown as { getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } } })
    .getInternalMethods?.()
    ?.getUsageInstance?.();
  if (usage?.cacheHelpMessage) usage.cacheHelpMessage = () => {};
}

export async function main(argv = hideBin(process.argv), opts: { allCommands?: boolean } = {}): Promise<void> {
  await (await buildParser(argv, opts)).parseAsync();
}
