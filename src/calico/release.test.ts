import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../core/errors.js';
import { loadRelease, MAX_RELEASE_FILE_BYTES, releaseBaseUrl } from './release.js';
import { readShippedFile, shippedReleasesDir } from './shipped.js';

const fixtures = shippedReleasesDir();
const text = (v: string, f: string) => readShippedFile(v, f)!.text;
/** Put a shipped file, unzipped, into a folder as a user's download would be. */
const copyTo = (v: string, f: string, dir: string) => writeFileSync(path.join(dir, f), text(v, f));

describe('loadRelease from a folder', () => {
  it('loads 3.27.4 from the fixtures layout: 22 CRDs, operator v1.32.10, objects without CRDs', async () => {
    const r = await loadRelease('3.27.4', { manifests: fixtures });
    expect(r.version).toBe('v3.27.4');
    expect(r.operatorImage).toBe('quay.io/tigera/operator:v1.32.10');
    expect(r.crds).toHaveLength(22);
    expect(r.operatorObjects.some((o) => o.kind === 'CustomResourceDefinition')).toBe(false);
    expect(r.operatorObjects.map((o) => o.kind)).toEqual(expect.arrayContaining(['Namespace', 'Deployment', 'ServiceAccount']));
    expect(r.customResources.map((o) => o.kind).sort()).toEqual(['APIServer', 'Installation']);
    expect(r.calicoManifest?.filter((o) => o.kind === 'CustomResourceDefinition')).toHaveLength(18);
    expect(Object.keys(r.files).sort()).toEqual(['calico.yaml', 'custom-resources.yaml', 'tigera-operator.yaml']);
    expect(r.files['tigera-operator.yaml']!.sha256).toMatch(/^89f0fab9a0d80376/); // the README's checksum of the tagged blob
  });

  it('takes the 3.30 CRDs from operator-crds.yaml', async () => {
    const r = await loadRelease('v3.30.7', { manifests: fixtures });
    expect(r.operatorImage).toBe('quay.io/tigera/operator:v1.38.13');
    expect(r.crds).toHaveLength(32);
    expect(r.crds.some((c) => c.spec.group === 'policy.networking.k8s.io')).toBe(true);
    expect(r.files['operator-crds.yaml']).toBeDefined();
  });

  it('uses the shipped release when no folder is given, without the network', async () => {
    const r = await loadRelease('3.28.1', { offline: true });
    expect(r.operatorImage).toBe('quay.io/tigera/operator:v1.34.3');
    expect(r.origin).toBe(path.join(fixtures, '3.28.1'));
    expect(r.files['tigera-operator.yaml']!.source).toBe(path.join(fixtures, '3.28.1', 'tigera-operator.yaml.gz'));
  });

  it('reads a folder holding the files directly', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    copyTo('3.27.4', 'tigera-operator.yaml', dir);
    const r = await loadRelease('3.27.4', { manifests: dir });
    expect(r.crds).toHaveLength(22);
    expect(r.customResources).toEqual([]);
    expect(r.calicoManifest).toBeUndefined();
  });

  it("refuses another release's tigera-operator.yaml with a clear message", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    copyTo('3.28.1', 'tigera-operator.yaml', dir);
    await expect(loadRelease('3.27.4', { manifests: dir })).rejects.toThrow(
      /not Calico v3\.27\.4's operator manifest: it runs operator v1\.34\.3 \(Calico v3\.28\.1\)/,
    );
  });

  it('refuses a FIFO as a manifest and a small .gz that unpacks past the limit, in one line each', { timeout: 10_000 }, async () => {
    const fifo = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    execFileSync('mkfifo', [path.join(fifo, 'tigera-operator.yaml')]);
    await expect(loadRelease('3.27.4', { manifests: fifo })).rejects.toThrow(/release manifest .*tigera-operator\.yaml is not a regular file/);
    const bomb = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    // 40 MiB of spaces packs to about 40 KiB.
    writeFileSync(path.join(bomb, 'tigera-operator.yaml.gz'), gzipSync(Buffer.alloc(MAX_RELEASE_FILE_BYTES + 8 * 1024 * 1024, ' ')));
    await expect(loadRelease('3.27.4', { manifests: bomb })).rejects.toThrow(/tigera-operator\.yaml\.gz unpacks to more than 33554432 bytes/);
  });

  it('reports missing files, a missing folder, a 3.30 release without operator-crds.yaml, and junk', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    await expect(loadRelease('3.27.4', { manifests: empty })).rejects.toThrow(/no Calico v3\.27\.4 manifests under/);
    await expect(loadRelease('3.27.4', { manifests: path.join(empty, 'nope') })).rejects.toThrow(/does not exist/);
    await expect(loadRelease('banana')).rejects.toThrow(BadInputError);

    const d30 = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    copyTo('3.30.7', 'tigera-operator.yaml', d30);
    await expect(loadRelease('3.30.7', { manifests: d30 })).rejects.toThrow(/holds no CRDs and operator-crds\.yaml is missing/);

    const junk = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    writeFileSync(path.join(junk, 'tigera-operator.yaml'), 'kind: [unclosed');
    await expect(loadRelease('3.27.4', { manifests: junk })).rejects.toThrow(/is not valid YAML/);

    const onlyCalico = mkdtempSync(path.join(os.tmpdir(), 'cnr-rel-'));
    copyTo('3.27.4', 'calico.yaml', onlyCalico);
    await expect(loadRelease('3.27.4', { manifests: onlyCalico, need: 'operator' })).rejects.toThrow(/tigera-operator\.yaml for Calico v3\.27\.4 not found/);
    const manifestOnly = await loadRelease('3.27.4', { manifests: onlyCalico, need: 'manifest' });
    expect(manifestOnly.crds).toHaveLength(18);
    await expect(loadRelease('3.28.1', { manifests: onlyCalico, need: 'manifest' })).rejects.toThrow(
      /not Calico v3\.28\.1's calico\.yaml: it runs calico\/node v3\.27\.4/,
    );
  });
});

describe('loadRelease from a URL (a local HTTP server standing in for raw.githubusercontent.com)', () => {
  let server: http.Server;
  let base: string;
  const requested: string[] = [];
  beforeAll(async () => {
    // Serves <root>/vX.Y.Z/manifests/<file> from the fixtures, as the release URL pattern lays them out.
    server = http.createServer((req, res) => {
      requested.push(req.url ?? '');
      const m = /^\/v(\d+\.\d+\.\d+)\/manifests\/([\w.-]+)$/.exec(req.url ?? '');
      try {
        if (!m) throw new Error('no');
        res.end(text(m[1]!, m[2]!));
      } catch {
        res.statusCode = 404;
        res.end('404: Not Found');
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());

  it('builds the release URL like projectcalico/calico raw manifests', () => {
    expect(releaseBaseUrl('https://raw.githubusercontent.com/projectcalico/calico', 'v3.27.4')).toBe(
      'https://raw.githubusercontent.com/projectcalico/calico/v3.27.4/manifests/',
    );
    expect(releaseBaseUrl('https://x/{version}/m', 'v3.27.4')).toBe('https://x/v3.27.4/m/');
    expect(releaseBaseUrl('https://mirror.example/calico/manifests/', 'v3.27.4')).toBe('https://mirror.example/calico/manifests/');
  });

  it('fetches 3.27.4 and 3.30.7 (operator-crds.yaml fetched only when needed)', async () => {
    const r = await loadRelease('3.27.4', { manifests: base });
    expect(r.crds).toHaveLength(22);
    expect(r.files['tigera-operator.yaml']!.source).toBe(`${base}/v3.27.4/manifests/tigera-operator.yaml`);
    expect(requested).not.toContain('/v3.27.4/manifests/operator-crds.yaml');
    const r30 = await loadRelease('3.30.7', { manifests: base });
    expect(r30.crds).toHaveLength(32);
  });

  it('says clearly when a release is not there', async () => {
    await expect(loadRelease('3.26.9', { manifests: base })).rejects.toThrow(
      /no Calico v3\.26\.9 manifests in http:\/\/127\.0\.0\.1:\d+\/v3\.26\.9\/manifests\//,
    );
  });

  it('never touches the network when offline', async () => {
    await expect(loadRelease('3.26.9', { offline: true })).rejects.toThrow(/network is not allowed/);
  });
});
