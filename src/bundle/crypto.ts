/**
 * Optional encryption of Secret files in a bundle: AES-256-GCM, stored as `CNRENC1` + 12-byte IV +
 * 16-byte tag + ciphertext. The checksum in the manifest covers the stored (encrypted) bytes, so a
 * bundle verifies without the key.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { BadInputError } from '../errors.js';

const MAGIC = Buffer.from('CNRENC1');

export function encrypt(key: Buffer, plain: Buffer): Buffer {
  if (key.length !== 32) throw new BadInputError('the bundle encryption key must be 32 bytes');
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([MAGIC, iv, c.getAuthTag(), body]);
}

export function decrypt(key: Buffer, stored: Buffer, file: string): Buffer {
  if (stored.length < MAGIC.length + 28 || !stored.subarray(0, MAGIC.length).equals(MAGIC)) throw new BadInputError(`${file} is not an encrypted bundle file`);
  const iv = stored.subarray(MAGIC.length, MAGIC.length + 12);
  const tag = stored.subarray(MAGIC.length + 12, MAGIC.length + 28);
  try {
    const d = createDecipheriv('aes-256-gcm', key, iv);
    d.setAuthTag(tag);
    return Buffer.concat([d.update(stored.subarray(MAGIC.length + 28)), d.final()]);
  } catch {
    throw new BadInputError(`cannot decrypt ${file}: wrong key or the file was altered`);
  }
}
