import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { packedResourcePath, packedV3Path, resourcePathFor } from './paths.js';
import { openBundle } from './reader.js';
import { verifyBundle } from './verify.js';
import { BundleWriter } from './writer.js';
import { packageRoot } from '../core/package-root.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-packed-test-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const G = 'crd.projectcalico.org';
const handle = (i: number) => ({
  apiVersion: `${G}/v1`,
  kind: 'IPAMHandle',
  metadata: { name: `h-${i}` },
  spec: { handleID: `k8s-pod-network.ü-${i}`, block: { '10.0.0.0/26': 1 } },
});
const pool = { apiVersion: `${G}/v1`, kind: 'IPPool', metadata: { name: 'p' }, spec: { cidr: '10.0.0.0/16' } };
const HANDLES = packedResourcePath(G, 'IPAMHandle');

/** A format 2 bundle: n handles packed in one file, one IPPool as its own file. */
async function writePacked(out: string, n: number): Promise<string> {
  const w = await BundleWriter.open(out);
  const pack = await w.openPacked(HANDLES);
  for (let i = 0; i < n; i++) await pack.write(handle(i) as any);
  expect(await pack.close()).toBe(n);
  await w.writeObject(resourcePathFor(pool as any), pool as any);
  const v3 = await w.openPacked(packedV3Path('IPPool'));
  await v3.write({ ...pool, apiVersion: 'projectcalico.org/v3' } as any);
  await v3.close();
  w.manifest.resources.push(
    { key: `ipamhandles.${G}`, group: G, version: 'v1', kind: 'IPAMHandle', plural: 'ipamhandles', namespaced: false, count: n },
    { key: `ippools.${G}`, group: G, version: 'v1', kind: 'IPPool', plural: 'ippools', namespaced: false, count: 1 },
  );
  w.manifest.counts = { [`ipamhandles.${G}`]: n, [`ippools.${G}`]: 1 };
  return w.commit();
}

async function names(out: string, kinds?: string[]): Promise<string[]> {
  const b = await openBundle(out);
  try {
    const got: string[] = [];
    for await (const o of b.objects(kinds ? { kinds } : {})) got.push(o.object.metadata.name);
    return got;
  } finally {
    await b.close();
  }
}

describe('packed kinds (bundle format 2)', () => {
  it('streams a packed kind back in order, beside per-object files, and verifies', async () => {
    // More than one read chunk (1 MiB), so lines cross chunk boundaries, with non-ASCII text in them.
    const n = 12_000;
    const out = await writePacked(path.join(dir, 'b'), n);
    const m = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    expect(m.formatVersion).toBe('2.1.0');
    expect(m.files[HANDLES]).toMatchObject({ objects: n });
    expect(fs.statSync(path.join(out, HANDLES)).size).toBeGreaterThan(1 << 20);
    expect(Object.keys(m.files)).toHaveLength(3);
    const got = await names(out, ['IPAMHandle']);
    expect(got).toHaveLength(n);
    expect(got[0]).toBe('h-0');
    expect(got[n - 1]).toBe(`h-${n - 1}`);
    expect((await names(out)).filter((x) => x === 'p')).toHaveLength(1);
    const b = await openBundle(out);
    const v3 = [];
    for await (const o of b.v3Objects()) v3.push(o.object.apiVersion);
    expect(v3).toEqual(['projectcalico.org/v3']);
    expect(await verifyBundle(b)).toMatchObject({ ok: true, problems: [] });
    await expect(b.readObject(HANDLES)).rejects.toThrow(/packed file/);
    await b.close();
  });

  it('reads a line longer than a read chunk (it spans three) between short ones, byte for byte', async () => {
    const w = await BundleWriter.open(path.join(dir, 'long'));
    const pack = await w.openPacked(HANDLES);
    const long = { ...handle(1), metadata: { name: 'h-1', annotations: { big: 'ü'.repeat(1_300_000) } } };
    for (const o of [handle(0), long, handle(2)]) await pack.write(o as any);
    await pack.close();
    w.manifest.resources.push({ key: `ipamhandles.${G}`, group: G, version: 'v1', kind: 'IPAMHandle', plural: 'ipamhandles', namespaced: false, count: 3 });
    const out = await w.commit();
    expect(fs.statSync(path.join(out, HANDLES)).size).toBeGreaterThan(2 << 20);
    const b = await openBundle(out);
    const got = [];
    for await (const o of b.objects({ kinds: ['IPAMHandle'] })) got.push(o.object);
    await b.close();
    expect(got).toEqual([handle(0), long, handle(2)]);
  });

  it('refuses an edited packed file before handing out any object, and verify names it', async () => {
    const out = await writePacked(path.join(dir, 'b'), 50);
    const f = path.join(out, HANDLES);
    fs.writeFileSync(f, fs.readFileSync(f, 'utf8').replace('"h-49"', '"h-4X"'));
    const b = await openBundle(out);
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const o of b.objects({ kinds: ['IPAMHandle'] })) seen.push(o.object.metadata.name);
      })(),
    ).rejects.toThrow(/does not match its checksum/);
    expect(seen).toEqual([]);
    const r = await verifyBundle(b);
    expect(r.problems).toContainEqual({ file: HANDLES, problem: expect.stringMatching(/sha256/) });
    await b.close();
  });

  it('verify compares the object count of a packed file with the manifest', async () => {
    const out = await writePacked(path.join(dir, 'b'), 5);
    const mf = path.join(out, 'manifest.json');
    const m = JSON.parse(fs.readFileSync(mf, 'utf8'));
    m.files[HANDLES].objects = 4;
    fs.writeFileSync(mf, JSON.stringify(m));
    const b = await openBundle(out);
    const r = await verifyBundle(b);
    expect(r.problems.map((p) => p.problem).join('\n')).toMatch(/holds 5 lines, but the manifest says 4 objects/);
    await b.close();
  });

  it('flags an object of another kind or with a namespace inside a packed cluster-scoped kind', async () => {
    const w = await BundleWriter.open(path.join(dir, 'b'));
    const pack = await w.openPacked(HANDLES);
    await pack.write(handle(1) as any);
    await pack.write({ ...handle(2), metadata: { name: 'h-2', namespace: 'kube-system' } } as any);
    await pack.write({ ...handle(3), kind: 'ClusterRoleBinding', apiVersion: 'rbac.authorization.k8s.io/v1' } as any);
    await pack.close();
    w.manifest.resources.push({ key: `ipamhandles.${G}`, group: G, version: 'v1', kind: 'IPAMHandle', plural: 'ipamhandles', namespaced: false, count: 3 });
    const out = await w.commit();
    const b = await openBundle(out);
    const got = [];
    for await (const o of b.objects({ lenient: true })) got.push([o.object.metadata.name, o.problem ?? '']);
    expect(got[0]).toEqual(['h-1', '']);
    expect(got[1]![1]).toMatch(/with a namespace its cluster-scoped kind has not/);
    expect(got[2]![1]).toMatch(/belongs at resources\/rbac\.authorization\.k8s\.io\/ClusterRoleBinding\.jsonl/);
    await expect(
      (async () => {
        for await (const _ of b.objects()) void _;
      })(),
    ).rejects.toThrow(/cluster-scoped/);
    await b.close();
  });

  it('still reads a format 1.x bundle (one file per object), where a .jsonl name is no packed file', async () => {
    const out = await writePacked(path.join(dir, 'b'), 3);
    // Made into a 1.1 bundle: the packed file is gone, the handles are files of their own.
    const mf = path.join(out, 'manifest.json');
    const m = JSON.parse(fs.readFileSync(mf, 'utf8'));
    m.formatVersion = '1.1.0';
    const w = await BundleWriter.open(path.join(dir, 'tmp'));
    for (let i = 0; i < 3; i++) await w.writeObject(resourcePathFor(handle(i) as any), handle(i) as any);
    for (const [rel, e] of Object.entries(w.manifest.files)) {
      fs.mkdirSync(path.dirname(path.join(out, rel)), { recursive: true });
      fs.copyFileSync(path.join(w.workDir, rel), path.join(out, rel));
      m.files[rel] = e;
    }
    await w.abort();
    fs.writeFileSync(mf, JSON.stringify(m));
    const got = await names(out, ['IPAMHandle']);
    expect(got.sort()).toEqual(['h-0', 'h-1', 'h-2']);
    const b = await openBundle(out);
    // In 1.x the .jsonl files are not object files: verify counts only the per-object files (3 handles) and
    // reading the .jsonl as an object fails as any non-YAML file would.
    expect((await verifyBundle(b)).problems).toEqual([]);
    await expect(b.readObject(HANDLES)).rejects.toThrow(/not a Kubernetes object|not valid YAML/);
    await b.close();
  });

  it('the built CLI refuses a .tar.gz bundle cut off inside a packed file with one line (exit 2), not a hang', async () => {
    const tgz = await writePacked(path.join(dir, 'b.tar.gz'), 20_000);
    const full = fs.readFileSync(tgz);
    const cut = path.join(dir, 'cut.tar.gz');
    fs.writeFileSync(cut, full.subarray(0, Math.floor(full.length / 2)));
    const r = spawnSync(process.execPath, [path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), 'verify', cut], {
      encoding: 'utf8',
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 60_000,
    });
    expect(r.stderr).toMatch(/cut\.tar\.gz is truncated or not a complete tar\.gz archive/);
    expect(r.status).toBe(2);
  });

  it('an object nested 5,000 deep in a packed file fails verify and is refused when read, in one line each', async () => {
    const out = await writePacked(path.join(dir, 'deep'), 2);
    const file = path.join(out, HANDLES);
    const deep = `{"apiVersion":"${G}/v1","kind":"IPAMHandle","metadata":{"name":"deep"},"spec":${'{"x":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    // A bracket inside a string is no nesting: the first line stays within bounds.
    const lines = [JSON.stringify({ ...handle(0), spec: { handleID: '[[[[{{{{"\\' } }), deep];
    fs.writeFileSync(file, lines.join('\n') + '\n');
    const m = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    const body = fs.readFileSync(file);
    m.files[HANDLES] = { ...m.files[HANDLES], size: body.length, sha256: createHash('sha256').update(body).digest('hex') };
    fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(m));
    const r = await verifyBundle(await openBundle(out));
    expect(r.problems).toEqual([{ file: HANDLES, problem: 'holds an object nested 5001 deep (at most 100)' }]);
    await expect(names(out, ['IPAMHandle'])).rejects.toThrow(/line 2 is nested deeper than a Kubernetes object can be/);
  });
});
