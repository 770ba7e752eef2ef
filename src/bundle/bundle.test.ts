import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BadInputError } from '../core/errors.js';
import { resourcePathFor, configPathFor, crdPathFor, parseResourcePath, encodeSegment } from './paths.js';
import { openBundle, readBundleManifest } from './reader.js';
import { verifyBundle } from './verify.js';
import { BundleWriter } from './writer.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bundle-test-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const pool = (name: string, disabled = false) => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPPool',
  metadata: { name, uid: 'u-' + name },
  spec: { cidr: '10.0.0.0/16', disabled },
});
const netpol = { apiVersion: 'crd.projectcalico.org/v1', kind: 'NetworkPolicy', metadata: { name: 'allow', namespace: 'app' }, spec: { selector: 'all()' } };
const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'node-certs', namespace: 'calico-system' }, data: { 'tls.key': 'c2VjcmV0' } };
const crd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'ippools.crd.projectcalico.org' },
  spec: { group: 'crd.projectcalico.org' },
};

async function writeSample(out: string, opts: { key?: Buffer } = {}): Promise<string> {
  const w = await BundleWriter.open(out, { encryptionKey: opts.key });
  await w.writeObject(crdPathFor(crd as any), crd as any);
  for (const p of [pool('a'), pool('b', true)]) await w.writeObject(resourcePathFor(p as any), p as any);
  await w.writeObject(resourcePathFor(netpol as any), netpol as any);
  await w.writeObject(configPathFor(secret as any), secret as any, { secret: true });
  w.manifest.resources.push(
    { key: 'ippools.crd.projectcalico.org', group: 'crd.projectcalico.org', version: 'v1', kind: 'IPPool', plural: 'ippools', namespaced: false, count: 2 },
    {
      key: 'networkpolicies.crd.projectcalico.org',
      group: 'crd.projectcalico.org',
      version: 'v1',
      kind: 'NetworkPolicy',
      plural: 'networkpolicies',
      namespaced: true,
      count: 1,
    },
  );
  w.manifest.counts = {
    'ippools.crd.projectcalico.org': 2,
    'networkpolicies.crd.projectcalico.org': 1,
    'customresourcedefinitions.apiextensions.k8s.io': 1,
    secrets: 1,
  };
  return w.commit();
}

describe('bundle paths', () => {
  it('shows group, kind, namespace and name, and round-trips odd names', () => {
    expect(resourcePathFor(netpol as any)).toBe('resources/crd.projectcalico.org/NetworkPolicy/app/allow.yaml');
    expect(resourcePathFor(pool('x') as any)).toBe('resources/crd.projectcalico.org/IPPool/_cluster/x.yaml');
    const odd = { ...pool('a:b/../c'), metadata: { name: 'a:b/../c' } };
    const p = resourcePathFor(odd as any);
    expect(p.split('/')).toHaveLength(5);
    expect(parseResourcePath(p)?.name).toBe('a:b/../c');
    expect(encodeSegment('..')).not.toBe('..');
  });
});

describe('BundleWriter + openBundle + verifyBundle', () => {
  it('writes atomically, with 0700 dir and 0600 secret files, and reads back what it wrote', async () => {
    const out = path.join(dir, 'b1');
    const w = await BundleWriter.open(out);
    await w.writeObject(resourcePathFor(pool('a') as any), pool('a') as any);
    // Before commit nothing exists at the target; the partial dir has no manifest.
    expect(fs.existsSync(out)).toBe(false);
    await expect(openBundle(w.workDir)).rejects.toThrow(/not a bundle: it has no manifest.json/);
    await w.abort();
    expect(fs.readdirSync(dir)).toEqual([]);

    const final = await writeSample(out);
    expect(final).toBe(out);
    expect(fs.statSync(out).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(out, 'config/calico-system/Secret/node-certs.yaml')).mode & 0o777).toBe(0o600);
    const b = await openBundle(out);
    expect(b.manifest.formatVersion).toMatch(/^2\./);
    const objs = [];
    for await (const o of b.objects()) objs.push(o.object.metadata.name);
    expect(objs.sort()).toEqual(['a', 'allow', 'b']);
    const pools = [];
    for await (const o of b.objects({ kinds: ['ippools'] })) pools.push(o.object);
    expect(pools.map((p) => p.spec.disabled)).toEqual([false, true]);
    expect((await b.crds()).map((c) => c.metadata.name)).toEqual(['ippools.crd.projectcalico.org']);
    const cfg = [];
    for await (const o of b.configObjects()) cfg.push(o.object.kind);
    expect(cfg).toEqual(['Secret']);
    expect(await verifyBundle(b)).toMatchObject({ ok: true, problems: [] });
    await b.close();
    await expect(BundleWriter.open(out)).rejects.toThrow(/already exists/);
  });

  it('verify names a flipped byte, a missing file and an extra file', async () => {
    const out = await writeSample(path.join(dir, 'b2'));
    const f = path.join(out, 'resources/crd.projectcalico.org/IPPool/_cluster/a.yaml');
    const buf = fs.readFileSync(f);
    buf[10] = buf[10]! ^ 1;
    fs.writeFileSync(f, buf);
    fs.rmSync(path.join(out, 'resources/crd.projectcalico.org/NetworkPolicy/app/allow.yaml'));
    fs.writeFileSync(path.join(out, 'resources/extra.yaml'), 'x');
    const b = await openBundle(out);
    const r = await verifyBundle(b);
    expect(r.ok).toBe(false);
    const byFile = Object.fromEntries(r.problems.map((p) => [p.file, p.problem]));
    expect(byFile['resources/crd.projectcalico.org/IPPool/_cluster/a.yaml']).toMatch(/sha256/);
    expect(byFile['resources/crd.projectcalico.org/NetworkPolicy/app/allow.yaml']).toBe('missing');
    expect(byFile['resources/extra.yaml']).toMatch(/extra/);
    // Reading the edited object refuses it.
    await expect(b.readObject('resources/crd.projectcalico.org/IPPool/_cluster/a.yaml')).rejects.toThrow(/checksum/);
    await b.close();
  });

  it('writes and reads a .tar.gz, and reads only the manifest for list', async () => {
    const out = await writeSample(path.join(dir, 'b3.tar.gz'));
    expect(fs.readdirSync(dir)).toEqual(['b3.tar.gz']);
    expect((await readBundleManifest(out)).id).toBe('b3');
    const b = await openBundle(out);
    expect(await verifyBundle(b)).toMatchObject({ ok: true });
    const root = b.root;
    await b.close();
    expect(fs.existsSync(root)).toBe(false);
  });

  it('encrypts Secret files when given a key; verify works without the key', async () => {
    const key = Buffer.alloc(32, 7);
    const out = await writeSample(path.join(dir, 'b4'), { key });
    const raw = fs.readFileSync(path.join(out, 'config/calico-system/Secret/node-certs.yaml'));
    expect(raw.toString('latin1')).not.toContain('c2VjcmV0');
    const b = await openBundle(out);
    expect(await verifyBundle(b)).toMatchObject({ ok: true });
    await expect(b.readObject('config/calico-system/Secret/node-certs.yaml')).rejects.toThrow(/encrypted/);
    await b.close();
    const b2 = await openBundle(out, { encryptionKey: key });
    expect((await b2.readObject('config/calico-system/Secret/node-certs.yaml')).data).toEqual({ 'tls.key': 'c2VjcmV0' });
    await b2.close();
  });
});

describe('bad input gives one clear BadInputError', () => {
  const bad = async (p: string, re: RegExp) => {
    const err = await openBundle(p).then(
      () => undefined,
      (e) => e,
    );
    expect(err).toBeInstanceOf(BadInputError);
    expect(err.message).toMatch(re);
    expect(err.message).not.toContain('\n');
  };

  it('not a bundle, missing, truncated, newer major, broken manifest', async () => {
    await bad(path.join(dir, 'nope'), /no such bundle/);
    fs.writeFileSync(path.join(dir, 'plain.txt'), 'hello');
    await bad(path.join(dir, 'plain.txt'), /not a bundle/);
    fs.mkdirSync(path.join(dir, 'empty'));
    await bad(path.join(dir, 'empty'), /no manifest.json/);
    const tgz = await writeSample(path.join(dir, 'b.tar.gz'));
    const full = fs.readFileSync(tgz);
    fs.writeFileSync(path.join(dir, 'trunc.tar.gz'), full.subarray(0, Math.floor(full.length / 2)));
    await bad(path.join(dir, 'trunc.tar.gz'), /truncated|not a valid gzip|cannot be read/);
    const d = await writeSample(path.join(dir, 'bd'));
    const man = JSON.parse(fs.readFileSync(path.join(d, 'manifest.json'), 'utf8'));
    fs.writeFileSync(path.join(d, 'manifest.json'), JSON.stringify({ ...man, formatVersion: '3.0.0' }));
    await bad(d, /format 3\.0\.0, newer than this cni-rewind reads \(1\.x to 2\.x\)/);
    fs.writeFileSync(path.join(d, 'manifest.json'), JSON.stringify({ ...man, formatVersion: '0.9.0' }));
    await bad(d, /format 0\.9\.0, older/);
    fs.writeFileSync(path.join(d, 'manifest.json'), '{"formatVersion": "1.0.0", "id": 3');
    await bad(d, /not valid JSON/);
    fs.writeFileSync(path.join(d, 'manifest.json'), JSON.stringify({ ...man, files: { '../../etc/passwd': { sha256: 'a'.repeat(64), size: 1 } } }));
    await bad(d, /unsafe file/);
  });

  it('refuses archives with symlinks, hard links, .. and absolute paths, without writing outside', async () => {
    const src = path.join(dir, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'manifest.json'), '{}');
    fs.symlinkSync('/etc/passwd', path.join(src, 'link'));
    await tar.create({ gzip: true, cwd: src, file: path.join(dir, 'sym.tar.gz') }, ['manifest.json', 'link']);
    await bad(path.join(dir, 'sym.tar.gz'), /SymbolicLink entry/);
    fs.rmSync(path.join(src, 'link'));
    fs.linkSync(path.join(src, 'manifest.json'), path.join(src, 'hard'));
    await tar.create({ gzip: true, cwd: src, file: path.join(dir, 'hard.tar.gz') }, ['manifest.json', 'hard']);
    await bad(path.join(dir, 'hard.tar.gz'), /Link entry/);
    // GNU tar with -P keeps '..' and absolute names in the archive.
    fs.mkdirSync(path.join(src, 'sub'));
    execFileSync('tar', ['-czPf', path.join(dir, 'dotdot.tar.gz'), '-C', path.join(src, 'sub'), '../manifest.json']);
    await bad(path.join(dir, 'dotdot.tar.gz'), /unsafe entry/);
    execFileSync('tar', ['-czPf', path.join(dir, 'abs.tar.gz'), path.join(src, 'manifest.json')]);
    await bad(path.join(dir, 'abs.tar.gz'), /unsafe entry .*absolute/);
    const leftovers = fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith('cni-rewind-bundle-'));
    for (const l of leftovers)
      expect(fs.existsSync(path.join(os.tmpdir(), l, 'manifest.json')) && fs.existsSync(path.join(os.tmpdir(), l, 'hard'))).toBe(false);
  });
});

describe('directory bundles with links', () => {
  it('verify reports a symlinked object file and readObject refuses it', async () => {
    const out = await writeSample(path.join(dir, 'bl'));
    const rel = 'resources/crd.projectcalico.org/IPPool/_cluster/a.yaml';
    const f = path.join(out, rel);
    fs.renameSync(f, path.join(dir, 'elsewhere.yaml'));
    fs.symlinkSync(path.join(dir, 'elsewhere.yaml'), f);
    const b = await openBundle(out);
    const r = await verifyBundle(b);
    expect(r.problems).toContainEqual({ file: rel, problem: expect.stringMatching(/symbolic link/) });
    await expect(b.readObject(rel)).rejects.toThrow(/not a regular file/);
    await b.close();
  });
});
