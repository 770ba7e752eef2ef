/**
 * The CRDs of the shipped Calico releases as the yardstick for a CRD from anywhere else (a bundle). Restore creates
 * a missing Calico CRD from the bundle; what a CRD says besides its schema decides what the API server does with
 * the kind: a conversion webhook makes it send every object of the kind, on every read and write, to a URL the
 * bundle chose. So that part must be a shipped release's, whoever wrote the bundle.
 */
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';
import { readShippedFile, shippedReleases } from './shipped.js';

type Contract = Record<string, string>;

/**
 * What of a CRD is not its schema, field by field (canonical JSON each): group, scope, names, the versions
 * served and stored, and conversion, with the API server's default (strategy None) filled in as a live export has it.
 */
export function crdContract(crd: KubeObject): Contract {
  const s = (crd as { spec?: any }).spec ?? {};
  return {
    'spec.group': canonicalJson(s.group),
    'spec.scope': canonicalJson(s.scope),
    'spec.names': canonicalJson({ kind: s.names?.kind, plural: s.names?.plural }),
    'spec.versions': canonicalJson((s.versions ?? []).map((v: any) => ({ name: v?.name, served: v?.served, storage: v?.storage }))),
    'spec.conversion': canonicalJson(s.conversion ?? { strategy: 'None' }),
  };
}

const differing = (a: Contract, b: Contract) => Object.keys(a).filter((k) => a[k] !== b[k]);

/** CRD name -> the contracts of that CRD in one release (every file of it that holds CRDs), parsed once. */
const byRelease = new Map<string, Map<string, Contract[]>>();
function releaseContracts(version: string): Map<string, Contract[]> {
  let out = byRelease.get(version);
  if (out) return out;
  out = new Map();
  const release = shippedReleases().find((r) => r.version === version)!;
  for (const [file, count] of Object.entries(release.crds)) {
    if (!count) continue;
    const got = readShippedFile(version, file);
    for (const o of got ? parseManifests(got.text, got.path) : []) {
      if (o.kind !== 'CustomResourceDefinition') continue;
      const list = out.get(o.metadata.name) ?? [];
      list.push(crdContract(o));
      out.set(o.metadata.name, list);
    }
  }
  byRelease.set(version, out);
  return out;
}

/**
 * Why a CRD must not be created as it is, or undefined when its non-schema part is that of a shipped release.
 * A CRD no shipped release has (a newer Calico) is accepted only without a conversion webhook. `likelyVersion` (the
 * bundle's Calico version) is only where the search starts: every shipped release is trusted alike.
 */
export function crdRefusal(crd: KubeObject, likelyVersion?: string): string | undefined {
  const mine = crdContract(crd);
  const versions = shippedReleases().map((r) => r.version);
  const bare = likelyVersion?.replace(/^v/, '');
  if (bare && versions.includes(bare)) versions.unshift(...versions.splice(versions.indexOf(bare), 1));
  let closest: string[] | undefined;
  for (const v of versions) {
    for (const shipped of releaseContracts(v).get(crd.metadata.name) ?? []) {
      const diff = differing(mine, shipped);
      if (!diff.length) return undefined;
      if (!closest || diff.length < closest.length) closest = diff;
    }
  }
  if (closest) return `its ${closest.join(', ')} ${closest.length === 1 ? 'differs' : 'differ'} from every shipped Calico release's definition of it`;
  const conversion = JSON.parse(mine['spec.conversion']!) as { strategy?: string };
  return conversion.strategy === 'None' ? undefined : `no shipped Calico release has it, and it names a conversion (${conversion.strategy})`;
}
