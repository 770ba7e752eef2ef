/** Helpers for the plan/apply/wrap e2e tests: put Calico 3.28.1 back exactly, and a comparable snapshot of Calico state. */
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import { waitCrdsEstablished } from '../../src/kube/manifests.js';
import { ResourceResolver } from '../../src/kube/resolver.js';
import type { KubeObject } from '../../src/kube/types.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { expect } from 'vitest';
import { checkAgainstSchema } from '../../src/calico/schema.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import { Journal, journalPathFor, type JournalState } from '../../src/apply/journal.js';
import { fixtureObjects, runCli } from './helpers.js';
import type { Population } from './population.js';

/** The Installation as the 3.28 operator leaves it: `name` and `allowedUses` written into its pool. */
export const INSTALLATION_328: KubeObject = {
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: {
    calicoNetwork: {
      ipPools: [
        {
          name: 'default-ipv4-ippool',
          blockSize: 26,
          cidr: '192.168.0.0/16',
          encapsulation: 'VXLANCrossSubnet',
          natOutgoing: 'Enabled',
          nodeSelector: 'all()',
          allowedUses: ['Workload', 'Tunnel'],
        },
      ],
    },
  },
};

/**
 * Install (or put back, after a downgrade) Calico 3.28.1's operator manifests exactly: objects are created or
 * replaced whole, so no 3.27 schema field survives; then the Installation as 3.28 leaves it, operator at 1 replica.
 */
export async function installCalico328(client: KubeClient): Promise<void> {
  await installCalicoExactly(client, '3.28.1', INSTALLATION_328, 'quay.io/tigera/operator:v1.34.3');
}

/** The Installation of 3.27.4's custom-resources.yaml (what a 3.27 cluster has: no pool name, no allowedUses). */
export const INSTALLATION_327: KubeObject = {
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: {
    calicoNetwork: { ipPools: [{ blockSize: 26, cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet', natOutgoing: 'Enabled', nodeSelector: 'all()' }] },
  },
};

export async function installCalicoExactly(client: KubeClient, version: string, installation: KubeObject, operatorImage: string): Promise<void> {
  const objs = fixtureObjects(version, 'tigera-operator.yaml');
  const resolver = new ResourceResolver(client);
  const put = async (type: any, o: KubeObject) => {
    const live = await client.getOrUndefined(type, o.metadata.namespace, o.metadata.name);
    if (!live) await client.create(type, o);
    else if (o.kind !== 'Namespace') await client.replace(type, { ...o, metadata: { ...o.metadata, resourceVersion: live.metadata.resourceVersion } });
  };
  const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
  for (const c of crds) await put(K.crd, c);
  await waitCrdsEstablished(
    client,
    crds.map((c) => c.metadata.name),
  );
  for (const o of objs.filter((x) => x.kind !== 'CustomResourceDefinition')) await put(await resolver.forObject(o), o);
  const instType = crdResourceType(crds.find((c) => c.metadata.name === 'installations.operator.tigera.io')!);
  const live = await client.getOrUndefined(instType, undefined, 'default');
  if (live) await client.replace(instType, { ...installation, metadata: { ...installation.metadata, resourceVersion: live.metadata.resourceVersion } });
  else await client.create(instType, installation);
  const apiType = crdResourceType(crds.find((c) => c.metadata.name === 'apiservers.operator.tigera.io')!);
  if (!(await client.getOrUndefined(apiType, undefined, 'default')))
    await client.create(apiType, { apiVersion: 'operator.tigera.io/v1', kind: 'APIServer', metadata: { name: 'default' }, spec: {} });
  await client.waitFor(
    `tigera-operator ${version} available`,
    async () => {
      const d = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
      return d.spec.template.spec.containers[0].image === operatorImage &&
        d.status?.availableReplicas === 1 &&
        d.status?.updatedReplicas === 1 &&
        (d.status?.replicas ?? 0) === 1 &&
        (d.status?.observedGeneration ?? 0) >= (d.metadata.generation ?? 0)
        ? true
        : undefined;
    },
    { timeoutMs: 120_000 },
  );
}

export interface CalicoSnapshot {
  /** CRD name -> canonical schemas of its versions. */
  crds: Record<string, string>;
  /** `Kind/namespace/name` -> canonical {spec, labels} of every Calico object except runtime state. */
  data: Record<string, string>;
  operator: { image?: string; replicas?: number };
}

const RUNTIME = new Set(['TigeraStatus', 'ClusterInformation', 'CalicoNodeStatus']);

/**
 * An object's v3 labels as Calico 3.28+ reads them (libcalico-go ConvertK8sResourceToCalicoResource: the object's
 * own labels, then the metadata annotation's over them), or null. Where they are stored depends on which API server
 * wrote last: 3.27.4's keeps them on the object, 3.28's in the annotation (a v1.34 operator writing through a 3.27.4
 * API server that still runs moves them), so two runs that end alike may store them in different places.
 */
function v3Labels(o: KubeObject): Record<string, string> | null {
  let inAnnotation: Record<string, string> = {};
  try {
    inAnnotation = JSON.parse(o.metadata.annotations?.['projectcalico.org/metadata'] ?? '{}').labels ?? {};
  } catch {
    // Unreadable: the object's own labels only.
  }
  const all = { ...(o.metadata.labels ?? {}), ...inAnnotation };
  return Object.keys(all).length ? all : null;
}

export async function calicoSnapshot(client: KubeClient): Promise<CalicoSnapshot> {
  const crds = (await client.listAll(K.crd)).filter((c) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(c.spec.group));
  const snap: CalicoSnapshot = { crds: {}, data: {}, operator: {} };
  for (const c of crds) {
    snap.crds[c.metadata.name] = canonicalJson(c.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema })));
    if (RUNTIME.has(c.spec.names.kind)) continue;
    for (const o of await client.listAll(crdResourceType(c))) {
      snap.data[`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`] = canonicalJson({ spec: o.spec ?? null, labels: v3Labels(o) });
    }
  }
  const d = await client.getOrUndefined(K.deployment, 'tigera-operator', 'tigera-operator');
  snap.operator = { image: d?.spec?.template?.spec?.containers?.[0]?.image, replicas: d?.spec?.replicas };
  return snap;
}

/** Where two snapshots differ, one line a key (`section key: got ... want ...`): a failure names what, not just that. */
export function snapshotDifferences(got: CalicoSnapshot, want: CalicoSnapshot): string[] {
  const out: string[] = [];
  for (const section of ['crds', 'data', 'operator'] as const) {
    const g = got[section] as Record<string, unknown>;
    const w = want[section] as Record<string, unknown>;
    for (const k of [...new Set([...Object.keys(g), ...Object.keys(w)])].sort())
      if (JSON.stringify(g[k]) !== JSON.stringify(w[k]))
        out.push(`${section} ${k}: got ${JSON.stringify(g[k]) ?? 'nothing'} want ${JSON.stringify(w[k]) ?? 'nothing'}`);
  }
  return out;
}

/**
 * What the fault-free 3.28.1 -> 3.27.4 downgrade ends with, checked independently of the tool: exactly the 3.27.4
 * CRD schemas, operator v1.32.10 at 1 replica, every population object unchanged, an Installation valid for 3.27
 * under strict validation, the apply lock given back.
 */
export async function expectDowngradedTo327(client: KubeClient, population: Population, before: CalicoSnapshot): Promise<CalicoSnapshot> {
  const want = fixtureObjects('3.27.4', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition');
  for (const crd of want) {
    const live = await client.get(K.crd, undefined, crd.metadata.name);
    expect(canonicalJson(live.spec.versions.map((v: any) => v.schema)), crd.metadata.name).toBe(canonicalJson(crd.spec.versions.map((v: any) => v.schema)));
  }
  const dep = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
  expect(dep.spec.template.spec.containers[0].image).toBe('quay.io/tigera/operator:v1.32.10');
  expect(dep.spec.replicas).toBe(1);
  const after = await calicoSnapshot(client);
  for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
    const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    expect(after.data[k], k).toBeDefined();
    expect(after.data[k], k).toBe(before.data[k]);
  }
  expect(Object.keys(after.data).sort()).toEqual(Object.keys(before.data).sort());
  const instCrd = want.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
  const inst = await client.get(crdResourceType(instCrd), undefined, 'default');
  const { status: _s, ...noStatus } = inst;
  expect(checkAgainstSchema(noStatus as KubeObject, instCrd)).toEqual([]);
  await client.replace(crdResourceType(instCrd), inst, { dryRun: true, fieldValidation: 'Strict' });
  // The lock was given back.
  expect((await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME)).spec.holderIdentity).toBeUndefined();
  return after;
}

/**
 * Apply `plan` killed (SIGKILL, the test hook) right after each step in turn, resuming each time, then resume to the
 * end: every kill leaves the journal with exactly k steps finished; the last run skips them all but the last; each
 * step started exactly once across all runs. `afterKill(k, journal)` checks the state between runs; `firstRunArgs`
 * are added to the first run only (e.g. `--break-lock`).
 */
export async function applyKilledAtEachStep(
  plan: string,
  bundle: string,
  out: { id: string; steps: { id: string }[] },
  afterKill?: (k: number, st: JournalState) => Promise<void>,
  firstRunArgs: string[] = [],
): Promise<void> {
  const n = out.steps.length;
  const journal = journalPathFor(bundle, out.id);
  for (let k = 1; k < n; k++) {
    const r = await runCli(['apply', plan, '--yes', ...(k > 1 ? ['--resume'] : firstRunArgs)], { env: { CNI_REWIND_TEST_KILL_AFTER_STEP: String(k) } });
    expect(r.code, `run ${k}: ${r.stderr}`).not.toBe(0);
    const st = Journal.read(journal);
    expect(st.finished.size, `journal after the kill at step ${k}`).toBe(k);
    expect(st.done).toBe(false);
    await afterKill?.(k, st);
  }
  const last = await runCli(['apply', plan, '--yes', '--resume', '-o', 'json']);
  expect(last.code, last.stderr).toBe(0);
  const res = JSON.parse(last.stdout);
  expect(res.steps.filter((s: any) => s.status === 'skipped')).toHaveLength(n - 1);
  expect(res.steps[n - 1].status).toBe('done');
  const starts = Journal.read(journal)
    .records.filter((r) => r.event === 'step-start')
    .map((r: any) => r.step);
  expect(starts).toEqual(out.steps.map((s) => s.id));
}
