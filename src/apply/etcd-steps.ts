/**
 * The steps of a plan for a calico-etcd.yaml install (plan/etcd-plan.ts) where they differ from a calico.yaml
 * install's: the target's calico-etcd.yaml (never its Secret) with the install's edits, its rollout, and the data
 * checked in etcd. apply runs them only once it found the cluster's datastore to be etcd (apply.ts).
 */
import type { Bundle } from '../bundle/reader.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import type { Release } from '../calico/release.js';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { etcdDifferences } from '../plan/etcd-compare.js';
import { etcdSettingsDiffer, etcdTargetObjects } from '../plan/etcd-plan.js';
import { editCount, MANIFEST_NS } from '../plan/manifest-custom.js';
import type { Plan } from '../plan/types.js';
import { waitRollout } from './wait-rollout.js';

/** Writes the target calico-etcd.yaml with the plan's edits, once they are proven to keep Calico on the same etcd. */
export async function applyCalicoEtcdManifest(client: KubeClient, plan: Plan, target: Release, put: (objs: KubeObject[]) => Promise<number>): Promise<string> {
  const objs = etcdTargetObjects(target, plan.transforms.manifest);
  // Checked again against the live objects: a plan edited or made before someone moved etcd would cut Calico off it.
  const live = {
    config: await client.getOrUndefined(K.configMap, MANIFEST_NS, 'calico-config'),
    ds: await client.getOrUndefined(K.daemonSet, MANIFEST_NS, 'calico-node'),
  };
  const differ = etcdSettingsDiffer(live, objs);
  if (differ.length)
    throw new RefusedError(`the target calico-etcd.yaml would point Calico at another etcd than it uses now (${differ.join('; ')}); nothing was written`, {
      hint: 'make a new plan with `cni-rewind plan`',
    });
  const n = await put(objs);
  const e = plan.transforms.manifest;
  const carried = editCount(e);
  return `${n} objects of calico-etcd.yaml applied (Secret calico-etcd-secrets left as it is)${carried ? ` with ${carried} edit(s) of the ${e!.from} calico-etcd.yaml carried over` : ''}`;
}

export function waitEtcdRollout(client: KubeClient, plan: Plan, target: Release, timeoutMs: number): Promise<string> {
  // calico-etcd.yaml's workloads are what rolls out (their images and init containers are not calico.yaml's).
  return waitRollout(client, plan, { ...target, calicoManifest: target.calicoEtcdManifest }, timeoutMs);
}

/** The bundle's data in etcd after the change: no difference but those the plan found before it (plan.drift), kept. */
export async function verifyEtcdData(client: KubeClient, bundle: Bundle, plan: Plan, reporter: Reporter, etcd?: EtcdAccessFlags): Promise<string> {
  const kept = new Set(plan.drift ?? []);
  const found = await etcdDifferences(client, bundle, reporter, etcd);
  const differences = found.filter((d) => !kept.has(d.id));
  if (differences.length)
    throw new EnvironmentError(
      `Calico's data in etcd differs from the bundle after the change: ${differences
        .slice(0, 5)
        .map((d) => `${d.id} ${d.reason}`)
        .join('; ')}${differences.length > 5 ? ` and ${differences.length - 5} more` : ''}`,
    );
  const counts = bundle.manifest.counts;
  const total = Object.values(counts).reduce((a, b) => a + (typeof b === 'number' ? b : 0), 0);
  return `the bundle's ${total} records read back from etcd: none missing or changed, no IPAM allocation of a running pod lost${kept.size ? `; ${kept.size} changed before the plan, kept` : ''}`;
}
