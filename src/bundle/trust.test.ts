/** Bundles are data in a box: encryption binds each ciphertext to its path and the manifest to the key. */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { escapeControl } from '../cli/output.js';
import { keyForBundle, keyForNewBundle, openBundleWithKey } from './key.js';
import { configPathFor, resourcePathFor } from './paths.js';
import { openBundle } from './reader.js';
import { verifyBundle } from './verify.js';
import { BundleWriter } from './writer.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-trust-test-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const secret = (name: string, value: string) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: 'calico-system' },
  data: { v: Buffer.from(value).toString('base64') },
});
const pool = { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'p1' }, spec: { cidr: '10.0.0.0/16' } };

async function encryptedBundle(key: Buffer, encryption?: any): Promise<{ out: string; a: string; b: string }> {
  const out = path.join(dir, 'enc');
  const w = await BundleWriter.open(out, { encryptionKey: key, encryption });
  const a = configPathFor(secret('a', 'alpha') as any);
  const b = configPathFor(secret('b', 'bravo') as any);
  await w.writeObject(a, secret('a', 'alpha') as any, { secret: true });
  await w.writeObject(b, secret('b', 'bravo') as any, { secret: true });
  await w.writeObject(resourcePathFor(pool as any), pool as any);
  w.manifest.resources.push({
    key: 'ippools.crd.projectcalico.org',
    group: 'crd.projectcalico.org',
    version: 'v1',
    kind: 'IPPool',
    plural: 'ippools',
    namespaced: false,
    count: 1,
  });
  w.manifest.counts = { 'ippools.crd.projectcalico.org': 1 };
  await w.commit();
  return { out, a, b };
}
const editManifest = (out: string, f: (m: any) => void) => {
  const m = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
  f(m);
  fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(m, null, 2));
};

describe('authenticated encryption (format 1.1)', () => {
  it('two encrypted files swapped, checksums fixed: the manifest MAC fails, naming manifest.json', async () => {
    const key = randomBytes(32);
    const { out, a, b } = await encryptedBundle(key);
    expect((await openBundle(out, { encryptionKey: key })).manifest.encryption?.mac).toMatch(/^[0-9a-f]{64}$/);
    const da = fs.readFileSync(path.join(out, a));
    const db = fs.readFileSync(path.join(out, b));
    fs.writeFileSync(path.join(out, a), db);
    fs.writeFileSync(path.join(out, b), da);
    editManifest(out, (m) => {
      m.files[a].sha256 = sha(db);
      m.files[b].sha256 = sha(da);
    });
    await expect(openBundle(out, { encryptionKey: key })).rejects.toThrow(/manifest\.json fails its authentication check/);
  });

  it('relabelled format 1.0.0 with its MAC dropped: refused with the key, nothing read', async () => {
    const key = randomBytes(32);
    const { out, a, b } = await encryptedBundle(key);
    const da = fs.readFileSync(path.join(out, a));
    const db = fs.readFileSync(path.join(out, b));
    fs.writeFileSync(path.join(out, a), db);
    fs.writeFileSync(path.join(out, b), da);
    editManifest(out, (m) => {
      m.formatVersion = '1.0.0';
      delete m.encryption.mac;
      m.files[a].sha256 = sha(db);
      m.files[b].sha256 = sha(da);
    });
    await expect(openBundle(out, { encryptionKey: key })).rejects.toThrow(/manifest\.json of this encrypted bundle carries no authentication code/);
  });

  it('the encryption record deleted (the bundle passed off as plain): refused when a key is given, read as plain without one', async () => {
    const key = randomBytes(32);
    const { out } = await encryptedBundle(key);
    editManifest(out, (m) => delete m.encryption);
    vi.stubEnv('CNI_REWIND_ENCRYPTION_KEY', '');
    vi.stubEnv('CNI_REWIND_ENCRYPTION_PASSPHRASE', '');
    const keyFile = path.join(dir, 'key');
    fs.writeFileSync(keyFile, key.toString('hex'), { mode: 0o600 });
    await expect(openBundleWithKey(out, { keyFile })).rejects.toThrow(/is not encrypted, but a key was given/);
    expect((await openBundleWithKey(out, {})).manifest.encryption).toBeUndefined();
    vi.unstubAllEnvs();
  });

  it('an edited manifest.json (notes) of an encrypted bundle is refused with the key; readable without it', async () => {
    const key = randomBytes(32);
    const { out } = await encryptedBundle(key);
    editManifest(out, (m) => m.notes.push('planted'));
    await expect(openBundle(out, { encryptionKey: key })).rejects.toThrow(/manifest\.json fails its authentication check/);
    await expect(openBundle(out, { encryptionKey: randomBytes(32) })).rejects.toThrow(/authentication check/);
    expect((await openBundle(out)).manifest.notes).toContain('planted');
  });

  it('passphrase mode: scrypt parameters recorded, the same passphrase reads it, another does not', async () => {
    const { key, encryption } = keyForNewBundle({ kind: 'passphrase', passphrase: 'correct horse battery staple' });
    expect(encryption).toMatchObject({ kdf: 'scrypt', scrypt: { N: 32768, r: 8, p: 1 } });
    const { out, a } = await encryptedBundle(key, encryption);
    const m = (await openBundle(out)).manifest;
    const again = keyForBundle(m, { kind: 'passphrase', passphrase: 'correct horse battery staple' }, out);
    expect((await (await openBundle(out, { encryptionKey: again })).readObject(a)).metadata.name).toBe('a');
    const wrong = keyForBundle(m, { kind: 'passphrase', passphrase: 'incorrect horse battery staple' }, out);
    await expect(openBundle(out, { encryptionKey: wrong })).rejects.toThrow(/authentication check/);
    expect(() =>
      keyForBundle({ ...m, encryption: { ...m.encryption!, scrypt: { N: 1 << 30, r: 8, p: 1 } } }, { kind: 'passphrase', passphrase: 'x'.repeat(12) }, out),
    ).toThrow(/out of bounds/);
    // Anything costlier than what the tool writes is refused before scrypt runs (the old bound allowed 4 GiB).
    for (const scrypt of [
      { N: 1 << 16, r: 8, p: 1 },
      { N: 1 << 15, r: 16, p: 1 },
      { N: 1 << 15, r: 8, p: 2 },
    ]) {
      expect(() => keyForBundle({ ...m, encryption: { ...m.encryption!, scrypt } }, { kind: 'passphrase', passphrase: 'x'.repeat(12) }, out)).toThrow(
        /out of bounds/,
      );
    }
  });
});

describe('bundle reads stay inside the bundle', () => {
  it('an object whose content names another namespace than its path is refused (lenient reads flag it)', async () => {
    const out = path.join(dir, 'b');
    const w = await BundleWriter.open(out);
    const np = { apiVersion: 'crd.projectcalico.org/v1', kind: 'NetworkPolicy', metadata: { name: 'x', namespace: 'kube-system' }, spec: {} };
    const rel = resourcePathFor({ ...np, metadata: { ...np.metadata, namespace: 'app' } } as any);
    await w.writeObject(rel, np as any);
    w.manifest.resources.push({
      key: 'networkpolicies.crd.projectcalico.org',
      group: 'crd.projectcalico.org',
      version: 'v1',
      kind: 'NetworkPolicy',
      plural: 'networkpolicies',
      namespaced: true,
      count: 1,
    });
    await w.commit();
    const b = await openBundle(out);
    await expect(b.readObject(rel)).rejects.toThrow(
      /holds crd\.projectcalico\.org\/v1 NetworkPolicy kube-system\/x, which belongs at resources\/crd\.projectcalico\.org\/NetworkPolicy\/kube-system\/x\.yaml/,
    );
    const seen = [];
    for await (const o of b.objects({ lenient: true })) seen.push(o.problem);
    expect(seen).toEqual([expect.stringMatching(/belongs at/)]);
  });

  it('a directory of a bundle replaced by a link to outside is not followed', async () => {
    const { out } = await encryptedBundle(randomBytes(32));
    const outside = path.join(dir, 'outside');
    fs.cpSync(path.join(out, 'resources'), outside, { recursive: true });
    fs.rmSync(path.join(out, 'resources'), { recursive: true });
    fs.symlinkSync(outside, path.join(out, 'resources'));
    const b = await openBundle(out);
    await expect(b.readObject(resourcePathFor(pool as any))).rejects.toThrow(/resources is a symbolic link/);
  });

  it('verify finds unlisted files named like Object.prototype members', async () => {
    const { out } = await encryptedBundle(randomBytes(32));
    for (const n of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) fs.writeFileSync(path.join(out, n), 'x');
    const r = await verifyBundle(await openBundle(out));
    expect(
      r.problems
        .filter((p) => /not listed/.test(p.problem))
        .map((p) => p.file)
        .sort(),
    ).toEqual(['__proto__', 'constructor', 'hasOwnProperty', 'toString']);
  });
});

describe('escapeControl', () => {
  it('shows control characters instead of sending them; keeps newlines and own colours only in multiline mode', () => {
    expect(escapeControl('a\x1b]0;pwn\x07b\nc')).toBe('a\\x1b]0;pwn\\x07b\\nc');
    expect(escapeControl('\x1b[31mred\x1b[39m\n\x1b[2J', { multiline: true })).toBe('\x1b[31mred\x1b[39m\n\\x1b[2J');
    expect(escapeControl('x\u202ey')).toBe('x\\u202ey');
  });
});
