/** The encryption flags shared by the commands that write or read encrypted bundles. */
import type { Argv } from 'yargs';
import { ENCRYPTION_KEY_ENV, ENCRYPTION_PASSPHRASE_ENV, keyForNewBundle, loadKeySource, openBundleWithKey } from '../bundle/key.js';
import type { Bundle } from '../bundle/reader.js';
import type { BundleManifest } from '../bundle/types.js';
import { BadInputError } from '../core/errors.js';
import type { CliContext } from './context.js';

export interface EncryptionArgs {
  'encryption-key-file'?: string;
  'encryption-passphrase-file'?: string;
}

export function encryptionOptions<T>(y: Argv<T>): Argv<T & EncryptionArgs> {
  return y
    .option('encryption-key-file', {
      type: 'string',
      describe: `file holding the 32-byte bundle key (raw, 64 hex characters or base64; or set $${ENCRYPTION_KEY_ENV})`,
    })
    .option('encryption-passphrase-file', {
      type: 'string',
      describe: `file holding a passphrase the bundle key is derived from with scrypt (or set $${ENCRYPTION_PASSPHRASE_ENV})`,
    }) as any;
}

const keyOptions = (ctx: CliContext, args: EncryptionArgs) => ({
  keyFile: args['encryption-key-file'],
  passphraseFile: args['encryption-passphrase-file'],
  warn: (m: string) => ctx.reporter.warn('CNR_KEY_FILE_MODE', m),
});

/** For `--encrypt`: the key and the manifest's encryption record; a clear error when no key or passphrase is given. */
export function newBundleKey(
  ctx: CliContext,
  args: EncryptionArgs & { encrypt?: boolean },
): { encryptionKey?: Buffer; encryption?: BundleManifest['encryption'] } {
  if (!args.encrypt) return {};
  const src = loadKeySource(keyOptions(ctx, args));
  if (!src)
    throw new BadInputError('--encrypt needs a key', {
      hint: `pass --encryption-key-file FILE (openssl rand -hex 32) or --encryption-passphrase-file FILE, or set ${ENCRYPTION_KEY_ENV}`,
    });
  const { key, encryption } = keyForNewBundle(src);
  return { encryptionKey: key, encryption };
}

/** Open a bundle for reading, with its key when encrypted (`required: false`: without one when none is given). */
export function openKeyedBundle(ctx: CliContext, p: string, args: EncryptionArgs, required = true): Promise<Bundle> {
  return openBundleWithKey(p, { ...keyOptions(ctx, args), required });
}
