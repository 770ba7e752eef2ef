import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configPathFor } from '../bundle/paths.js';
import { openBundle, type Bundle } from '../bundle/reader.js';
import type { BundleObject } from '../bundle/types.js';
import { BundleWriter } from '../bundle/writer.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeObject } from '../kube/types.js';
import { admissionRefusal, isLeftToHelm, isReferenceOnlyConfig } from './admission.js';
import { helmRecordsLeft, helmRecordsLeftText, reportHelmRecordsLeft } from './helm-records.js';

/** A record as helm's Secrets driver writes it (pkg/storage/driver/secrets.go newSecretsObject), or its ConfigMap. */
const record = (release: string, revision: number, status: string, opts: { namespace?: string; kind?: 'Secret' | 'ConfigMap' } = {}): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: opts.kind ?? 'Secret',
    metadata: {
      name: `sh.helm.release.v1.${release}.v${revision}`,
      namespace: opts.namespace ?? 'tigera-operator',
      labels: { owner: 'helm', name: release, status, version: String(revision) },
    },
    ...(opts.kind === 'ConfigMap' ? { data: { release: 'H4sI' } } : { type: 'helm.sh/release.v1', data: { release: 'SDRzSQ==' } }),
  }) as KubeObject;
const secret = (name: string, extra: Partial<KubeObject> = {}, namespace = 'tigera-operator'): KubeObject =>
  ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, type: 'Opaque', data: { k: 'dg==' }, ...extra }) as KubeObject;
const read = (object: KubeObject): BundleObject => ({ path: configPathFor(object), object });

async function bundleOf(objects: KubeObject[]): Promise<Bundle> {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-helm-records-')), 'b');
  const w = await BundleWriter.open(out);
  for (const o of objects) await w.writeObject(configPathFor(o), o, { secret: o.kind === 'Secret' });
  await w.commit();
  return openBundle(out);
}

describe('admission of Helm release records', () => {
  it('a record where export takes config is left to Helm, with either storage driver', () => {
    for (const o of [record('calico', 1, 'superseded'), record('calico', 2, 'deployed', { kind: 'ConfigMap', namespace: 'calico-system' })]) {
      expect(isLeftToHelm(read(o))).toBe(true);
      expect(isReferenceOnlyConfig(read(o))).toBe(true);
    }
  });

  it('a record filed under another path, or in a namespace export never takes, is refused by name, never skipped quietly', () => {
    const moved = {
      path: 'config/tigera-operator/Secret/tigera-ca-private.yaml',
      object: record('calico', 1, 'deployed'),
      problem: 'its name says another path',
    };
    expect(isReferenceOnlyConfig(moved)).toBe(false);
    expect(admissionRefusal(moved, 'config')).toBe('not restored: its name says another path');
    const elsewhere = read(record('other', 1, 'deployed', { namespace: 'kube-system' }));
    expect(isReferenceOnlyConfig(elsewhere)).toBe(false);
    expect(admissionRefusal(elsewhere, 'config')).toMatch(/^not restored: Secret kube-system\/sh\.helm\.release\.v1\.other\.v1 is not Calico configuration/);
  });

  it('part of Helm’s marks neither gets a Calico Secret skipped nor gets something Helm would read written', () => {
    const cases: KubeObject[] = [
      // A Calico Secret a crafted bundle labels as Helm's: restore must not pass it over as a release record.
      secret('tigera-ca-private', {
        metadata: { name: 'tigera-ca-private', namespace: 'tigera-operator', labels: { owner: 'helm', name: 'calico', status: 'deployed' } },
      }),
      secret('tigera-ca-private', { type: 'helm.sh/release.v1' }),
      // Helm's record name without its type or label: `helm get --revision 9` would read it.
      secret('sh.helm.release.v1.calico.v9'),
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'sh.helm.release.v1.calico.v9', namespace: 'tigera-operator' }, data: { release: 'x' } },
    ];
    for (const o of cases) {
      expect(isReferenceOnlyConfig(read(o)), o.metadata.name).toBe(false);
      expect(admissionRefusal(read(o), 'config'), o.metadata.name).toMatch(/carries part of the marks of a Helm release record/);
    }
    expect(admissionRefusal(read(secret('tigera-ca-private')), 'config')).toBeUndefined();
    expect(isReferenceOnlyConfig(read(secret('tigera-ca-private')))).toBe(false);
  });
});

describe('the one line about Helm release records', () => {
  it('counts the records a bundle holds by release, as restore selects, and names the rollback to the revision deployed then', async () => {
    const b = await bundleOf([
      record('calico', 1, 'superseded'),
      record('calico', 2, 'deployed'),
      record('whisker', 3, 'failed', { kind: 'ConfigMap', namespace: 'calico-system' }),
      secret('tigera-ca-private'),
      secret('sh.helm.release.v1.calico.v9'),
      record('other', 1, 'deployed', { namespace: 'kube-system' }),
    ]);
    try {
      const all = await helmRecordsLeft(b, {});
      expect(all).toEqual({
        records: 3,
        releases: [
          { namespace: 'calico-system', release: 'whisker', revisions: [3], deployed: [] },
          { namespace: 'tigera-operator', release: 'calico', revisions: [1, 2], deployed: [2] },
        ],
      });
      expect(helmRecordsLeftText(all)).toBe(
        "left 3 Helm release records of the bundle to Helm (calico-system/whisker revision 3; tigera-operator/calico revisions 1, 2, of which 2 deployed then): restore never writes Helm's records; to go back a revision: helm rollback <release> <revision> -n <namespace>",
      );
      const secrets = await helmRecordsLeft(b, { kinds: ['secrets'] });
      expect(helmRecordsLeftText(secrets)).toBe(
        "left 2 Helm release records of the bundle to Helm (tigera-operator/calico revisions 1, 2, of which 2 deployed then): restore never writes Helm's records; to return to the revision deployed then: helm rollback calico 2 -n tigera-operator",
      );
      expect((await helmRecordsLeft(b, { kinds: ['IPPool'] })).records).toBe(0);
      expect((await helmRecordsLeft(b, { only: new Set(['Secret/tigera-operator/sh.helm.release.v1.calico.v1']) })).records).toBe(1);

      const host = new RecordingIoHost();
      await reportHelmRecordsLeft(b, {}, new Reporter(host));
      expect(host.messages.map((m) => [m.code, m.data])).toEqual([['CNR_RESTORE_HELM_RECORDS', { records: 3 }]]);
      const quiet = new RecordingIoHost();
      await reportHelmRecordsLeft(b, { kinds: ['IPPool'] }, new Reporter(quiet));
      expect(quiet.messages).toEqual([]);
    } finally {
      await b.close();
    }
  });

  it('stays one short line for a bundle of many records and releases', () => {
    const releases = Array.from({ length: 12 }, (_, i) => ({ namespace: 'tigera-operator', release: `r${i}`, revisions: [1], deployed: [] as number[] }));
    releases[0] = { namespace: 'tigera-operator', release: 'calico', revisions: Array.from({ length: 40 }, (_, i) => i + 1), deployed: [40] };
    const text = helmRecordsLeftText({ records: 51, releases });
    expect(text).toBe(
      "left 51 Helm release records of the bundle to Helm (tigera-operator/calico revisions 1 to 40 (40 of them), of which 40 deployed then; tigera-operator/r1 revision 1; tigera-operator/r2 revision 1; tigera-operator/r3 revision 1; tigera-operator/r4 revision 1; tigera-operator/r5 revision 1; tigera-operator/r6 revision 1; tigera-operator/r7 revision 1; tigera-operator/r8 revision 1; tigera-operator/r9 revision 1; 2 more releases): restore never writes Helm's records; to go back a revision: helm rollback <release> <revision> -n <namespace>",
    );
  });

  it('one revision deployed then: named, with its rollback', () => {
    const text = helmRecordsLeftText({ records: 1, releases: [{ namespace: 'tigera-operator', release: 'calico', revisions: [1], deployed: [1] }] });
    expect(text).toBe(
      "left 1 Helm release record of the bundle to Helm (tigera-operator/calico revision 1, deployed then): restore never writes Helm's records; to return to the revision deployed then: helm rollback calico 1 -n tigera-operator",
    );
  });
});
