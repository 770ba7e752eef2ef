/**
 * The bundle: what `export`/`backup` write and every other command reads. A directory (or the same tree
 * in a .tar.gz):
 *
 *   manifest.json                                  BundleManifest below (the only file without a checksum)
 *   crds/<crd-name>.yaml                           CustomResourceDefinitions in force at export time
 *   resources/<group>/<Kind>/<namespace|_cluster>/<name>.yaml   one file per custom object, or (format 2)
 *   resources/<group>/<Kind>.jsonl                 every object of a kind larger than one list page, one JSON per line
 *   v3/<Kind>/<namespace|_cluster>/<name>.yaml     projectcalico.org/v3 view, when the Calico API server answers
 *   v3/<Kind>.jsonl                                (format 2) the same, packed, for a kind larger than one page
 *   config/<namespace>/<Kind>/<name>.yaml          ConfigMaps, Secrets (0600), operator Deployment, calico-node DaemonSet
 *   nodes/<node>.yaml                              the node's projectcalico.org/* annotations (and providerID)
 *   etcd/ipam.jsonl                                (etcd datastore, format 2.1) IPAM blocks, handles, affinities, config:
 *                                                  one EtcdRecord per key; its v3 resources are in v3/<Kind>.jsonl
 *
 * See docs/bundle-format.md for the full description. Change BUNDLE_FORMAT_VERSION (format.ts) with any
 * incompatible change: the major tells readers whether they can trust the layout.
 */
import type { InstallType } from '../calico/detect.js';
import type { KubeObject } from '../kube/types.js';
import type { SkippedDisk, SnapshotRecord } from '../provider-kit/types.js';

export interface ResourceTypeEntry {
  /** `<plural>.<group>` */
  key: string;
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  count: number;
}

export interface FileEntry {
  sha256: string;
  size: number;
  /** Holds Secret material (mode 0600; encrypted when the bundle was written with --encrypt). */
  secret?: boolean;
  encrypted?: boolean;
  /** Format 2 packed file (`.jsonl`): the number of objects it holds, one JSON object per line. */
  objects?: number;
}

export interface BundleManifest {
  formatVersion: string;
  /** Unique id: `<cluster-name>-<UTC timestamp>`; also tagged on every disk snapshot. */
  id: string;
  createdAt: string;
  tool: { name: 'cni-rewind'; version: string };
  cluster: {
    /** UID of the kube-system namespace: the cluster's identity. */
    uid: string;
    name: string;
    server: string;
    kubernetesVersion: string;
  };
  calico: { installType: InstallType; version?: string; operatorImage?: string; calicoNodeImage?: string };
  /**
   * (format 2.1) Set when Calico kept its data in etcd: the bundle's Calico state was read from etcd at `revision`
   * (v3 resources in v3/, IPAM in etcd/ipam.jsonl, no CRDs or resources/). Absent: the Kubernetes datastore.
   */
  datastore?: { type: 'etcd'; revision: string };
  /** Objects per resource, keyed `<plural>.<group>` (e.g. `ippools.crd.projectcalico.org`). */
  counts: Record<string, number>;
  resources: ResourceTypeEntry[];
  /** Every file except manifest.json, by path relative to the bundle root. */
  files: Record<string, FileEntry>;
  /** Things the export chose to skip or could not read, in words. */
  notes: string[];
  secretsExcluded: boolean;
  /**
   * Set when Secret files are encrypted. `kdf: scrypt`: the key is derived from a passphrase with `salt` (base64)
   * and `scrypt` parameters. `mac` (format 1.1): HMAC-SHA256 of the manifest, see crypto.ts.
   */
  encryption?: { algorithm: 'aes-256-gcm'; kdf: 'scrypt' | 'raw'; salt?: string; scrypt?: { N: number; r: number; p: number }; mac?: string };
  /** Disk snapshots taken by `backup`, one record per disk. */
  snapshots: SnapshotRecord[];
  /** Disks attached to the nodes that `backup` did not snapshot (PersistentVolumes, without --include-volumes). */
  skippedDisks?: SkippedDisk[];
  /** Set when a backup's snapshots are all usable; export-only bundles have no snapshots and are complete. */
  complete: boolean;
}

/** One object read from a bundle, with the file it came from. */
export interface BundleObject {
  path: string;
  object: KubeObject;
  /** Set (lenient reads only) when the object's group, kind, namespace or name say another path than its own. */
  problem?: string;
}
