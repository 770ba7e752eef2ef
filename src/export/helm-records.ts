/**
 * Helm's release records are left out of a bundle: they are Helm's history of a release (restore never writes
 * them back, src/restore/admission.ts isLeftToHelm) and each holds the release's full values, which may carry
 * credentials. What the bundle keeps of them is a note per release: which revision was deployed at export.
 */
import { helmRecordMarks, helmRecordName } from '../calico/helm-release.js';
import type { KubeObject } from '../kube/types.js';

export class HelmRecordsLeftOut {
  private readonly byRelease = new Map<string, { records: number; deployed: number[] }>();

  /** True (and counted) when `o` is a Helm release record, which export leaves out. */
  take(o: KubeObject): boolean {
    if (helmRecordMarks(o) !== 'record') return false;
    const name = helmRecordName(o.metadata.name);
    const key = `${o.metadata.namespace}/${name?.release ?? '?'}`;
    const r = this.byRelease.get(key) ?? { records: 0, deployed: [] };
    this.byRelease.set(key, r);
    r.records++;
    // Helm keeps the status label in step with the record (pkg/storage/driver newSecretsObject sets it on every write).
    if (name && o.metadata.labels?.status === 'deployed') r.deployed.push(name.revision);
    return true;
  }

  /** One note per release, for the manifest: the revision deployed at export, and that its records were left out. */
  notes(): string[] {
    return [...this.byRelease.keys()].sort().map((key) => {
      const { records, deployed } = this.byRelease.get(key)!;
      deployed.sort((a, b) => a - b);
      const at = !deployed.length
        ? 'no revision deployed at export'
        : deployed.length === 1
          ? `revision ${deployed[0]} deployed at export`
          : `revisions ${deployed.join(', ')} all marked deployed at export (Helm reads the newest)`;
      return `Helm release ${key}: ${at}; its ${records} release record(s) left out (Helm's own history, holding the release's values; restore leaves releases to Helm, helm rollback goes back a revision)`;
    });
  }
}
