import { verifyBundle } from '../../bundle/verify.js';
import { ExitCode } from '../../core/errors.js';
import { handler, type Command } from '../context.js';
import { oneLine } from '../output.js';
import { encryptionOptions, openKeyedBundle, type EncryptionArgs } from '../encryption.js';

interface VerifyArgs extends EncryptionArgs {
  bundle: string;
}

export const verifyCommand: Command<VerifyArgs> = {
  command: 'verify <bundle>',
  describe: 'Check a bundle: format version, completeness and every checksum (exit 2 naming each bad file)',
  builder: (y) => encryptionOptions(y).positional('bundle', { type: 'string', demandOption: true, describe: 'bundle directory or .tar.gz' }) as any,
  handler: handler<VerifyArgs>(async (ctx, args) => {
    // With the key (optional here), an encrypted bundle's manifest MAC is checked on open and every encrypted file is decrypted.
    const b = await openKeyedBundle(ctx, args.bundle, args, false);
    try {
      const keyed =
        !!b.manifest.encryption &&
        (!!args['encryption-key-file'] ||
          !!args['encryption-passphrase-file'] ||
          !!process.env.CNI_REWIND_ENCRYPTION_KEY ||
          !!process.env.CNI_REWIND_ENCRYPTION_PASSPHRASE);
      if (b.manifest.encryption && !keyed)
        ctx.reporter.info(
          'CNR_VERIFY_NO_KEY',
          'encrypted bundle, no key given: checksums checked; manifest.json authenticity and the encrypted files were not',
        );
      const r = await verifyBundle(b, { decrypt: keyed });
      ctx.print({ bundle: args.bundle, id: b.manifest.id, formatVersion: b.manifest.formatVersion, ...r }, () =>
        r.ok
          ? `${oneLine(args.bundle)}: OK (format ${oneLine(b.manifest.formatVersion)}, ${r.checked} files checked)`
          : [`${oneLine(args.bundle)}: FAILED, ${r.problems.length} problem(s):`, ...r.problems.map((p) => `  ${oneLine(p.file)}: ${oneLine(p.problem)}`)].join(
              '\n',
            ),
      );
      if (!r.ok) {
        // One summary line on stderr too, so scripts that only keep stderr see which file is bad.
        const first = r.problems[0]!;
        ctx.host.text(
          `cni-rewind: bundle ${oneLine(args.bundle)} failed verification: ${oneLine(first.file)}: ${oneLine(first.problem)}${r.problems.length > 1 ? ` (and ${r.problems.length - 1} more)` : ''}`,
        );
        return ExitCode.BadInput;
      }
    } finally {
      await b.close();
    }
  }),
};
