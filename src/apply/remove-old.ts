/**
 * The reinstall's delete step: everything of the old version goes (operator resources, operator Deployment and RBAC,
 * every Calico CRD with its objects), once the bundle is proven to bring it all back.
 */
import type { Bundle } from '../bundle/reader.js';
import { verifyBundle } from '../bundle/verify.js';
import { CALICO_CRD_GROUP } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { crdResourceType } from '../kube/discovery.js';
import { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject } from '../kube/types.js';
import { liveDataNotInBundle } from '../plan/compare.js';
import { isManagedCrd } from '../plan/findings.js';
import { lockDatastore } from '../restore/guards.js';
import { pool } from '../util/pool.js';

const CLUSTER_INFORMATION_TYPE = { group: CALICO_CRD_GROUP, version: 'v1', plural: 'clusterinformations', kind: 'ClusterInformation', namespaced: false };

/** The remove-old step of a reinstall plan (see plan/steps.ts). */
export async function removeOld(client: KubeClient, bundle: Bundle, target: Release, reporter: Reporter): Promise<string> {
  // Under the datastore lock from the check that the bundle holds all live data until the CRDs (ClusterInformation
  // with them) are gone: the CNI plugin and calico-node allocate nothing the bundle lacks meanwhile (refused ADDs
  // are retried by the kubelet once the target is installed and restored).
  const lock = await lockDatastore(client, CLUSTER_INFORMATION_TYPE, reporter);
  let gone = false;
  try {
    const summary = await removeLocked(client, bundle, target, reporter);
    gone = true;
    return summary;
  } finally {
    if (lock && !gone) await lock.release();
  }
}

async function removeLocked(client: KubeClient, bundle: Bundle, target: Release, reporter: Reporter): Promise<string> {
  // The delete step of the users' procedure, made safe: the bundle verifies and holds everything we delete.
  const v = await verifyBundle(bundle);
  if (!v.ok)
    throw new RefusedError(
      `the bundle fails verify, nothing deleted: ${v.problems
        .slice(0, 3)
        .map((p) => `${p.file}: ${p.problem}`)
        .join('; ')}`,
    );
  const extra = await liveDataNotInBundle(client, bundle);
  if (extra.length > 0) {
    throw new RefusedError(
      `the cluster holds Calico data the bundle would not bring back (${extra.length}: ${extra
        .slice(0, 5)
        .map((d) => `${d.object} ${d.problem}`)
        .join(', ')}); nothing deleted`,
      {
        hint: 'take a new backup and make a new plan',
      },
    );
  }
  const crds = (await client.listAll(K.crd)).filter(isManagedCrd);
  const orphaned = await deleteOperatorResources(client, crds, reporter);
  const resolver = new ResourceResolver(client);
  let operatorObjects = 0;
  for (const o of target.operatorObjects) {
    if (o.kind === 'Namespace') continue; // kept: it holds configuration the operator reads
    const type = await resolver.forObject(o);
    if (type && (await client.delete(type, o.metadata.namespace, o.metadata.name, { propagationPolicy: 'Background' }))) operatorObjects++;
  }
  await pool(crds, 8, async (c) => {
    await client.delete(K.crd, undefined, c.metadata.name);
  });
  await client.waitFor('the old Calico CRDs to be deleted', async () => ((await client.listAll(K.crd)).some(isManagedCrd) ? undefined : true), {
    timeoutMs: 300_000,
    intervalMs: 1000,
  });
  return `deleted ${crds.length} CRDs (with their objects) and ${operatorObjects} operator objects, ${orphaned} operator resource(s) deleted with what they own kept for the target operator; the bundle holds all of it`;
}

/**
 * Delete the operator's custom resources (Installation, APIServer, TigeraStatus, ...) and wait until they are gone.
 * Their finalizers belong to the operator, which is paused and about to go: removed. They are deleted with orphan
 * propagation: the Installation owns calico-system and everything the operator rendered (the APIServer owns
 * calico-apiserver), and a background delete lets the garbage collector delete those namespaces, where the
 * `tigera.io/cni-protector` finalizers on calico-node's and the CNI plugin's ServiceAccounts and RBAC keep them
 * Terminating for ever (only an operator whose own Installation is being deleted takes them off, and the target
 * operator's is not: it cannot render into a Terminating namespace). Orphaned, calico-node keeps running and the
 * target operator adopts what it renders (it sets itself as controller owner). The garbage collector takes the
 * owner references off and then lets the resource go, hence the wait.
 */
async function deleteOperatorResources(client: KubeClient, crds: KubeObject[], reporter: Reporter): Promise<number> {
  const left = async () => {
    const out: { type: ReturnType<typeof crdResourceType>; o: KubeObject }[] = [];
    for (const crd of crds.filter((c) => c.spec.group === 'operator.tigera.io')) {
      const type = crdResourceType(crd);
      for (const o of await client.listAll(type)) out.push({ type, o });
    }
    return out;
  };
  const resources = await left();
  for (const { type, o } of resources) {
    const foreign = (o.metadata.finalizers ?? []).filter((f: string) => f !== 'orphan');
    if (foreign.length) {
      reporter.warn(
        'CNR_APPLY_FINALIZERS',
        `removing finalizers ${foreign.join(', ')} from ${o.kind} ${o.metadata.name}: its operator is paused and being replaced`,
      );
      await client.mergePatch(type, o.metadata.namespace, o.metadata.name, {
        metadata: { finalizers: (o.metadata.finalizers ?? []).filter((f: string) => f === 'orphan') },
      });
    }
    await client.delete(type, o.metadata.namespace, o.metadata.name, { propagationPolicy: 'Orphan' });
  }
  let last: string[] = [];
  await client
    .waitFor(
      'the operator resources to be deleted (their dependents orphaned)',
      async () => {
        last = (await left()).map(
          ({ o }) => `${o.kind} ${o.metadata.name}${o.metadata.finalizers?.length ? ` (finalizers ${o.metadata.finalizers.join(', ')})` : ''}`,
        );
        return last.length ? undefined : true;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    )
    .catch((err) => {
      throw new EnvironmentError(`the operator resources were not deleted: ${last.slice(0, 5).join(', ')}`, {
        cause: err,
        hint: 'the garbage collector (kube-controller-manager) removes the "orphan" finalizer; check that it runs',
      });
    });
  return resources.length;
}
