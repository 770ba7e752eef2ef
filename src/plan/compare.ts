/**
 * Compare Calico data in the cluster with a bundle: what `apply` checks at the end (nothing lost or changed
 * apart from the planned transforms) and before the reinstall strategy deletes anything (nothing in the cluster
 * that the bundle would not bring back). A small local comparison of `spec` (and `data`) per object; the
 * full `diff` command (diffBundle in src/diff/) renders differences for people.
 */
import type { Bundle } from '../bundle/reader.js';
import { pruneUnknownFields, withoutEmptyMaps, withSchemaDefaults } from '../calico/schema.js';
import { CALICO_CRD_GROUP, IPAM_HOST_AFFINITY_PREFIX, OPERATOR_GROUP } from '../calico/knowledge.js';
import { felixFieldsSetFromInstallationBy, operatorFilledFelixFields } from '../calico/operator-generations.js';
import { POLICY_KINDS, v3PolicyName } from '../calico/policy-names.js';
import { isIpamLive } from '../restore/ipam.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { crdResourceType } from '../kube/discovery.js';
import type { KubeObject } from '../kube/types.js';
import { isManagedCrd, objRef, transformInstallation } from './findings.js';
import { RUNTIME_KINDS } from './rules.js';
import { canonicalJson } from '../util/canonical.js';
import type { InstallationTransform } from './types.js';

export interface DataDifference {
  object: string;
  problem: 'missing' | 'changed' | 'not-in-bundle';
  detail?: string;
}

const content = (o: KubeObject) => canonicalJson({ spec: o.spec ?? null, data: o.data ?? null });
/**
 * A default-tier policy is keyed by its v3 name: 3.32's kube-controllers renames every such object from
 * `default.<name>` (policy_name_migrator.go, on by default), so after an upgrade the bundle's `default.deny` is the
 * cluster's `deny` (seen on 3.31.7 -> 3.32.1 with the real programs).
 */
const key = (o: KubeObject) => `${o.apiVersion.split('/')[0]}/${o.kind}/${o.metadata.namespace ?? ''}/${v3PolicyName(o)}`;

/**
 * A policy rule's `source: {}` or `destination: {}` (an EntityRule that matches everything) is the same as none:
 * 3.32's policy name migrator re-creates each policy without them (3.31.7 -> 3.32.1 on the real programs).
 */
function withoutEmptyEntityRules(o: KubeObject): KubeObject {
  if (!POLICY_KINDS.has(o.kind) || !o.spec) return o;
  const rules = (list: unknown) =>
    Array.isArray(list)
      ? list.map((r) => {
          if (!r || typeof r !== 'object') return r;
          const out = { ...(r as Record<string, unknown>) };
          for (const side of ['source', 'destination'])
            if (out[side] && typeof out[side] === 'object' && Object.keys(out[side] as object).length === 0) delete out[side];
          return out;
        })
      : list;
  return { ...o, spec: { ...o.spec, ingress: rules(o.spec.ingress), egress: rules(o.spec.egress) } };
}

const isData = (o: KubeObject) => !RUNTIME_KINDS.has(o.kind) && [CALICO_CRD_GROUP, OPERATOR_GROUP].includes(o.apiVersion.split('/')[0]!);

function firstDifference(a: unknown, b: unknown, p = ''): string {
  if (canonicalJson(a) === canonicalJson(b)) return '';
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference((a as any)[k], (b as any)[k], p ? `${p}.${k}` : k);
      if (d) return d;
    }
  }
  return `${p || '(root)'}: bundle ${JSON.stringify(a)?.slice(0, 120)} / cluster ${JSON.stringify(b)?.slice(0, 120)}`;
}

async function liveCalicoObjects(client: KubeClient): Promise<{ objects: Map<string, KubeObject>; crds: Map<string, KubeObject> }> {
  const crds = (await client.listAll(K.crd)).filter(isManagedCrd);
  const objects = new Map<string, KubeObject>();
  for (const crd of crds) for (const o of await client.listAll(crdResourceType(crd))) if (isData(o)) objects.set(key(o), o);
  return { objects, crds: new Map(crds.map((c) => [`${c.spec.group}/${c.spec.names.kind}`, c])) };
}

/**
 * Every Calico data object of the bundle must be in the cluster with the same content, after what the cluster's
 * CRDs would prune and the planned Installation transform. IPAM is live state (pods come and go during a change):
 * handles and affinities may be gone and blocks may hold other allocations; only a lost IPAMBlock that held
 * allocations on a node that still exists is a difference (kube-controllers deletes empty blocks and a deleted
 * node's blocks; otherwise blocks go only with the CRDs, as in the incident).
 */
export async function bundleDataPresent(
  client: KubeClient,
  bundle: Bundle,
  transform: InstallationTransform,
  /** The Calico version the change installed: its operator's generation fills FelixConfiguration fields (undefined: any). */
  targetVersion?: string,
  /** The Calico version installed before the change: its operator ran until paused, after the backup too (undefined: none). */
  installedVersion?: string,
): Promise<{ checked: number; differences: DataDifference[] }> {
  const live = await liveCalicoObjects(client);
  const bundleCrds = new Map((await bundle.crds()).map((c) => [`${c.spec?.group}/${c.spec?.names?.kind}`, c]));
  const differences: DataDifference[] = [];
  let nodes: Promise<Set<string>> | undefined;
  // A block gone is no loss when it held no allocation (kube-controllers deletes empty blocks) or its node went
  // away (kube-controllers releases a deleted node's blocks: its pods went with it).
  const blockLost = async (b: KubeObject): Promise<boolean> => {
    if (!((b.spec?.allocations ?? []) as (number | null)[]).some((a) => a !== null && a !== undefined)) return false;
    const affinity: unknown = b.spec?.affinity;
    if (typeof affinity !== 'string' || !affinity.startsWith(IPAM_HOST_AFFINITY_PREFIX)) return true;
    nodes ??= client.listAll(K.node).then((ns) => new Set(ns.map((n) => n.metadata.name)));
    return (await nodes).has(affinity.slice(IPAM_HOST_AFFINITY_PREFIX.length));
  };
  let checked = 0;
  for await (const { object } of bundle.objects({ groups: [CALICO_CRD_GROUP, OPERATOR_GROUP] })) {
    if (!isData(object)) continue;
    checked++;
    const l = live.objects.get(key(object));
    if (isIpamLive(object)) {
      if (!l && object.kind === 'IPAMBlock' && (await blockLost(object)))
        differences.push({ object: objRef(object), problem: 'missing', detail: `IPAM block ${object.spec?.cidr} lost` });
      continue;
    }
    if (!l) {
      differences.push({ object: objRef(object), problem: 'missing' });
      continue;
    }
    const crd = live.crds.get(`${object.apiVersion.split('/')[0]}/${object.kind}`);
    const installation = object.kind === 'Installation' && object.metadata.name === 'default';
    let expected = crd ? pruneUnknownFields(object, crd) : object;
    if (installation) expected = transformInstallation(expected, transform);
    // Fields the bundle's own CRD lacks were invisible when the backup was taken, so they cannot differ from it:
    // an upgrade's CRDs show them again (a value pruned on read under the older schema is still stored, e.g.
    // FelixConfiguration debugPort after 3.28 -> 3.27 -> 3.28 on a manifest install) or default them (v1.36 sets
    // disableNewAllocations: false on every Installation pool entry).
    const bundleCrd = bundleCrds.get(`${object.apiVersion.split('/')[0]}/${object.kind}`);
    let seen = withoutOperatorDefaults(bundleCrd ? pruneUnknownFields(l, bundleCrd) : l, expected, targetVersion, installedVersion);
    // The planned stop can be such a field too (disableNewAllocations, new in 3.29, on a 3.28 bundle): compared on
    // the fields the bundle's CRD has, and the stop itself checked on the live object.
    const lostStop = installation ? stopNotKept(expected, l, transform) : undefined;
    if (installation && bundleCrd) expected = pruneUnknownFields(expected, bundleCrd);
    // The same value written another way is no difference: a field the live CRD defaults (the API server fills it on
    // read), an empty map and none, "5m" and "5m0s" (3.31.7 <-> 3.32.1 by Helm on the real programs failed
    // verify-data on each).
    if (crd) [expected, seen] = [withoutEmptyMaps(withSchemaDefaults(expected, crd), crd), withoutEmptyMaps(seen, crd)];
    seen = withDurationsOf(expected, seen);
    [expected, seen] = [withoutEmptyEntityRules(expected), withoutEmptyEntityRules(seen)];
    if (installation) expected = withoutUnsetEquivalents(expected, seen);
    seen = withoutKubeControllersDefaults(seen, expected);
    if (lostStop || (content(expected) !== content(seen) && !asStoppedByTarget(expected, seen, transform))) {
      differences.push({
        object: objRef(object),
        problem: 'changed',
        detail: lostStop ?? firstDifference({ spec: expected.spec, data: expected.data }, { spec: seen.spec, data: seen.data }),
      });
    }
  }
  return { checked, differences };
}

/** A Go duration as Kubernetes and Calico write it (metav1.Duration: "5m", "5m0s", "1h30m", "250ms"). */
const GO_DURATION = /^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$/;
const UNIT_NS: Readonly<Record<string, number>> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };

function durationNs(text: string): number {
  let ns = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ns += Number(m[1]) * UNIT_NS[m[2]!]!;
  return ns;
}

/**
 * `seen` with each string that is a Go duration of the same value (not text) as the string at the same place in `expected`
 * written as `expected` writes it: Go prints a parsed duration in its own form ("5m" comes back "5m0s"), so the
 * texts differ where the values do not. Only comparisons use this; nothing is written from it.
 */
export function withDurationsOf<T>(expected: unknown, seen: T): T {
  if (typeof expected === 'string' && typeof seen === 'string')
    return (expected !== seen && GO_DURATION.test(expected) && GO_DURATION.test(seen) && durationNs(expected) === durationNs(seen) ? expected : seen) as T;
  if (Array.isArray(expected) && Array.isArray(seen)) return seen.map((v, i) => withDurationsOf(expected[i], v)) as T;
  if (expected && seen && typeof expected === 'object' && typeof seen === 'object' && !Array.isArray(expected) && !Array.isArray(seen)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(seen)) out[k] = withDurationsOf((expected as Record<string, unknown>)[k], v);
    return out as T;
  }
  return seen;
}

/**
 * Installation fields whose value means what leaving them unset means to every operator generation, so a chart or
 * a user may write either: the 3.32 tigera-operator chart renders its defaults `controlPlaneTolerations: []` and
 * `nonPrivileged: Disabled` into the Installation, 3.31's renders neither (a Helm downgrade drops them). The
 * operator appends its own tolerations to the list (tigera/operator v1.40.15 pkg/render/apiserver.go:1378) and acts
 * on nonPrivileged only when it is Enabled (pkg/controller/installation/validation.go:342).
 */
const INSTALLATION_UNSET_EQUIVALENTS: Readonly<Record<string, unknown>> = { controlPlaneTolerations: [], nonPrivileged: 'Disabled' };

function withoutUnsetEquivalents(expected: KubeObject, live: KubeObject): KubeObject {
  const spec = { ...expected.spec };
  for (const [field, same] of Object.entries(INSTALLATION_UNSET_EQUIVALENTS))
    if (live.spec?.[field] === undefined && canonicalJson(spec[field]) === canonicalJson(same)) delete spec[field];
  return { ...expected, spec };
}

/**
 * KubeControllersConfiguration `default` without what kube-controllers fills where the bundle leaves it unset:
 * libcalico-go's client fills `prometheusMetricsPort: 9094` and, when the node controller is configured,
 * `controllers.node.leakGracePeriod: 15m` on every write (libcalico-go/lib/clientv3/kubecontrollersconfig.go
 * validateAndFillDefaults, v3.28.1-v3.32.1), and kube-controllers up to 3.31 writes the whole object with its status
 * (kube-controllers/pkg/config/runconfig.go, `client.Update`; 3.32 `UpdateStatus`). Seen after a 3.32.1 -> 3.31.7
 * downgrade on the real programs. A value the bundle sets is still compared.
 */
function withoutKubeControllersDefaults(live: KubeObject, expected: KubeObject): KubeObject {
  if (live.kind !== 'KubeControllersConfiguration' || live.metadata.name !== 'default' || !live.spec) return live;
  const spec = structuredClone(live.spec);
  if (expected.spec?.prometheusMetricsPort === undefined && spec.prometheusMetricsPort === 9094) delete spec.prometheusMetricsPort;
  const node = spec.controllers?.node;
  const leak = node?.leakGracePeriod;
  if (expected.spec?.controllers?.node?.leakGracePeriod === undefined && typeof leak === 'string' && GO_DURATION.test(leak) && durationNs(leak) === 15 * 60e9)
    delete node.leakGracePeriod;
  return { ...live, spec };
}

/** The first Installation pool entry whose planned stop (transform.stopAllocations) the cluster does not have. */
function stopNotKept(expected: KubeObject, live: KubeObject, transform: InstallationTransform): string | undefined {
  const stop = transform.stopAllocations;
  if (!stop) return undefined;
  const planned = new Set<string>((expected.spec?.calicoNetwork?.ipPools ?? []).map((p: any) => String(p.cidr)));
  for (const cidr of stop.cidrs.filter((c) => planned.has(c))) {
    const entry = (live.spec?.calicoNetwork?.ipPools ?? []).find((p: any) => String(p.cidr) === cidr);
    if (canonicalJson(entry?.[stop.field]) !== canonicalJson(stop.value)) {
      return `ipPools ${cidr}: ${stop.field} ${JSON.stringify(stop.value)} planned, cluster ${JSON.stringify(entry?.[stop.field])}`;
    }
  }
  return undefined;
}

/**
 * An IPPool whose Installation entry the plan stopped in the target operator's terms (transform.stopAllocations:
 * 3.28's nodeSelector "!all()") is rewritten by that operator from the entry: the stop set on the pool and no
 * `disabled` (v1.34's pool type has none). That is the planned change, not a difference; until the operator gets to
 * it the pool is as in the bundle. A stop the pool type has no field for (disableNewAllocations: the operator writes
 * `disabled: true`, as the bundle has it) leaves nothing else to accept.
 */
function asStoppedByTarget(expected: KubeObject, seen: KubeObject, transform: InstallationTransform): boolean {
  const stop = transform.stopAllocations;
  if (expected.kind !== 'IPPool' || !stop || stop.field !== 'nodeSelector' || !stop.cidrs.includes(String(expected.spec?.cidr))) return false;
  const { disabled: _d, ...spec } = expected.spec ?? {};
  return content({ ...expected, spec: { ...spec, [stop.field]: stop.value } }) === content(seen);
}

/**
 * The live object without what the operators of the change wrote on their own where the bundle's object leaves it
 * unset, and anything in the Installation's spec. FelixConfiguration `default`: the fields the operator of the
 * installed version (`installedVersion`, which ran until paused, also after the backup: v1.40 fills vxlanPort, or
 * policySyncPathPrefix once a GatewayAPI exists) or of the target (`calicoVersion`; v1.40 adds vxlanPort: 4789 to
 * a cluster upgraded from 3.30) fills, and the live value of a field the target's operator sets from the
 * Installation over the bundle's (nftablesMode: v1.40 Enabled, v1.42 Auto, for the same nftables dataplane). A
 * field only filled where unset that the bundle sets is still compared: no operator changes it. The operator writes
 * its defaults back into the Installation, and only where a field is unset (tigera/operator core_controller.go
 * fillDefaults: e.g. v1.34.3 adds `calicoNetwork.nodeAddressAutodetectionV6` once any IPv6 pool exists, and
 * `linuxPolicySetupTimeoutSeconds`, new in 3.28); a field the bundle sets is still compared.
 */
export function withoutOperatorDefaults(live: KubeObject, expected: KubeObject, calicoVersion: string | undefined, installedVersion?: string): KubeObject {
  if (live.kind === 'Installation' && live.metadata.name === 'default' && live.spec)
    return { ...live, spec: onlySetIn(live.spec, expected.spec ?? {}) as Record<string, unknown> };
  const filled = new Set(operatorFilledFelixFields(expected, live, calicoVersion));
  if (installedVersion) for (const f of operatorFilledFelixFields(expected, live, installedVersion)) filled.add(f);
  const fromInstallation = live.kind === 'FelixConfiguration' && live.metadata.name === 'default' ? felixFieldsSetFromInstallationBy(calicoVersion) : [];
  const overwritten = fromInstallation.filter((f) => expected.spec?.[f] !== undefined && live.spec?.[f] !== undefined);
  if (!filled.size && !overwritten.length) return live;
  const spec = { ...live.spec };
  for (const f of filled) delete spec[f];
  for (const f of overwritten) spec[f] = expected.spec![f];
  return { ...live, spec };
}

/** `live` without what `expected` leaves unset, through objects and through arrays of the same length (pool entries). */
function onlySetIn(live: unknown, expected: unknown): unknown {
  if (Array.isArray(live) && Array.isArray(expected) && live.length === expected.length) return live.map((v, i) => onlySetIn(v, expected[i]));
  if (!live || !expected || typeof live !== 'object' || typeof expected !== 'object' || Array.isArray(live) || Array.isArray(expected)) return live;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(live))
    if ((expected as Record<string, unknown>)[k] !== undefined) out[k] = onlySetIn(v, (expected as Record<string, unknown>)[k]);
  return out;
}

/** Calico data in the cluster that the bundle does not hold or holds differently (it would be lost by a delete-and-restore). */
export async function liveDataNotInBundle(client: KubeClient, bundle: Bundle): Promise<DataDifference[]> {
  const live = await liveCalicoObjects(client);
  const inBundle = new Map<string, KubeObject>();
  for await (const { object } of bundle.objects({ groups: [CALICO_CRD_GROUP, OPERATOR_GROUP] })) if (isData(object)) inBundle.set(key(object), object);
  const out: DataDifference[] = [];
  for (const [k, o] of live.objects) {
    const b = inBundle.get(k);
    if (!b) out.push({ object: objRef(o), problem: 'not-in-bundle' });
    else if (content(b) !== content(o))
      out.push({ object: objRef(o), problem: 'changed', detail: firstDifference({ spec: b.spec, data: b.data }, { spec: o.spec, data: o.data }) });
  }
  return out;
}
