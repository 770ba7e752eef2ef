import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { applyFixture, resetCalico, runCli, testClient } from './helpers.js';

/** `export --encrypt` keeps Secret material encrypted at rest; `restore` needs the key and decrypts it. */
describe('bundle encryption (--encrypt)', () => {
  let client: KubeClient;
  const canary = 'canary-ENC-7f3a9b21c4';
  const key = 'a'.repeat(16) + '0123456789abcdef'.repeat(3); // 64 hex characters
  const dir = mkdtempSync('/tmp/cnr-encrypt-');
  const bundle = path.join(dir, 'enc-bundle');

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
    await client.create(K.secret, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'enc-canary', namespace: 'tigera-operator' },
      stringData: { token: canary },
    } as any);
  });
  afterAll(() => client.close());

  it('refuses --encrypt without a key, in one line', async () => {
    const r = await runCli(['export', '--encrypt', '--out', path.join(dir, 'nokey')], { env: { CNI_REWIND_ENCRYPTION_KEY: '' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--encrypt needs a key/);
  });

  it('writes Secret files encrypted; the bundle verifies without the key', async () => {
    const r = await runCli(['export', '--encrypt', '--out', bundle], { env: { CNI_REWIND_ENCRYPTION_KEY: key } });
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(bundle, 'manifest.json'), 'utf8'));
    expect(manifest.encryption).toMatchObject({ algorithm: 'aes-256-gcm' });
    const secretFiles = Object.entries(manifest.files)
      .filter(([, f]: [string, any]) => f.secret)
      .map(([p]) => p);
    expect(secretFiles.length).toBeGreaterThan(0);
    for (const f of secretFiles) {
      const bytes = readFileSync(path.join(bundle, f));
      expect(bytes.includes(Buffer.from(canary))).toBe(false);
      expect(bytes.includes(Buffer.from(Buffer.from(canary).toString('base64')))).toBe(false);
      expect(statSync(path.join(bundle, f)).mode & 0o777).toBe(0o600);
    }
    const all = readdirSync(bundle, { recursive: true }).map(String);
    for (const f of all) {
      const p = path.join(bundle, f);
      if (statSync(p).isFile()) expect(readFileSync(p).includes(Buffer.from(canary)), f).toBe(false);
    }
    const v = await runCli(['verify', bundle], { env: { CNI_REWIND_ENCRYPTION_KEY: '' } });
    expect(v.code, v.stdout + v.stderr).toBe(0);
  });

  it('restore needs the key, then decrypts and never prints the value', async () => {
    await client.delete(K.secret, 'tigera-operator', 'enc-canary');
    const noKey = await runCli(['restore', bundle, '--resources', '--yes'], { env: { CNI_REWIND_ENCRYPTION_KEY: '' } });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/are encrypted and no key was given/);
    expect(await client.getOrUndefined(K.secret, 'tigera-operator', 'enc-canary')).toBeUndefined();
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-v'], { env: { CNI_REWIND_ENCRYPTION_KEY: key } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(canary);
    expect(r.stdout + r.stderr).not.toContain(key);
    const s = await client.get(K.secret, 'tigera-operator', 'enc-canary');
    expect(Buffer.from(s.data!.token!, 'base64').toString()).toBe(canary);
  });
});
