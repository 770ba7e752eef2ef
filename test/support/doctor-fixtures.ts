/** A CRD from the shipped Calico releases, by kind (unit tests only). */
import { readShippedFile } from '../../src/calico/shipped.js';
import { parseManifests } from '../../src/kube/manifests.js';
import type { KubeObject } from '../../src/kube/types.js';

const cache = new Map<string, KubeObject[]>();

export function fixtureCrd(version: string, kind: string): KubeObject {
  // operator-crds.yaml holds the operator install's CRDs in every shipped release (3.26+).
  const key = `${version}/operator-crds.yaml`;
  if (!cache.has(key)) {
    const got = readShippedFile(version, 'operator-crds.yaml');
    if (!got) throw new Error(`Calico ${version} is not shipped`);
    cache.set(
      key,
      parseManifests(got.text, key).filter((o) => o.kind === 'CustomResourceDefinition'),
    );
  }
  const crd = cache.get(key)!.find((c) => c.spec.names.kind === kind);
  if (!crd) throw new Error(`no ${kind} CRD in ${key}`);
  return crd;
}
