import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync, gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { crdSchemaMinor } from '../doctor/checks/versions.js';
import { parseManifests } from '../kube/manifests.js';
import { calicoMinorForOperator, CRD_SCHEMA_MARKERS, imageTag, OPERATOR_VERSIONS, SHARED_POLICY_GROUP, SHARED_POLICY_KINDS } from './knowledge.js';
import { loadRelease, shippedVersions } from './release.js';
import { readShippedFile, shippedReleases, shippedReleasesDir } from './shipped.js';

const crdNames = (text: string) =>
  parseManifests(text, 'x')
    .filter((o) => o.kind === 'CustomResourceDefinition')
    .map((o) => o.metadata.name)
    .sort();
const minorOf = (v: string) => Number(v.replace(/^v/, '').split('.')[1]);

describe('the shipped Calico releases', () => {
  it('are the nine current releases, 3.26.5 to 3.32.1', () => {
    expect(shippedVersions()).toEqual(['v3.26.5', 'v3.27.4', 'v3.27.5', 'v3.28.1', 'v3.28.5', 'v3.29.7', 'v3.30.7', 'v3.31.7', 'v3.32.1']);
  });

  // One test per release so a failure names it.
  for (const r of shippedReleases()) {
    it(`${r.version}: loads offline with its operator image, CRD set and schema markers`, async () => {
      const rel = await loadRelease(r.version, { offline: true, need: 'operator' });
      // Operator image: the file's, the index's and the knowledge table's agree.
      expect(rel.operatorImage).toBe(r.operatorImage);
      expect(imageTag(rel.operatorImage)).toBe(OPERATOR_VERSIONS[`v${r.version}`]);
      expect(calicoMinorForOperator(imageTag(rel.operatorImage)!)).toBe(`v3.${minorOf(r.version)}`);

      // CRD set: up to 3.29 tigera-operator.yaml embeds exactly operator-crds.yaml's CRDs; from 3.30 it holds none.
      const fromCrdsFile = crdNames(readShippedFile(r.version, 'operator-crds.yaml')!.text);
      expect(rel.crds.map((c) => c.metadata.name).sort()).toEqual(fromCrdsFile);
      const embedded = crdNames(readShippedFile(r.version, 'tigera-operator.yaml')!.text);
      expect(embedded).toEqual(minorOf(r.version) <= 29 ? fromCrdsFile : []);
      const expectedCount = minorOf(r.version) <= 28 ? 22 : minorOf(r.version) === 29 ? 24 : 32;
      expect(rel.crds).toHaveLength(expectedCount);
      expect(r.crds['operator-crds.yaml']).toBe(expectedCount);
      // Every release has the Calico data kinds the planner and restore order rely on.
      for (const kind of ['IPPool', 'IPAMBlock', 'IPAMHandle', 'BlockAffinity', 'IPAMConfig', 'ClusterInformation', 'Installation', 'APIServer']) {
        expect(
          rel.crds.some((c) => c.spec.names.kind === kind),
          kind,
        ).toBe(true);
      }
      // The shared policy kinds: AdminNetworkPolicy from 3.29, BaselineAdminNetworkPolicy from 3.30, replaced by
      // ClusterNetworkPolicy in 3.32; every one of them is a kind export knows.
      const shared = rel.crds
        .filter((c) => c.spec.group === SHARED_POLICY_GROUP)
        .map((c) => c.spec.names.kind)
        .sort();
      const m = minorOf(r.version);
      expect(shared).toEqual(
        m >= 32 ? ['ClusterNetworkPolicy'] : m >= 30 ? ['AdminNetworkPolicy', 'BaselineAdminNetworkPolicy'] : m >= 29 ? ['AdminNetworkPolicy'] : [],
      );
      for (const k of shared) expect(SHARED_POLICY_KINDS).toContain(k);

      // Schema markers: the newest marker the CRDs carry is this release's minor (3.26 predates every marker).
      const got = crdSchemaMinor(rel.crds);
      expect(got?.since).toBe(minorOf(r.version) >= 27 ? `v3.${minorOf(r.version)}` : undefined);
      for (const m of CRD_SCHEMA_MARKERS) {
        if (minorOf(m.since) > minorOf(r.version)) continue;
        const crd = rel.crds.find((c) => c.spec.names.kind === m.kind);
        expect(crd, `${m.kind} CRD`).toBeDefined();
      }

      // calico.yaml: a manifest install of the same version, crd.projectcalico.org CRDs only.
      const manifest = await loadRelease(r.version, { offline: true, need: 'manifest' });
      expect(manifest.crds.length).toBe(r.crds['calico.yaml']);
      expect(manifest.crds.every((c) => c.spec.group !== 'operator.tigera.io')).toBe(true);
    });
  }
});

describe('a damaged shipped release', () => {
  afterEach(() => {
    delete process.env.CNI_REWIND_RELEASES_DIR;
  });

  it('is refused by its checksum instead of being planned against', async () => {
    const copy = mkdtempSync(path.join(os.tmpdir(), 'cnr-shipped-'));
    cpSync(shippedReleasesDir(), copy, { recursive: true });
    const f = path.join(copy, '3.27.4', 'custom-resources.yaml.gz');
    const edited = gunzipSync(readFileSync(f)).toString().replace('blockSize: 26', 'blockSize: 24');
    writeFileSync(f, gzipSync(edited));
    process.env.CNI_REWIND_RELEASES_DIR = copy;
    await expect(loadRelease('3.27.4', { offline: true })).rejects.toThrow(/shipped Calico 3\.27\.4 custom-resources\.yaml is damaged/);
    // The untouched release in the same copy still loads.
    await expect(loadRelease('3.28.1', { offline: true })).resolves.toMatchObject({ version: 'v3.28.1' });
  });
});
