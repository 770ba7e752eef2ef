/** A CRD from the shipped Calico fixtures, by kind (unit tests only). */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { calicoFixturesDir } from '../local-cluster/paths.js';

const cache = new Map<string, KubeObject[]>();

export function fixtureCrd(version: string, kind: string): KubeObject {
  const file = path.join(calicoFixturesDir(), version, 'manifests', version.startsWith('3.30') ? 'operator-crds.yaml' : 'tigera-operator.yaml');
  if (!cache.has(file)) cache.set(file, parseManifests(readFileSync(file, 'utf8'), file).filter((o) => o.kind === 'CustomResourceDefinition'));
  const crd = cache.get(file)!.find((c) => c.spec.names.kind === kind);
  if (!crd) throw new Error(`no ${kind} CRD in ${file}`);
  return crd;
}
