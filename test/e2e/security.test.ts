/**
 * Security: recognisable canary values in a Secret in calico-system and in AWS credentials must never
 * appear in any output (table, -o json, -o yaml, -v debug/progress, errors) of the commands that touch them;
 * Secret files are 0600 and the bundle directory 0700; Secret material written with an encryption key is
 * encrypted at rest (verify works without the key, reading needs it); restore refuses another cluster's bundle
 * unless --allow-other-cluster (exit 5).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBundle } from '../../src/bundle/reader.js';
import { verifyBundle } from '../../src/bundle/verify.js';
import { exportBundle } from '../../src/export/export.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { applyFixture, runCli, testClient, type CliResult } from './helpers.js';

const CANARY = `cnr-canary-${randomBytes(6).toString('hex')}`;
const CANARY2 = `cnr-canary2-${randomBytes(6).toString('hex')}`;
const AWS_CANARY = `AWSCANARY${randomBytes(10).toString('hex')}`;
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** No form of a canary (plain, base64, base64 without padding) in any output of a run. */
function expectNoCanary(r: CliResult, what: string, canaries = [CANARY, CANARY2]): void {
  const text = r.stdout + r.stderr;
  for (const c of canaries) {
    for (const form of [c, b64(c), b64(c).replace(/=+$/, '')]) expect(text.includes(form), `${what} leaked ${form}`).toBe(false);
  }
}

describe('security: no secret in output, file modes, encryption at rest, cross-cluster guard', () => {
  let client: KubeClient;
  let work: string;
  let bundle: string;

  beforeAll(async () => {
    client = await testClient();
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'calico-system' } }, { fieldManager: 'e2e' });
    await client.apply(
      K.secret,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'sec-canary', namespace: 'calico-system' },
        type: 'Opaque',
        data: { 'tls.key': b64(CANARY), token: b64(`Bearer ${CANARY}`) },
      },
      { fieldManager: 'e2e' },
    );
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-security-'));
    bundle = path.join(work, 'b');
  });
  afterAll(async () => {
    await client?.delete(K.secret, 'calico-system', 'sec-canary');
    client?.close();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('export (table, -o json, -o yaml, -v) never prints the Secret; the Secret file is 0600 and the bundle 0700', async () => {
    const r = await runCli(['export', '--out', bundle, '-v', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expectNoCanary(r, 'export -v -o json');
    const st = fs.statSync(bundle);
    expect(st.mode & 0o777).toBe(0o700);
    const m = JSON.parse(fs.readFileSync(path.join(bundle, 'manifest.json'), 'utf8'));
    const secretFile = Object.keys(m.files).find((f) => f.endsWith('/Secret/sec-canary.yaml'));
    expect(secretFile, 'the Secret is in the bundle').toBeDefined();
    expect(m.files[secretFile!].secret).toBe(true);
    expect(fs.statSync(path.join(bundle, secretFile!)).mode & 0o777).toBe(0o600);
    // It really is there (the bundle is a backup), so the checks below are not vacuous.
    expect(fs.readFileSync(path.join(bundle, secretFile!), 'utf8')).toContain(b64(CANARY));
    for (const f of Object.keys(m.files).filter((x) => m.files[x].secret)) expect(fs.statSync(path.join(bundle, f)).mode & 0o777, f).toBe(0o600);
    for (const args of [
      ['inspect', bundle, '-o', 'json', '--files'],
      ['inspect', bundle, '-o', 'yaml'],
      ['inspect', bundle],
      ['verify', bundle, '-o', 'json', '-v'],
      ['list', work, '-o', 'yaml'],
      ['doctor', bundle, '-o', 'json', '-v'],
    ]) {
      const x = await runCli(args);
      expect([0, 1, 2], `${args.join(' ')}: ${x.stderr}`).toContain(x.code);
      expectNoCanary(x, args.join(' '));
    }
  });

  it('a changed Secret: diff and restore --dry-run (table, json, -v) and the restore itself never print either value', async () => {
    await client.apply(
      K.secret,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'sec-canary', namespace: 'calico-system' },
        type: 'Opaque',
        data: { 'tls.key': b64(CANARY2), token: b64(`Bearer ${CANARY2}`) },
      },
      { fieldManager: 'e2e' },
    );
    for (const args of [
      ['diff', bundle],
      ['diff', bundle, '-o', 'json', '-v'],
      ['restore', bundle, '--resources', '--dry-run', '-v'],
      ['restore', bundle, '--resources', '--dry-run', '-o', 'json'],
      ['restore', bundle, '--resources', '--dry-run', '-o', 'yaml'],
    ]) {
      const x = await runCli(args);
      expect([0, 1], `${args.join(' ')}: ${x.stderr}`).toContain(x.code);
      expectNoCanary(x, args.join(' '));
    }
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-v', '-o', 'json']);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expectNoCanary(r, 'restore --yes -v -o json');
    // The restore did put the original value back.
    const live = await client.get(K.secret, 'calico-system', 'sec-canary');
    expect(live.data?.['tls.key']).toBe(b64(CANARY));
  });

  it('AWS credentials in the environment never appear, even when the provider fails', async () => {
    const env = {
      AWS_ACCESS_KEY_ID: `AKIA${AWS_CANARY.slice(0, 16)}`,
      AWS_SECRET_ACCESS_KEY: AWS_CANARY,
      AWS_SESSION_TOKEN: `${AWS_CANARY}tok`,
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_EC2: 'http://127.0.0.1:1',
      AWS_EC2_METADATA_DISABLED: 'true',
    };
    await client.apply(
      K.node,
      {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: 'sec-aws-1', labels: { 'cnr-test': 'sec' } },
        spec: { providerID: 'aws:///us-east-1a/i-0123456789abcdef0' },
      },
      { fieldManager: 'e2e' },
    );
    try {
      for (const args of [
        ['backup', '--selector', 'cnr-test=sec', '--out', path.join(work, 'aws-b'), '-v'],
        ['backup', '--selector', 'cnr-test=sec', '--out', path.join(work, 'aws-c'), '-o', 'json'],
        ['snapshots', 'list', '--provider', 'aws', '-v'],
      ]) {
        const x = await runCli(args, { env });
        expect(x.code, `${args.join(' ')}: ${x.stderr}`).not.toBe(0);
        if (!args.includes('-v')) expect(x.stderr, 'no stack trace without -v').not.toMatch(/\n\s+at .+[(:]\d+/);
        expectNoCanary(x, args.join(' '), [AWS_CANARY, env.AWS_ACCESS_KEY_ID]);
      }
    } finally {
      await client.delete(K.node, undefined, 'sec-aws-1');
    }
  });

  it('Secret material written with an encryption key is encrypted at rest; verify needs no key; reading needs the right one', async () => {
    const key = randomBytes(32);
    const out = path.join(work, 'enc');
    const host = new RecordingIoHost();
    const { manifest } = await exportBundle(client, { out, encryptionKey: key }, new Reporter(host));
    expect(manifest.encryption?.algorithm).toBe('aes-256-gcm');
    const rel = Object.keys(manifest.files).find((f) => f.endsWith('/Secret/sec-canary.yaml'))!;
    expect(manifest.files[rel]).toMatchObject({ secret: true, encrypted: true });
    const raw = fs.readFileSync(path.join(out, rel));
    expect(raw.subarray(0, 7).toString()).toBe('CNRENC2');
    for (const form of [CANARY, b64(CANARY)]) expect(raw.includes(form), 'no plaintext at rest').toBe(false);
    expect(fs.statSync(path.join(out, rel)).mode & 0o777).toBe(0o600);
    expect(JSON.stringify(host)).not.toContain(b64(CANARY));

    const b = await openBundle(out);
    expect((await verifyBundle(b)).ok).toBe(true);
    await expect(b.readObject(rel)).rejects.toThrow(/is encrypted; give the bundle key/);
    await b.close();
    // A wrong key is caught before any file is read: the manifest's MAC (keyed from the bundle key) does not check.
    await expect(openBundle(out, { encryptionKey: randomBytes(32) })).rejects.toThrow(/manifest\.json fails its authentication check/);
    const right = await openBundle(out, { encryptionKey: key });
    expect((await right.readObject(rel)).data?.['tls.key']).toBe(b64(CANARY));
    await right.close();
  });

  it('restore refuses a bundle from another cluster (exit 5) and writes nothing; --allow-other-cluster lets the dry run through', async () => {
    const other = path.join(work, 'other');
    fs.cpSync(bundle, other, { recursive: true });
    const mf = path.join(other, 'manifest.json');
    const m = JSON.parse(fs.readFileSync(mf, 'utf8'));
    m.cluster.uid = '00000000-0000-4000-8000-000000000000';
    fs.writeFileSync(mf, JSON.stringify(m));
    await client.apply(
      K.secret,
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'sec-canary', namespace: 'calico-system' }, type: 'Opaque', data: { 'tls.key': b64(CANARY2) } },
      { fieldManager: 'e2e' },
    );
    const r = await runCli(['restore', other, '--resources', '--yes']);
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toMatch(/not from this cluster/);
    expect((await client.get(K.secret, 'calico-system', 'sec-canary')).data?.['tls.key'], 'nothing was written').toBe(b64(CANARY2));
    const d = await runCli(['restore', other, '--resources', '--dry-run', '--allow-other-cluster']);
    expect([0, 1], d.stderr).toContain(d.code);
    expectNoCanary(d, 'restore --dry-run --allow-other-cluster');
  });
});
