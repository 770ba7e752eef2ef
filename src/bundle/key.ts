import { randomBytes } from 'node:crypto';
import { BadInputError } from '../core/errors.js';
import { registerSecret } from '../io/redact.js';
import { readInputFile } from '../io/safe-file.js';
import { keyFromPassphrase, SCRYPT_DEFAULTS } from './crypto.js';
import { openBundle, type Bundle } from './reader.js';
import type { BundleManifest } from './types.js';

/** Environment variable holding the bundle encryption key (64 hex characters or base64 of 32 bytes). */
export const ENCRYPTION_KEY_ENV = 'CNI_REWIND_ENCRYPTION_KEY';
/** Environment variable holding a passphrase the bundle key is derived from (scrypt). */
export const ENCRYPTION_PASSPHRASE_ENV = 'CNI_REWIND_ENCRYPTION_PASSPHRASE';

const MAX_KEY_FILE_BYTES = 4096;

/** Where the bundle key comes from: a 32-byte key, or a passphrase the key is derived from with scrypt. */
export type KeySource = { kind: 'key'; key: Buffer } | { kind: 'passphrase'; passphrase: string };

function parseKey(text: string, source: string): Buffer {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  const b = Buffer.from(t, 'base64');
  if (b.length === 32 && /^[A-Za-z0-9+/]+=*$/.test(t)) return b;
  throw new BadInputError(`${source} is not a 32-byte key (give 64 hex characters or base64 of 32 bytes)`, { hint: 'make one with: openssl rand -hex 32' });
}

/** A key or passphrase file: a regular file of at most 4 KiB; a warning when others may read it. */
function readSecretFile(file: string, what: string, warn?: (message: string) => void): Buffer {
  const f = readInputFile(file, what, MAX_KEY_FILE_BYTES);
  if (f.mode & 0o077) warn?.(`${what} ${file} can be read by other users (mode ${(f.mode & 0o777).toString(8).padStart(3, '0')}); chmod 600 it`);
  return f.data;
}

export interface KeyOptions {
  keyFile?: string;
  passphraseFile?: string;
  /** Told when a key file is readable by others. */
  warn?: (message: string) => void;
}

/**
 * The key source for encrypted bundles: `--encryption-key-file` (32 raw bytes, 64 hex characters or base64),
 * `--encryption-passphrase-file`, $CNI_REWIND_ENCRYPTION_KEY or $CNI_REWIND_ENCRYPTION_PASSPHRASE, in that order.
 * Undefined when none is given.
 */
export function loadKeySource(opts: KeyOptions = {}): KeySource | undefined {
  if (opts.keyFile && opts.passphraseFile) throw new BadInputError('give --encryption-key-file or --encryption-passphrase-file, not both');
  if (opts.keyFile) {
    const raw = readSecretFile(opts.keyFile, 'encryption key file', opts.warn);
    if (raw.length === 32) return { kind: 'key', key: raw };
    const text = raw.toString('utf8');
    registerSecret(text.trim());
    return { kind: 'key', key: parseKey(text, `encryption key file ${opts.keyFile}`) };
  }
  if (opts.passphraseFile)
    return passphraseSource(
      readSecretFile(opts.passphraseFile, 'encryption passphrase file', opts.warn)
        .toString('utf8')
        .replace(/\r?\n$/, ''),
      `passphrase file ${opts.passphraseFile}`,
    );
  const env = process.env[ENCRYPTION_KEY_ENV];
  if (env) {
    registerSecret(env.trim());
    return { kind: 'key', key: parseKey(env, `$${ENCRYPTION_KEY_ENV}`) };
  }
  const pass = process.env[ENCRYPTION_PASSPHRASE_ENV];
  if (pass) return passphraseSource(pass, `$${ENCRYPTION_PASSPHRASE_ENV}`);
  return undefined;
}

function passphraseSource(passphrase: string, source: string): KeySource {
  if (passphrase.length < 12) throw new BadInputError(`the ${source} holds fewer than 12 characters; use a longer passphrase`);
  registerSecret(passphrase);
  return { kind: 'passphrase', passphrase };
}

/** What a writer needs: the key and the manifest's `encryption` record (salt and scrypt parameters for a passphrase). */
export function keyForNewBundle(src: KeySource): { key: Buffer; encryption: NonNullable<BundleManifest['encryption']> } {
  if (src.kind === 'key') return { key: src.key, encryption: { algorithm: 'aes-256-gcm', kdf: 'raw' } };
  const salt = randomBytes(16);
  const scrypt = { ...SCRYPT_DEFAULTS };
  return {
    key: keyFromPassphrase(src.passphrase, salt, scrypt),
    encryption: { algorithm: 'aes-256-gcm', kdf: 'scrypt', salt: salt.toString('base64'), scrypt },
  };
}

/** The key of an existing encrypted bundle from the given source (a passphrase goes through the recorded scrypt parameters). */
export function keyForBundle(manifest: BundleManifest, src: KeySource, shown: string): Buffer {
  const enc = manifest.encryption!;
  if (enc.kdf === 'scrypt') {
    if (src.kind !== 'passphrase')
      throw new BadInputError(`bundle ${shown} is encrypted with a passphrase; give it with --encryption-passphrase-file or $${ENCRYPTION_PASSPHRASE_ENV}`);
    const p = enc.scrypt as { N: number; r: number; p: number } | undefined;
    if (typeof enc.salt !== 'string' || !p) throw new BadInputError(`${shown}: manifest.json records no scrypt salt or parameters`);
    return keyFromPassphrase(src.passphrase, Buffer.from(enc.salt, 'base64'), p);
  }
  if (src.kind !== 'key')
    throw new BadInputError(`bundle ${shown} is encrypted with a key, not a passphrase; give it with --encryption-key-file or $${ENCRYPTION_KEY_ENV}`);
  return src.key;
}

/** Open a bundle with its key when its Secrets are encrypted; a clear error when the key is missing. */
export async function openBundleWithKey(p: string, opts: KeyOptions & { required?: boolean } = {}): Promise<Bundle> {
  const b = await openBundle(p);
  const src = loadKeySource(opts);
  if (!b.manifest.encryption) {
    if (!src) return b;
    // Deleting the `encryption` record is all it takes to present an encrypted bundle as a plain one, with planted
    // Secrets in clear: whoever gives a key expects an encrypted bundle, so a plain one is refused, not read.
    await b.close();
    throw new BadInputError(`bundle ${p} is not encrypted, but a key was given; a plain bundle is not read while a key is given`, {
      hint: `for a bundle made without --encrypt, give no key (no --encryption-key-file or --encryption-passphrase-file, ${ENCRYPTION_KEY_ENV} and ${ENCRYPTION_PASSPHRASE_ENV} unset)`,
    });
  }
  if (!src) {
    if (opts.required === false) return b;
    await b.close();
    throw new BadInputError(`the Secrets in bundle ${p} are encrypted and no key was given`, {
      hint: `pass --encryption-key-file FILE or set ${ENCRYPTION_KEY_ENV}`,
    });
  }
  const key = keyForBundle(b.manifest, src, p);
  await b.close();
  return openBundle(p, { encryptionKey: key });
}
