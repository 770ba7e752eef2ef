import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { HelmRecordsLeftOut } from './helm-records.js';

const record = (release: string, revision: number, status: string, namespace = 'tigera-operator', kind = 'Secret'): KubeObject =>
  ({
    apiVersion: 'v1',
    kind,
    metadata: { name: `sh.helm.release.v1.${release}.v${revision}`, namespace, labels: { owner: 'helm', name: release, status, version: String(revision) } },
    ...(kind === 'Secret' ? { type: 'helm.sh/release.v1' } : {}),
  }) as KubeObject;

describe('Helm release records at export', () => {
  it('leaves out each record and notes, per release, the revision deployed at export', () => {
    const out = new HelmRecordsLeftOut();
    const taken = [
      record('calico', 1, 'superseded'),
      record('calico', 2, 'deployed'),
      record('calico', 3, 'failed'),
      record('whisker', 1, 'pending-install', 'calico-system', 'ConfigMap'),
    ].map((o) => out.take(o));
    expect(taken).toEqual([true, true, true, true]);
    expect(out.notes()).toEqual([
      "Helm release calico-system/whisker: no revision deployed at export; its 1 release record(s) left out (Helm's own history, holding the release's values; restore leaves releases to Helm, helm rollback goes back a revision)",
      "Helm release tigera-operator/calico: revision 2 deployed at export; its 3 release record(s) left out (Helm's own history, holding the release's values; restore leaves releases to Helm, helm rollback goes back a revision)",
    ]);
  });

  it('says so when Helm’s records mark two revisions deployed (Helm reads the newest)', () => {
    const out = new HelmRecordsLeftOut();
    out.take(record('calico', 2, 'deployed'));
    out.take(record('calico', 1, 'deployed'));
    expect(out.notes()[0]).toMatch(
      /^Helm release tigera-operator\/calico: revisions 1, 2 all marked deployed at export \(Helm reads the newest\); its 2 release record\(s\) left out/,
    );
  });

  it('keeps every other Secret and ConfigMap, those with only part of Helm’s marks too, and notes nothing', () => {
    const out = new HelmRecordsLeftOut();
    const kept: KubeObject[] = [
      { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'tigera-ca-private', namespace: 'tigera-operator' } } as KubeObject,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'calico-config', namespace: 'tigera-operator', labels: { owner: 'helm' } } },
      { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: { name: 'sh.helm.release.v1.calico.v1', namespace: 'tigera-operator' } } as KubeObject,
    ];
    expect(kept.map((o) => out.take(o))).toEqual([false, false, false]);
    expect(out.notes()).toEqual([]);
  });
});
