/**
 * A steady churn of real Pods through Calico's node side (issue 29): Pod objects created and deleted on the kwok
 * nodes from the test process, so that the node side (src/dev/local-cluster/node-side.ts) runs the real CNI plugin's
 * ADD and DEL for each, exactly as for any other pod. It keeps about `target` pods of its own (a namespace of its
 * own, names unique to the run), one create or delete per tick, and records what happened to each pod:
 * - the create and delete calls (the test's own clock);
 * - the address the CNI plugin gave, when the pod first showed it (its `cni.projectcalico.org/podIP` annotation,
 *   the same address in `status.podIP`) and the IPAM handle it was given under (`k8s-pod-network.<containerID>`
 *   from the plugin's containerID annotation);
 * - every ADD or DEL the node side reported failing (its status, `nodeSide.pods[<ns>/<name>].error`), when first
 *   seen, e.g. "Calico is currently not ready to process requests" while restore or apply hold the datastore lock;
 * - when the node side's record of a deleted pod went, i.e. when its DEL succeeded.
 * Only pods that have their address are deleted, so a pod refused under the lock stays until its retried ADD has
 * succeeded, and the test can require that of every refused pod.
 *
 * A churn stops by `stop()`; `stopAllPodChurns()` in afterEach/afterAll makes sure none outlives its test.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { until } from '../support/until.js';
import { expect } from 'vitest';
import { ipamCheck, readIpam, type IpamCheck } from './ipam-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

export interface ChurnPod {
  name: string;
  node: string;
  createdAt: string;
  /** The delete call was made (the pod had its address then). */
  deletedAt?: string;
  /** The node side no longer has a record of the pod: its DEL succeeded. */
  releasedAt?: string;
  ip?: string;
  /** When the pod first showed the CNI plugin's address. */
  addressedAt?: string;
  handle?: string;
  /** The node side's status has shown a record of the pod. */
  known?: boolean;
  /** ADD and DEL failures the node side reported for the pod, each when first seen ("" when it reported none again). */
  failures: { t: string; error: string }[];
}

export interface PodChurnOptions {
  namespace: string;
  nodes: string[];
  /** Pod names are `<prefix>-<n>`: make it unique to the run. */
  prefix: string;
  /** About this many pods of the churn exist at once. */
  target: number;
  /** One create or delete every this many milliseconds (a call that takes longer delays the next). */
  intervalMs: number;
}

const running = new Set<PodChurn>();
const now = () => new Date().toISOString();

/**
 * The end of the Calico supervisor's log (node side, CNI calls, bridges), for a wait's failure message: a pod the node
 * side never took up says nothing by itself about which call held the supervisor's tick.
 */
export function supervisorTail(cluster: LocalCluster, lines = 25): string {
  const st = cluster.readState();
  const file = st && path.join(st.workDir, 'calico-supervisor.log');
  if (!file || !existsSync(file)) return '(no supervisor log)';
  return `the supervisor's last lines:\n${readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`;
}

/** Stops every churn still running (a test that failed before its own stop must not leave one acting under the next). */
export async function stopAllPodChurns(): Promise<void> {
  await Promise.all([...running].map((c) => c.stop()));
}

export class PodChurn {
  readonly pods = new Map<string, ChurnPod>();
  private seq = 0;
  private stopping = false;
  private loops: Promise<void>[] = [];
  private lastError = '';

  private constructor(
    private readonly client: KubeClient,
    private readonly cluster: LocalCluster,
    readonly opts: PodChurnOptions,
  ) {}

  /** Creates the churn's namespace when needed and starts creating and deleting pods. */
  static async start(client: KubeClient, cluster: LocalCluster, opts: PodChurnOptions): Promise<PodChurn> {
    if (!(await client.getOrUndefined(K.namespace, undefined, opts.namespace)))
      await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: opts.namespace } });
    const churn = new PodChurn(client, cluster, opts);
    running.add(churn);
    churn.loops = [
      churn.loop(opts.intervalMs, () => churn.step()),
      churn.loop(250, () => churn.observeNodeSide()),
      churn.loop(1000, () => churn.observePods()),
    ];
    return churn;
  }

  /** Stops creating and deleting (the call in flight finishes); what the pods do afterwards is still observed by `settle`. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
    running.delete(this);
    if (this.lastError) console.log(`pod churn ${this.opts.prefix}: last error of its own calls: ${this.lastError}`);
  }

  /**
   * After `stop`: waits until every pod of the churn still there has its address and every deleted one has been
   * released by its DEL, so that what the test judges next is the settled state, not a call in flight.
   */
  async settle(timeoutMs = 180_000): Promise<void> {
    await until(
      `every pod of churn ${this.opts.prefix} addressed and every deleted one released`,
      async () => {
        await this.observePods();
        this.observeNodeSide();
        return this.unsettled().length === 0;
      },
      { timeoutMs, intervalMs: 500, state: async () => `unsettled: ${JSON.stringify(this.unsettled().slice(0, 5))}\n${await this.diagnosis()}` },
    );
  }

  /**
   * What a wait on the churn saw last, beyond its own records: each pod's phase as the API server has it (the node
   * side takes up only Running pods, which kwok makes them), when the supervisor's last finished tick started (a tick
   * held by a call shows as an old one), and the end of its log.
   */
  async diagnosis(): Promise<string> {
    const pods = await this.client.listAll<KubeObject>(K.pod, { namespace: this.opts.namespace }).catch((err: Error) => err);
    const phases =
      pods instanceof Error
        ? `(unreadable: ${pods.message})`
        : pods.map((p) => `${p.metadata.name} ${p.status?.phase ?? '-'}${p.metadata.deletionTimestamp ? ' deleting' : ''}`).join(', ');
    const updated = this.cluster.calicoStatus()?.updatedAt;
    const tick = updated ? `${Math.round((Date.now() - Date.parse(updated)) / 1000)} s ago` : 'never';
    return `pods as stored: ${phases}\nthe supervisor's last finished tick started ${tick}\n${supervisorTail(this.cluster)}`;
  }

  unsettled(): ChurnPod[] {
    return [...this.pods.values()].filter((p) => (p.deletedAt ? !p.releasedAt : !p.ip));
  }

  /** Pods that exist (created, not deleted). */
  live(): ChurnPod[] {
    return [...this.pods.values()].filter((p) => !p.deletedAt);
  }

  /** Pods with an ADD failure matching `re`, first seen between `from` and `to` (ISO times). */
  refused(re: RegExp, from = '', to = '9'): ChurnPod[] {
    return [...this.pods.values()].filter((p) => p.failures.some((f) => /^ADD/.test(f.error) && re.test(f.error) && f.t >= from && f.t <= to));
  }

  /** Counts for the test's log: creates, deletes and addresses between `from` and `to`, and failures seen. */
  counts(from = '', to = '9'): { created: number; addressed: number; deleted: number; released: number; failures: number } {
    const ps = [...this.pods.values()];
    const within = (t?: string) => !!t && t >= from && t <= to;
    return {
      created: ps.filter((p) => within(p.createdAt)).length,
      addressed: ps.filter((p) => within(p.addressedAt)).length,
      deleted: ps.filter((p) => within(p.deletedAt)).length,
      released: ps.filter((p) => within(p.releasedAt)).length,
      failures: ps.flatMap((p) => p.failures).filter((f) => f.error && within(f.t)).length,
    };
  }

  private async loop(intervalMs: number, body: () => unknown): Promise<void> {
    while (!this.stopping) {
      const started = Date.now();
      try {
        await body();
      } catch (err) {
        // The API server can be briefly away (an operator handing over restarts nothing of it, but a slow
        // answer times out): the churn goes on, as pods on a real cluster keep coming.
        this.lastError = `${now()} ${(err as Error).message}`;
      }
      const wait = intervalMs - (Date.now() - started);
      for (let left = wait; left > 0 && !this.stopping; left -= 100) await new Promise((r) => setTimeout(r, Math.min(100, left)));
    }
  }

  /** One create or delete: below the target create, above it delete, at it either (alternating by the sequence). */
  private async step(): Promise<void> {
    const live = this.live();
    const deletable = live.filter((p) => p.ip);
    const create = live.length < this.opts.target || (live.length === this.opts.target && this.seq % 2 === 0) || deletable.length === 0;
    this.seq++;
    if (create) {
      if (live.length > this.opts.target + 2) return; // every pod waits for its ADD (the datastore is locked): no more
      const name = `${this.opts.prefix}-${this.seq}`;
      const node = this.opts.nodes[this.seq % this.opts.nodes.length]!;
      await this.client.create(K.pod, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: this.opts.namespace, labels: { app: 'pod-churn' } },
        spec: { nodeName: node, containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.9' }] },
      });
      this.pods.set(name, { name, node, createdAt: now(), failures: [] });
      return;
    }
    // The oldest addressed pod goes: pods created before a backup are the ones a restore has to keep or release.
    const victim = deletable.sort((a, b) => a.createdAt.localeCompare(b.createdAt))[0]!;
    victim.deletedAt = now();
    try {
      await this.client.delete(K.pod, this.opts.namespace, victim.name);
    } catch (err) {
      victim.deletedAt = undefined;
      throw err;
    }
  }

  /** The node side's status (a file the supervisor rewrites after each of its ticks): failures and finished DELs. */
  private observeNodeSide(): void {
    const pods = this.cluster.calicoStatus()?.nodeSide?.pods;
    if (!pods) return;
    const t = now();
    for (const p of this.pods.values()) {
      const rec = pods[`${this.opts.namespace}/${p.name}`];
      if (rec?.error && p.failures.at(-1)?.error !== rec.error) p.failures.push({ t, error: rec.error });
      if (!rec?.error && p.failures.length && p.failures.at(-1)!.error !== '') p.failures.push({ t, error: '' });
      // The status is written at the end of the supervisor's tick: a pod deleted right after its ADD may not be in it yet.
      if (rec) p.known = true;
      if (p.deletedAt && !p.releasedAt && !rec && p.known) p.releasedAt = t;
    }
  }

  /** The pods as stored: the CNI plugin's address and handle, once status and annotation agree. */
  private async observePods(): Promise<void> {
    const t = now();
    for (const pod of await this.client.listAll<KubeObject>(K.pod, { namespace: this.opts.namespace })) {
      const p = this.pods.get(pod.metadata.name!);
      if (!p || p.ip) continue;
      const ann = pod.metadata.annotations ?? {};
      const ip = (ann['cni.projectcalico.org/podIP'] ?? '').split('/')[0];
      if (!ip || pod.status?.podIP !== ip || !ann['cni.projectcalico.org/containerID']) continue;
      p.ip = ip;
      p.addressedAt = t;
      p.handle = `k8s-pod-network.${ann['cni.projectcalico.org/containerID']}`;
    }
  }
}

/**
 * Waits until the node side has done its work for every pod (not only the churn's: the operator's pods get their
 * addresses from it too): start-up done on every node in `nodes`, every running pod bound to them that is not
 * host-network has its address from the node side, and no record of a deleted pod is left (every DEL done).
 * `calicoctl ipam check` read before that would count an address whose DEL is still to come as leaked.
 */
export async function waitNodeSideSettled(client: KubeClient, cluster: LocalCluster, nodes: string[], timeoutMs = 240_000): Promise<void> {
  let last = '';
  await until(
    'the node side settled (start-up done on every node, every pod addressed, every DEL done)',
    async () => {
      const st = cluster.calicoStatus()?.nodeSide;
      const pods = (await client.listAll<KubeObject>(K.pod)).filter((p) => nodes.includes(p.spec?.nodeName) && !p.spec?.hostNetwork);
      const want = new Map(
        pods.filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp).map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p]),
      );
      const wrong = [
        ...nodes.filter((n) => st?.nodes[n]?.startup !== 'done' || !st.nodes[n]?.allocator?.pid).map((n) => `node ${n}: ${JSON.stringify(st?.nodes[n])}`),
        ...[...want].filter(([k, p]) => !st?.pods[k]?.ip || st.pods[k]!.ip !== p.status?.podIP).map(([k]) => `pod ${k}: ${JSON.stringify(st?.pods[k])}`),
        ...Object.entries(st?.pods ?? {})
          .filter(([k, r]) => !want.has(k) && nodes.includes(r.node) && !pods.some((p) => `${p.metadata.namespace}/${p.metadata.name}` === k))
          .map(([k, r]) => `DEL of ${k} pending: ${r.error ?? ''}`),
      ];
      last = wrong.join('; ');
      return wrong.length === 0;
    },
    { timeoutMs, intervalMs: 1000, state: () => last },
  );
}

/**
 * What every step of a churn ends with, once the churn is stopped: it settles (every pod of it addressed, every
 * deleted one released), the node side settles, and then
 * - every pod whose ADD was refused got its address after the last refusal;
 * - no two running pods share an address and each running pod's Calico address is allocated to its own handle
 *   (`expectPodAddressesHeld`, at least the churn's live pods judged);
 * - no address is allocated twice, and every pod-network allocation in IPAM belongs to a running pod: nothing the
 *   churn's DELs released is still (or again) allocated to its handle;
 * - `calicoctl ipam check` finds no problem at all (every pod here has a Pod object, so no "allocated but not in use").
 */
export async function expectChurnSettledAndHeld(client: KubeClient, cluster: LocalCluster, churn: PodChurn): Promise<IpamCheck> {
  await churn.settle();
  await waitNodeSideSettled(client, cluster, churn.opts.nodes);
  for (const p of churn.refused(/./)) {
    const lastFailure = p.failures.filter((f) => f.error).at(-1)!;
    expect(p.addressedAt && p.addressedAt > lastFailure.t, `${p.name} refused at ${lastFailure.t} (${lastFailure.error}), addressed ${p.addressedAt}`).toBe(
      true,
    );
  }
  await expectPodAddressesHeld(client, churn.live().length);
  const ipam = await readIpam(client);
  expect([...ipam.owners].filter(([, o]) => o.length > 1)).toEqual([]);
  const podHandles = new Set(
    (await client.listAll<KubeObject>(K.pod))
      .map((p) => p.metadata.annotations?.['cni.projectcalico.org/containerID'])
      .filter(Boolean)
      .map((id) => `k8s-pod-network.${id}`),
  );
  const stray = [...ipam.owners].filter(([, o]) => o.some((h) => h.startsWith('k8s-pod-network.') && !podHandles.has(h)));
  const released = new Set([...churn.pods.values()].filter((p) => p.releasedAt).map((p) => p.handle));
  const why = stray.map(([ip, o]) => `${ip} of ${o.join(', ')}${o.some((h) => released.has(h)) ? ' (released by a DEL of the churn)' : ''}`);
  expect(stray, `pod-network allocations no running pod has: ${why.join('; ')}`).toEqual([]);
  const check = await ipamCheck();
  expect(check.problems, check.text).toBe(0);
  return check;
}
