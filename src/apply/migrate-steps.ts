/**
 * The datastore migration's own steps (plan/migrate-plan.ts) and its rollback. Each runs the real calicoctl of the
 * cluster's release, resolved from apply's command line or PATH (prepareCalicoctl), never from the plan file.
 *
 * Why the order is safe: from `migrate-lock-etcd` on, ClusterInformation says datastoreReady false in etcd and (set
 * by calicoctl's import) in the copy, and the CNI plugin refuses to give out an address while it does
 * (cni-plugin/pkg/plugin/plugin.go). So no pod gets an address between the export and `migrate-unlock`, and a
 * rollback before that step finds etcd's IPAM complete. After it, pods get addresses from the copy that etcd never
 * hears of: a rollback then would give them out twice, so it is refused, judged from the live objects.
 */
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { checkCalicoctlVersion, kubernetesDatastoreEnv, resolveCalicoctl, runCalicoctl, withEtcdDatastoreEnv, type KubeAccess } from '../calico/calicoctl.js';
import { calicoEtcdConnection, type EtcdAccessFlags } from '../calico/etcd-connection.js';
import { CLUSTER_INFO } from '../calico/detect.js';
import { CALICO_CONFIG } from '../calico/install-method.js';
import type { Release } from '../calico/release.js';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import { EtcdGateway } from '../etcd/gateway.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { applyManifestEdits } from '../plan/manifest-custom.js';
import { judgeEtcdNodes, refuseNodesWithoutK8sRef } from '../plan/migrate-nodes.js';
import type { Plan } from '../plan/types.js';
import { makeTempDir } from '../util/temp-dir.js';
import type { StepRuntime } from './executor.js';
import { compareIpam, compareResources, etcdIpam, kubernetesIpam, nodeMapOf, type CalicoctlGet } from './migrate-verify.js';
import { waitRollout } from './wait-rollout.js';

/** calicoctl as apply runs it: the program and how it reaches the Kubernetes datastore. */
export interface CalicoctlRun {
  bin: string;
  kube: KubeAccess;
}

/** What the apply command line says about calicoctl and the cluster it must reach. */
export interface CalicoctlGiven extends KubeAccess {
  calicoctl?: string;
  /** `--as`: calicoctl cannot impersonate, so a migration under it is refused. */
  as?: string;
}

const ETCD_CONFIG_KEY = 'etcdConfig';

/** Refuses (exit 5) before the journal or lock exist when calicoctl is missing, of another release, or cannot act as this run does. */
export async function prepareCalicoctl(plan: Plan, given: CalicoctlGiven): Promise<CalicoctlRun | undefined> {
  if (plan.strategy !== 'migrate-datastore') return undefined;
  if (given.as) throw new RefusedError('the datastore migration runs calicoctl, which cannot impersonate (--as): run apply as that user instead');
  const bin = resolveCalicoctl(given.calicoctl, 'the plan was not applied');
  await checkCalicoctlVersion(bin, plan.target.version);
  return { bin, kube: { kubeconfig: given.kubeconfig, context: given.context } };
}

const need = (run: CalicoctlRun | undefined): CalicoctlRun => {
  if (!run) throw new RefusedError('the plan has a datastore migration step but is not a migration plan (strategy migrate-datastore)');
  return run;
};

/** calico-config's etcd settings (endpoints and the certificate files' paths, no secret), as read before any step changed it. */
async function etcdConfig(client: KubeClient, rt: StepRuntime): Promise<Record<string, string>> {
  const remembered = rt.recall<Record<string, string>>(ETCD_CONFIG_KEY);
  if (remembered) return remembered;
  const data: Record<string, string> = (await client.getOrUndefined(K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name))?.data ?? {};
  const config = Object.fromEntries(Object.entries(data).filter(([k]) => k.startsWith('etcd_')));
  if (!config[CALICO_CONFIG.etcdKey]?.trim())
    throw new RefusedError(`${CALICO_CONFIG.namespace}/${CALICO_CONFIG.name} names no etcd (${CALICO_CONFIG.etcdKey})`);
  rt.remember(ETCD_CONFIG_KEY, config);
  return config;
}

export async function lockEtcd(client: KubeClient, run: CalicoctlRun | undefined, rt: StepRuntime, flags: EtcdAccessFlags = {}): Promise<string> {
  const { bin } = need(run);
  const config = await etcdConfig(client, rt);
  // A Node calicoctl's export would stop on, added since the plan: refused while etcd still gives out addresses.
  refuseNodesWithoutK8sRef(await judgeEtcdNodes(client, flags), "Calico's etcd was not locked");
  await withEtcdDatastoreEnv(client, (env) => runCalicoctl(bin, ['datastore', 'migrate', 'lock'], env, 'calicoctl datastore migrate lock'), { config, flags });
  return `Calico's etcd ${config[CALICO_CONFIG.etcdKey]} locked: no pod gets an address until the end`;
}

export async function copyToKubernetes(client: KubeClient, run: CalicoctlRun | undefined, rt: StepRuntime, flags: EtcdAccessFlags = {}): Promise<string> {
  const { bin, kube } = need(run);
  const config = await etcdConfig(client, rt);
  const dir = makeTempDir('cni-rewind-migrate-');
  try {
    const exported = await withEtcdDatastoreEnv(
      client,
      (env) => runCalicoctl(bin, ['datastore', 'migrate', 'export'], env, 'calicoctl datastore migrate export'),
      { config, flags },
    );
    const file = path.join(dir, 'etcd-data.yaml');
    writeFileSync(file, exported, { mode: 0o600 });
    const resources = (exported.split('===\n')[0] ?? '').split(/^---$/m).filter((d) => /\bkind:/.test(d)).length;
    try {
      await runCalicoctl(bin, ['datastore', 'migrate', 'import', '-f', file], kubernetesDatastoreEnv(kube), 'calicoctl datastore migrate import');
    } catch (err) {
      // A resumed run after an import that got through (in part): calicoctl refuses a datastore with Calico data.
      throw new EnvironmentError((err as Error).message, {
        hint: 'if an earlier run imported part of it, roll back (cni-rewind apply PLAN --rollback), delete the crd.projectcalico.org CRDs and make a new plan',
        cause: err,
      });
    }
    return `${resources} Calico resources and etcd's IPAM copied into the Kubernetes datastore (locked)`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function verifyMigrated(client: KubeClient, run: CalicoctlRun | undefined, rt: StepRuntime, flags: EtcdAccessFlags = {}): Promise<string> {
  const { bin, kube } = need(run);
  const config = await etcdConfig(client, rt);
  const get =
    (env: Record<string, string>, where: string): CalicoctlGet =>
    (kind, all) =>
      runCalicoctl(bin, ['get', kind, '-o', 'json', ...(all ? ['--all-namespaces'] : [])], env, `calicoctl get ${kind} (${where})`);
  const kddEnv = kubernetesDatastoreEnv(kube);
  // One read of calico-config's etcd settings and the Secret, for calicoctl's files and for etcd's IPAM below.
  const connection = await calicoEtcdConnection(client, flags, config);
  const { resources, nodes } = await withEtcdDatastoreEnv(
    client,
    async (env) => ({
      resources: await compareResources(get(env, 'etcd'), get(kddEnv, 'Kubernetes')),
      nodes: nodeMapOf(await get(env, 'etcd')('nodes', false)),
    }),
    { connection },
  );
  const etcd = new EtcdGateway(connection);
  const [source, copy] = [await etcdIpam(etcd, nodes), await kubernetesIpam(client)];
  const problems = [...resources.problems, ...compareIpam(source, copy)];
  if (problems.length) {
    throw new EnvironmentError(
      `the copy in the Kubernetes datastore differs from etcd (${problems.length}): ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? '; ...' : ''}`,
      { hint: 'both datastores are still locked: roll back with cni-rewind apply PLAN --rollback' },
    );
  }
  return `${resources.compared} Calico resources, ${source.allocations.size} IPAM allocations, ${source.handles.size} handles and ${source.affinities.size} block affinities of etcd found in the copy`;
}

export async function unlockKubernetes(run: CalicoctlRun | undefined): Promise<string> {
  const { bin, kube } = need(run);
  await runCalicoctl(bin, ['datastore', 'migrate', 'unlock'], kubernetesDatastoreEnv(kube), 'calicoctl datastore migrate unlock');
  return 'the Kubernetes datastore unlocked: Calico runs on it; etcd stays locked';
}

/** True once the migration finished: calico-node runs on the Kubernetes datastore and that datastore is unlocked. */
async function migrationFinished(client: KubeClient): Promise<boolean> {
  // Not found: no copy (or no CRD) yet. Any other error stops the rollback: it must not go ahead on a guess.
  const info = await client.getOrUndefined<any>(CLUSTER_INFO, undefined, 'default');
  if (info?.spec?.datastoreReady !== true) return false;
  const config = await client.getOrUndefined(K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name);
  return !config?.data?.[CALICO_CONFIG.etcdKey]?.trim();
}

/** True while calico-config, calico-node and calico-kube-controllers all still point at etcd (calico.yaml never went in). */
export async function etcdInstallInPlace(client: KubeClient): Promise<boolean> {
  const config = await client.getOrUndefined(K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name);
  if (!config?.data?.[CALICO_CONFIG.etcdKey]?.trim()) return false;
  for (const [type, name] of [
    [K.daemonSet, 'calico-node'],
    [K.deployment, 'calico-kube-controllers'],
  ] as const) {
    const w = await client.getOrUndefined(type, CALICO_CONFIG.namespace, name);
    const containers: { env?: { name: string }[] }[] = w?.spec?.template?.spec?.containers ?? [];
    if (!containers.some((c) => (c.env ?? []).some((e) => e.name === 'ETCD_ENDPOINTS'))) return false;
  }
  return true;
}

/** Refuses (exit 5) a rollback once pods may hold addresses etcd does not know. */
export async function refuseFinishedMigration(client: KubeClient): Promise<void> {
  if (!(await migrationFinished(client))) return;
  throw new RefusedError(
    'the migration finished: Calico runs on the unlocked Kubernetes datastore, whose new pods may have addresses etcd does not know; putting etcd back would give them out again',
    {
      hint: 'Calico offers no way back to etcd; cni-rewind backup and restore work on the Kubernetes datastore, and etcd keeps its data as it was at the migration (locked)',
    },
  );
}

export interface RollbackDeps {
  client: KubeClient;
  plan: Plan;
  target: Release;
  run: CalicoctlRun;
  put: (objs: KubeObject[]) => Promise<number>;
  rolloutTimeoutMs: number;
  /** `--etcd-*` of apply's command line: Calico's etcd when calico-config and calico-etcd-secrets do not name it all. */
  etcd?: EtcdAccessFlags;
}

/**
 * Puts calico-etcd.yaml back (the release's, with the install's edits the plan found, its etcd settings included;
 * never its Secret, which the migration left alone) and unlocks etcd. Refused once the Kubernetes datastore is
 * unlocked under calico.yaml. The copy stays in the Kubernetes datastore: the result names the CRDs to delete before
 * a new plan.
 */
export async function rollbackMigration(d: RollbackDeps): Promise<string> {
  if (!d.plan.migrate || !d.target.calicoEtcdManifest) throw new RefusedError('this plan is not a datastore migration: there is no migration to roll back');
  await refuseFinishedMigration(d.client);
  // Stopped before calico.yaml went in: the install is as it was, with edits the plan may not know (resources,
  // tolerations); it is left alone rather than replaced by the release's.
  let restored = 'calico-etcd.yaml was still in place';
  if (!(await etcdInstallInPlace(d.client))) {
    const objs = applyManifestEdits(
      d.target.calicoEtcdManifest.filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Secret'),
      d.plan.migrate.rollback,
    );
    const n = await d.put(objs);
    // calico-etcd.yaml's workloads (their init containers differ from calico.yaml's), with the same edits.
    const etcdPlan: Plan = { ...d.plan, transforms: { ...d.plan.transforms, manifest: d.plan.migrate.rollback } };
    const rollout = await waitRollout(d.client, etcdPlan, { ...d.target, calicoManifest: d.target.calicoEtcdManifest }, d.rolloutTimeoutMs);
    restored = `${n} objects of calico-etcd.yaml put back; ${rollout}`;
  }
  await withEtcdDatastoreEnv(d.client, (env) => runCalicoctl(d.run.bin, ['datastore', 'migrate', 'unlock'], env, 'calicoctl datastore migrate unlock (etcd)'), {
    flags: d.etcd,
  });
  const copies = (await d.client.listAll(K.crd)).filter((c) => c.spec?.group === 'crd.projectcalico.org').map((c) => c.metadata.name);
  return (
    `${restored}; Calico's etcd unlocked` +
    (copies.length ? `. The copy stays in the Kubernetes datastore: before a new migration plan, delete it with kubectl delete crd ${copies.join(' ')}` : '')
  );
}
