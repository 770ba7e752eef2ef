/**
 * Helm's release records in a bundle (exports before they were left out took them with the tigera-operator
 * namespace's Secrets or ConfigMaps): planning never restores them (admission.ts isLeftToHelm); this counts them
 * for the one line that tells the user so, and which revision was deployed when the bundle was written.
 */
import { helmRecordName } from '../calico/helm-release.js';
import type { Reporter } from '../io/host.js';
import { objRef, type KubeObject } from '../kube/types.js';
import { isLeftToHelm } from './admission.js';
import type { RestoreOptions, RestoreSource } from './types.js';

/** One release's records in the bundle: the revisions it holds and those marked deployed then (Helm's status label). */
export interface HelmReleaseInBundle {
  namespace: string;
  /** Undefined for a record whose name does not give one (not a name Helm writes). */
  release?: string;
  revisions: number[];
  deployed: number[];
}

export interface HelmRecordsLeft {
  records: number;
  releases: HelmReleaseInBundle[];
}

/** As planning selects (`--kinds` by kind or plural, apply's `only` by objRef), so the count is of what the run would have written. */
function selected(o: KubeObject, opts: Pick<RestoreOptions, 'kinds' | 'only'>): boolean {
  const k = o.kind.toLowerCase();
  if (opts.kinds?.length && !opts.kinds.some((w) => [k, `${k}s`].includes(w.toLowerCase()))) return false;
  return !opts.only || opts.only.has(objRef(o));
}

/** The bundle's Helm release records that restore leaves to Helm, by release. */
export async function helmRecordsLeft(bundle: RestoreSource, opts: Pick<RestoreOptions, 'kinds' | 'only'>): Promise<HelmRecordsLeft> {
  const byRelease = new Map<string, HelmReleaseInBundle>();
  let records = 0;
  for await (const bo of bundle.configObjects({ lenient: true })) {
    if (!isLeftToHelm(bo) || !selected(bo.object, opts)) continue;
    records++;
    const namespace = bo.object.metadata.namespace!;
    const name = helmRecordName(bo.object.metadata.name);
    const key = `${namespace}/${name?.release ?? ''}`;
    const r = byRelease.get(key) ?? { namespace, ...(name ? { release: name.release } : {}), revisions: [], deployed: [] };
    byRelease.set(key, r);
    if (!name) continue;
    r.revisions.push(name.revision);
    if (bo.object.metadata.labels?.status === 'deployed') r.deployed.push(name.revision);
  }
  const releases = [...byRelease.keys()].sort().map((k) => byRelease.get(k)!);
  for (const r of releases) {
    r.revisions.sort((a, b) => a - b);
    r.deployed.sort((a, b) => a - b);
  }
  return { records, releases };
}

/** Revisions and releases named at most (Helm keeps 10 revisions by default): the line stays one line for any bundle. */
const MAX_LISTED = 10;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function describeRelease(r: HelmReleaseInBundle): string {
  const name = `${r.namespace}/${r.release ?? '(a record name Helm does not write)'}`;
  if (!r.revisions.length) return name;
  const list = (ns: number[]) => (ns.length > MAX_LISTED ? `${ns[0]} to ${ns[ns.length - 1]} (${ns.length} of them)` : ns.join(', '));
  const revisions = `${r.revisions.length === 1 ? 'revision' : 'revisions'} ${list(r.revisions)}`;
  const deployed = !r.deployed.length ? '' : r.revisions.length === 1 ? ', deployed then' : `, of which ${list(r.deployed)} deployed then`;
  return `${name} ${revisions}${deployed}`;
}

/** The one line: how many records were left, of which releases, and how to go back a revision with Helm itself. */
export function helmRecordsLeftText(left: HelmRecordsLeft): string {
  const one = left.releases.length === 1 ? left.releases[0]! : undefined;
  const back =
    one?.release && one.deployed.length === 1
      ? `to return to the revision deployed then: helm rollback ${one.release} ${one.deployed[0]} -n ${one.namespace}`
      : 'to go back a revision: helm rollback <release> <revision> -n <namespace>';
  const named = left.releases.slice(0, MAX_LISTED).map(describeRelease);
  if (left.releases.length > MAX_LISTED) named.push(`${left.releases.length - MAX_LISTED} more releases`);
  return `left ${plural(left.records, 'Helm release record')} of the bundle to Helm (${named.join('; ')}): restore never writes Helm's records; ${back}`;
}

/** Count the bundle's Helm release records and say, once, that they were left to Helm (nothing when it has none). */
export async function reportHelmRecordsLeft(bundle: RestoreSource, opts: Pick<RestoreOptions, 'kinds' | 'only'>, reporter: Reporter): Promise<HelmRecordsLeft> {
  const left = await helmRecordsLeft(bundle, opts);
  if (left.records) reporter.info('CNR_RESTORE_HELM_RECORDS', helmRecordsLeftText(left), { records: left.records });
  return left;
}
