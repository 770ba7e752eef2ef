import { openBundle } from '../../bundle/reader.js';
import { verifyBundle } from '../../bundle/verify.js';
import { ExitCode } from '../../errors.js';
import { handler, type Command } from '../context.js';

interface VerifyArgs {
  bundle: string;
}

export const verifyCommand: Command<VerifyArgs> = {
  command: 'verify <bundle>',
  describe: 'Check a bundle: format version, completeness and every checksum (exit 2 naming each bad file)',
  builder: (y) => y.positional('bundle', { type: 'string', demandOption: true, describe: 'bundle directory or .tar.gz' }) as any,
  handler: handler<VerifyArgs>(async (ctx, args) => {
    const b = await openBundle(args.bundle);
    try {
      const r = await verifyBundle(b);
      ctx.print({ bundle: args.bundle, id: b.manifest.id, formatVersion: b.manifest.formatVersion, ...r }, () =>
        r.ok
          ? `${args.bundle}: OK (format ${b.manifest.formatVersion}, ${r.checked} files checked)`
          : [`${args.bundle}: FAILED, ${r.problems.length} problem(s):`, ...r.problems.map((p) => `  ${p.file}: ${p.problem}`)].join('\n'),
      );
      if (!r.ok) {
        // One summary line on stderr too, so scripts that only keep stderr see which file is bad.
        const first = r.problems[0]!;
        process.stderr.write(`cni-rewind: bundle ${args.bundle} failed verification: ${first.file}: ${first.problem}${r.problems.length > 1 ? ` (and ${r.problems.length - 1} more)` : ''}\n`);
        return ExitCode.BadInput;
      }
    } finally {
      await b.close();
    }
  }),
};
