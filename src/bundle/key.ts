import { readFile } from 'node:fs/promises';
import { BadInputError } from '../errors.js';
import { registerSecret } from '../io/redact.js';
import { openBundle, type Bundle } from './reader.js';

/** Environment variable holding the bundle encryption key (64 hex characters or base64 of 32 bytes). */
export const ENCRYPTION_KEY_ENV = 'CNI_REWIND_ENCRYPTION_KEY';

function parseKey(text: string, source: string): Buffer {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  const b = Buffer.from(t, 'base64');
  if (b.length === 32 && /^[A-Za-z0-9+/]+=*$/.test(t)) return b;
  throw new BadInputError(`${source} is not a 32-byte key (give 64 hex characters or base64 of 32 bytes)`, { hint: 'make one with: openssl rand -hex 32' });
}

/**
 * The AES-256-GCM key for Secret material in bundles: from `--encryption-key-file` (32 raw bytes, 64 hex
 * characters or base64) or from $CNI_REWIND_ENCRYPTION_KEY. Undefined when neither is given.
 */
export async function loadEncryptionKey(keyFile?: string): Promise<Buffer | undefined> {
  if (keyFile) {
    let raw: Buffer;
    try {
      raw = await readFile(keyFile);
    } catch (err) {
      throw new BadInputError(`cannot read the encryption key file ${keyFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    if (raw.length === 32) return raw;
    const text = raw.toString('utf8');
    registerSecret(text.trim());
    return parseKey(text, `encryption key file ${keyFile}`);
  }
  const env = process.env[ENCRYPTION_KEY_ENV];
  if (env) {
    registerSecret(env.trim());
    return parseKey(env, `$${ENCRYPTION_KEY_ENV}`);
  }
  return undefined;
}

/** Open a bundle with its key when its Secrets are encrypted; a clear error when the key is missing. */
export async function openBundleWithKey(p: string, keyFile?: string): Promise<Bundle> {
  const b = await openBundle(p);
  if (!b.manifest.encryption) return b;
  const key = await loadEncryptionKey(keyFile);
  await b.close();
  if (!key) {
    throw new BadInputError(`the Secrets in bundle ${p} are encrypted and no key was given`, { hint: `pass --encryption-key-file FILE or set ${ENCRYPTION_KEY_ENV}` });
  }
  return openBundle(p, { encryptionKey: key });
}
