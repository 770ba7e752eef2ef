/** Steps of the seed's night on the node side (node-side-night.test.ts): pods through the real CNI plugin, the user's commands. */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { calicoctl, waitApiServiceAvailable, waitOperator } from './calico-support.js';
import { GC_GRACE_MS, doctor } from './doctor-support.js';
import { applyFixture, calicoType, fixturePath, kubeconfig } from './helpers.js';
import { IPAM_BLOCK, IPAM_HANDLE, readIpam } from './ipam-support.js';
import { auditTrail, blockName } from '../support/audit-trail.js';

export const POOL = calicoType('ippools', 'IPPool');
export const NS = 'night';
export const CNI_ANNOTATION = 'cni.projectcalico.org/podIP';

/**
 * The real kubectl with the user's own wait (kubectl delete waits for each object's finalizers by default): a
 * delete that hangs fails the test after `timeoutMs` with what kubectl printed, instead of hanging it.
 */
export function kubectlWaited(cluster: LocalCluster, args: string[], timeoutMs: number): Promise<{ code: number; out: string; ms: number }> {
  const st = cluster.readState();
  if (!st) throw new Error('the local cluster is not running');
  const started = Date.now();
  return new Promise((resolve) =>
    execFile(path.join(st.binDir, 'kubectl'), args, { env: { ...process.env, KUBECONFIG: kubeconfig() }, timeout: timeoutMs }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof (err as any).code === 'number' ? (err as any).code : -1) : 0, out: stdout + stderr, ms: Date.now() - started }),
    ),
  );
}

/**
 * `kubectl delete -f` of a release file, as the team ran it (kubectl's default wait); fails with its output. When
 * kubectl still waits after GC_GRACE_MS, `whenStuck` runs once beside it (the user asking doctor why).
 */
export async function kubectlDeleteRelease(
  cluster: LocalCluster,
  version: string,
  file: string,
  o: { timeoutMs?: number; whenStuck?: (stuckMs: number) => Promise<unknown> } = {},
): Promise<number> {
  const pending = kubectlWaited(cluster, ['delete', '-f', fixturePath(version, file)], o.timeoutMs ?? 300_000);
  let stuck: Promise<unknown> | undefined;
  // Its failure is kept and thrown once kubectl is done: nothing rejects unhandled meanwhile.
  const timer =
    o.whenStuck &&
    setTimeout(
      () =>
        (stuck = o.whenStuck!(GC_GRACE_MS).then(
          () => undefined,
          (e: unknown) => e,
        )),
      GC_GRACE_MS,
    );
  const r = await pending;
  clearTimeout(timer);
  const stuckError = await stuck;
  if (stuckError) throw stuckError;
  console.log(`kubectl delete -f ${version}/${file}: exit ${r.code} in ${(r.ms / 1000).toFixed(1)} s\n${r.out.trim()}`);
  // kubectl deletes in file order: Namespace tigera-operator first, so on a slow machine the namespace controller may
  // have removed its ServiceAccount and Deployment before kubectl gets to them; kubectl then says NotFound for those
  // and exits 1 with everything gone (a fresh-clone rehearsal, 2026-12-06). Any other error still fails.
  const errors = r.out.split('\n').filter((l) => /^error/i.test(l));
  const onlyGone = r.code === 1 && errors.length > 0 && errors.every((l) => l.startsWith('Error from server (NotFound)'));
  if (r.code !== 0 && !onlyGone) throw new Error(`kubectl delete -f ${version}/${file} did not finish (exit ${r.code} after ${r.ms} ms):\n${r.out}`);
  return r.ms;
}

/**
 * What a user does when `kubectl delete -f tigera-operator.yaml` waits on Namespace tigera-operator: its condition
 * says the namespace controller cannot discover projectcalico.org/v3 (the operator's teardown took the Calico API
 * server, and with the operator deleted mid-teardown nothing removed its APIService), so the stale registration goes
 * (`kubectl delete apiservice v3.projectcalico.org`), the standard fix for an aggregated API whose server is gone.
 * Any other wait is left to kubectl's own time limit.
 */
export async function unregisterStaleApiAsUserWould(cluster: LocalCluster, client: KubeClient, stuckMs: number): Promise<void> {
  const ns = await client.getOrUndefined(K.namespace, undefined, 'tigera-operator');
  if (!ns) return;
  const failure = (ns.status?.conditions ?? []).find((c: any) => c.type === 'NamespaceDeletionDiscoveryFailure' && c.status === 'True');
  if (!String(failure?.message ?? '').includes('projectcalico.org/v3')) {
    console.log(
      `kubectl delete -f tigera-operator.yaml still waits after ${Math.round(stuckMs / 1000)} s, not on Calico's API: ${JSON.stringify(ns.status ?? {})}`,
    );
    return;
  }
  // The user asks doctor first: it must name this and say the fix the next line runs.
  const d = await doctor();
  const finding = (d.report.findings as { id: string; severity: string; fix: string }[]).find((f) => f.id === 'namespace-stuck-on-stale-api');
  if (finding?.severity !== 'error' || !finding.fix.includes('kubectl delete apiservice v3.projectcalico.org'))
    throw new Error(`namespace tigera-operator is stuck on "${failure.message}" and doctor did not say namespace-stuck-on-stale-api: ${d.ids.join(', ')}`);
  const r = await kubectlWaited(cluster, ['delete', 'apiservice', 'v3.projectcalico.org', '--ignore-not-found'], 60_000);
  console.log(`namespace tigera-operator stuck on "${failure.message}": doctor said so; kubectl delete apiservice v3.projectcalico.org: exit ${r.code}`);
}

/** Calico 3.27.4 installed as its docs say (tigera-operator.yaml, custom-resources.yaml) under the real v1.32.10 operator. */
export async function install3274(client: KubeClient, cluster: LocalCluster): Promise<void> {
  await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
  await applyFixture(client, '3.27.4', 'custom-resources.yaml');
  await waitOperator(cluster, 'v1.32.10');
  await waitApiServiceAvailable(client, 240_000);
}

/** The Calico Nodes' VXLAN tunnel addresses once start-up ran and each node's allocator claimed one (node -> address). */
export async function waitTunnels(client: KubeClient, nodes: string[], why: string): Promise<Map<string, string>> {
  return client.waitFor(
    `${why}: a VXLAN tunnel address on every Calico Node`,
    async () => {
      const list = JSON.parse(await calicoctl(['get', 'nodes', '-o', 'json']).catch(() => '{}'));
      const byName = new Map<string, string | undefined>((list.items ?? []).map((n: any) => [n.metadata.name, n.spec?.ipv4VXLANTunnelAddr]));
      if (!nodes.every((n) => byName.get(n))) return undefined;
      // The address alone is not enough: it is an annotation on the Kubernetes Node, which outlives `kubectl delete -f`
      // of the CRDs, so right after a reinstall it names the old address before the allocator ran (CI, stop 39: no
      // IPAM block existed yet). The allocator has run once IPAM holds the address under the node's own handle.
      const { owners } = await readIpam(client);
      return nodes.every((n) => owners.get(byName.get(n)!)?.includes(`vxlan-tunnel-addr-${n}`)) ? new Map(nodes.map((n) => [n, byName.get(n)!])) : undefined;
    },
    { timeoutMs: 300_000, intervalMs: 1000 },
  );
}

/** A pod bound to a kwok node (kwok runs it, the node side calls the CNI plugin for it). */
export async function createPods(client: KubeClient, names: string[], nodes: string[]): Promise<void> {
  for (const [i, name] of names.entries())
    await client.create(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: NS, labels: { app: 'night' } },
      spec: { nodeName: nodes[i % nodes.length], containers: [{ name: 'web', image: 'nginx' }] },
    });
}

/** Waits until each pod has the address the CNI plugin gave (its status and the plugin's annotation agree, inside `cidr`). */
export async function waitPodAddresses(client: KubeClient, names: string[], cidrPrefix: string): Promise<Map<string, string>> {
  const read = async () => {
    const pods = await client.listAll<KubeObject>(K.pod, { namespace: NS });
    return new Map(
      pods
        .filter((p) => names.includes(p.metadata.name!))
        .map((p) => [p.metadata.name!, { status: p.status?.podIP as string | undefined, cni: p.metadata.annotations?.[CNI_ANNOTATION] as string | undefined }]),
    );
  };
  return client.waitFor(
    `${names.length} pods addressed by the CNI plugin in ${cidrPrefix}*`,
    async () => {
      const got = await read();
      const ok = names.every((n) => {
        const a = got.get(n);
        return a?.status?.startsWith(cidrPrefix) && a.cni === `${a.status}/32`;
      });
      return ok ? new Map(names.map((n) => [n, got.get(n)!.status!])) : undefined;
    },
    { timeoutMs: 300_000, intervalMs: 1000, state: async () => JSON.stringify([...(await read())]) },
  );
}

/** The pools as the user sees them: name -> {cidr, disabled}. */
export async function poolStates(client: KubeClient): Promise<Record<string, { cidr: string; disabled: boolean }>> {
  const out: Record<string, { cidr: string; disabled: boolean }> = {};
  for (const p of await client.listAll(POOL).catch(() => [])) out[p.metadata.name] = { cidr: p.spec.cidr, disabled: p.spec.disabled === true };
  return out;
}

/**
 * For `calicoctl ipam check`'s handles with no matching IPs (IPAMHandles no block allocates an address to): the
 * blocks each handle counts, what those blocks allocate now, every recorded write to the handle and its blocks
 * (audit log, with the writer's user agent) and the cluster's log lines (Calico's programs, the node side, its CNI
 * plugin) on the handle or its container.
 * Printed when the check finds one, to tell who released the allocation and left the handle.
 */
export async function handlesWithoutIpsTrail(client: KubeClient, runDir: string): Promise<string> {
  // calicoctl names them only with --show-all-ips: found here as calicoctl finds them (no block allocates to the handle).
  const inUse = new Set<string>();
  for (const b of await client.listAll(IPAM_BLOCK)) {
    const attrs: { handle_id?: string }[] = b.spec?.attributes ?? [];
    for (const a of (b.spec?.allocations ?? []) as (number | null)[]) if (a !== null) inUse.add(attrs[a]?.handle_id ?? '');
  }
  const orphans = (await client.listAll(IPAM_HANDLE)).filter((h) => !inUse.has(h.spec?.handleID ?? h.metadata.name));
  const out: string[] = [];
  for (const h of orphans) {
    const handle: string = h.spec?.handleID ?? h.metadata.name;
    const blocks = Object.keys(h.spec?.block ?? {});
    out.push(`handle ${handle}: counts ${JSON.stringify(h.spec?.block)}, created ${h.metadata.creationTimestamp}`);
    for (const cidr of blocks) {
      const b = await client.getOrUndefined(IPAM_BLOCK, undefined, blockName(cidr));
      const attrs: { handle_id?: string; secondary?: unknown }[] = b?.spec?.attributes ?? [];
      const held = ((b?.spec?.allocations ?? []) as (number | null)[]).map((a, o) => (a === null ? undefined : `${o}:${attrs[a]?.handle_id}`)).filter((x) => x);
      out.push(`  block ${cidr} (affinity ${b?.spec?.affinity}, seq ${b?.spec?.sequenceNumber}): ${held.join(' ')}`);
    }
    out.push(...auditTrail(runDir, [h.metadata.name, ...blocks.map(blockName)], 80).map((l) => `  ${l}`));
    // The CNI plugin, kube-controllers and the node side log a pod handle's container ID (some only its first 12 characters).
    const id = handle.replace(/^k8s-pod-network\./, '').slice(0, 12);
    for (const file of logFiles(runDir))
      out.push(
        ...readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.includes(id) || l.includes(handle))
          .slice(-30)
          .map((l) => `  ${path.relative(runDir, file)}: ${l.slice(0, 400)}`),
      );
  }
  return out.join('\n');
}

/** The local cluster's log files: its run directory's and the node side's. */
function logFiles(runDir: string): string[] {
  const inDir = (d: string) =>
    existsSync(d)
      ? readdirSync(d)
          .filter((f) => f.endsWith('.log'))
          .map((f) => path.join(d, f))
      : [];
  return [...inDir(runDir), ...inDir(path.join(runDir, 'node-side'))];
}
