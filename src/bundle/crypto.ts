/**
 * Encryption of Secret files in a bundle, and authentication of an encrypted bundle's manifest.
 *
 * Files: AES-256-GCM. Format 1.1 stores `CNRENC2` + 12-byte IV + 16-byte tag + ciphertext, with the file's
 * bundle path as associated data, so a ciphertext moved to another path (two Secrets swapped) fails to
 * decrypt. Format 1.0 bundles hold `CNRENC1` files without associated data; they are still read.
 * Manifest: HMAC-SHA256 over its JSON (the `encryption.mac` field left out), keyed with a key derived from the
 * bundle key by HKDF, so an edited manifest.json of an encrypted bundle is refused by anyone holding the key.
 * The checksums in the manifest cover the stored (encrypted) bytes, so a bundle verifies without the key.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto';
import { BadInputError } from '../core/errors.js';

const MAGIC_V1 = Buffer.from('CNRENC1');
const MAGIC_V2 = Buffer.from('CNRENC2');
const HEADER = MAGIC_V2.length + 28;

export function encrypt(key: Buffer, plain: Buffer, aad: string): Buffer {
  if (key.length !== 32) throw new BadInputError('the bundle encryption key must be 32 bytes');
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([MAGIC_V2, iv, c.getAuthTag(), body]);
}

/** Does this stored file carry its path as associated data (format 1.1)? */
export function isBoundCiphertext(stored: Buffer): boolean {
  return stored.subarray(0, MAGIC_V2.length).equals(MAGIC_V2);
}

/** Decrypt a stored file; `file` is its bundle path (the associated data of a format 1.1 file). */
export function decrypt(key: Buffer, stored: Buffer, file: string): Buffer {
  const magic = stored.subarray(0, MAGIC_V2.length);
  const bound = magic.equals(MAGIC_V2);
  if (stored.length < HEADER || (!bound && !magic.equals(MAGIC_V1))) throw new BadInputError(`${file} is not an encrypted bundle file`);
  const iv = stored.subarray(MAGIC_V2.length, MAGIC_V2.length + 12);
  const tag = stored.subarray(MAGIC_V2.length + 12, HEADER);
  try {
    const d = createDecipheriv('aes-256-gcm', key, iv);
    if (bound) d.setAAD(Buffer.from(file, 'utf8'));
    d.setAuthTag(tag);
    return Buffer.concat([d.update(stored.subarray(HEADER)), d.final()]);
  } catch {
    throw new BadInputError(`cannot decrypt ${file}: wrong key, the file was altered, or it belongs at another path`);
  }
}

/** scrypt parameters for passphrase-derived keys (recorded in the manifest; readers accept bounded values only). */
export const SCRYPT_DEFAULTS = { N: 1 << 15, r: 8, p: 1 } as const;
/**
 * The most a reader spends: what this tool writes (32 MiB, well under a second). The parameters come from an
 * unauthenticated manifest (its MAC needs the key they derive), so larger ones would let any bundle cost gigabytes
 * and minutes (N 2^20, r 32, p 16 took 4.26 GB) before it is refused.
 */
const SCRYPT_LIMITS = SCRYPT_DEFAULTS;

export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

/** The 32-byte bundle key from a passphrase, with the salt and parameters the manifest records. */
export function keyFromPassphrase(passphrase: string, salt: Buffer, params: ScryptParams): Buffer {
  const { N, r, p } = params;
  const pow2 = Number.isInteger(N) && N > 1 && (N & (N - 1)) === 0;
  if (
    !pow2 ||
    N > SCRYPT_LIMITS.N ||
    !Number.isInteger(r) ||
    r < 1 ||
    r > SCRYPT_LIMITS.r ||
    !Number.isInteger(p) ||
    p < 1 ||
    p > SCRYPT_LIMITS.p ||
    salt.length < 16
  ) {
    throw new BadInputError(`the bundle's scrypt parameters are out of bounds (N ${N}, r ${r}, p ${p}, salt ${salt.length} bytes)`);
  }
  return scryptSync(passphrase.normalize('NFC'), salt, 32, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 });
}

function macKey(key: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'cni-rewind bundle manifest mac v1', 32));
}

/** The text a manifest's MAC covers: its JSON without `encryption.mac`. */
function macInput(manifest: any): string {
  return JSON.stringify({ ...manifest, encryption: { ...manifest.encryption, mac: undefined } });
}

export function manifestMac(key: Buffer, manifest: object): string {
  return createHmac('sha256', macKey(key)).update(macInput(manifest)).digest('hex');
}

/** True when the manifest's recorded MAC matches (constant-time). */
export function manifestMacValid(key: Buffer, manifest: any): boolean {
  const mac = manifest?.encryption?.mac;
  if (typeof mac !== 'string' || !/^[0-9a-f]{64}$/.test(mac)) return false;
  return timingSafeEqual(Buffer.from(mac, 'hex'), Buffer.from(manifestMac(key, manifest), 'hex'));
}
