/** What `diff` reports, shared by the Kubernetes datastore's comparison (diff.ts) and the etcd datastore's (etcd-diff.ts). */
import { dumpYaml } from '../bundle/writer.js';
import { stripServerFields } from '../kube/normalize.js';
import type { KubeObject } from '../kube/types.js';
import { sortKeys } from '../util/canonical.js';

export interface Ref {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

export interface DiffResult {
  onlyInBundle: Ref[];
  onlyInCluster: Ref[];
  changed: { ref: Ref; diff: string }[];
  /**
   * Objects of one kind that the bundle has at one place and the cluster at another: the same content under
   * another namespace/name, or the same name in another namespace (`diff` then holds the content change too).
   */
  moved: { from: Ref; to: Ref; diff?: string }[];
  /** Objects compared and found equal. */
  same: number;
  /** Resource types compared (`<plural>.<group>`). */
  compared: string[];
}

/** YAML as compared: server fields gone, keys sorted so field order never shows as a change. */
export function normalizedYaml(o: KubeObject): string {
  return dumpYaml(sortKeys(stripServerFields(o, { ownerUids: true, v3MetadataServerFields: true })));
}
