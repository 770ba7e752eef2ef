/**
 * Planning's judgements over the whole plan, once every object is planned: IPAM entries kept as the cluster has them
 * (ipam.ts), and an Installation refused when writing it would make the operator delete pools (pools.ts).
 */
import { CALICO_CRD_GROUP, OPERATOR_GROUP } from '../calico/knowledge.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { crdResourceType } from '../kube/discovery.js';
import type { ResourceResolver } from '../kube/resolver.js';
import { groupOf, type KubeObject } from '../kube/types.js';
import { isIpamLive, mergeIpamPlan, type IpamEntries, type IpamPlanned } from './ipam.js';
import { INSTALLATION_KIND, INSTALLATION_NAME } from './order.js';
import { crdKey } from './plan-object.js';
import type { PlanTable } from './plan-table.js';
import { judgeInstallationPools } from './pools.js';
import type { PhaseTimer } from './timings.js';
import { readAddressUse, reportUse, type AddressUse } from './ipam-use.js';
import { NOT_RESTORED, WRITES, desiredOf, hasDesired, setDesired, type Planned, type RestoreSource } from './types.js';

/** A plan entry as the IPAM merge sees it: its object parsed from the plan's text where the merge reads it. */
class IpamView implements IpamPlanned {
  constructor(private readonly p: Planned) {}
  get action() {
    return this.p.action;
  }
  get live() {
    return this.p.live;
  }
  /** A block read again while a duplicate settles (ipam.ts rereadBlock). */
  set live(o: KubeObject | undefined) {
    this.p.live = o;
  }
  get desired() {
    return desiredOf(this.p);
  }
  /** The merge leaves out of a block it creates what nothing uses (ipam.ts): the entry writes that block. */
  set desired(o: KubeObject | undefined) {
    if (o) setDesired(this.p, o);
  }
}

/**
 * IPAM entries the cluster has stay as they are (ipam.ts). The merge visits the plan's IPAM entries one at a time,
 * each built from the plan when visited and put back after (plan-table.ts), never all held as objects at once.
 */
export async function keepLiveIpam(
  client: KubeClient,
  resolver: ResourceResolver,
  bundle: RestoreSource,
  planned: PlanTable,
  reporter: Reporter,
  timer: PhaseTimer,
): Promise<void> {
  const ipam = planned.where((i) => isIpamLive(planned.headAt(i)) && hasDesired(planned.get(i)));
  const entries: IpamEntries = {
    async each(visit) {
      for (const i of ipam) {
        const p = planned.get(i);
        await visit(new IpamView(p));
        planned.set(i, p);
      }
    },
  };
  // The cluster's pods, listed once: for the duplicates' judgement and for which addresses are used now.
  let pods: Promise<KubeObject[]> | undefined;
  const livePods = () => (pods ??= timer.time('readCluster', () => client.listAll(K.pod)));
  let use: Promise<AddressUse> | undefined;
  const addressUse = () => (use ??= readAddressUse(livePods, () => timer.time('readCluster', () => client.listAll(K.node))));
  const ipamKept = await mergeIpamPlan(entries, {
    backupCreatedAt: bundle.manifest.createdAt,
    // Streamed page by page into the merge's block index (kept as text there), never all parsed at once.
    liveBlocks: () =>
      (async function* () {
        const t = await resolver.resolve(`${CALICO_CRD_GROUP}/v1`, 'IPAMBlock');
        if (!t) return;
        const items = client.listItems(t)[Symbol.asyncIterator]();
        for (;;) {
          const r = await timer.time('readCluster', () => items.next());
          if (r.done) return;
          yield r.value;
        }
      })(),
    // Read only when a block is created or re-created: is the bundle's pod still running, which addresses are used?
    livePods,
    addressUse,
    rereadBlock: async (live) => {
      const t = await resolver.resolve(`${CALICO_CRD_GROUP}/v1`, 'IPAMBlock');
      return t ? timer.time('readCluster', () => client.getOrUndefined(t, undefined, live.metadata.name)) : undefined;
    },
    bundleBlocks: () =>
      (async function* () {
        const items = bundle.objects({ groups: [CALICO_CRD_GROUP], kinds: ['IPAMBlock'], lenient: true })[Symbol.asyncIterator]();
        for (;;) {
          const r = await timer.time('readBundle', () => items.next());
          if (r.done) return;
          yield r.value.object;
        }
      })(),
  });
  if (use) reportUse(await use, reporter);
  if (ipamKept)
    reporter.info(
      'CNR_RESTORE_IPAM_LIVE',
      `${ipamKept} IPAM objects kept as the cluster has them: IPAM is live state (allocations made or released since the backup are not undone)`,
    );
}

/**
 * Refuses writing an Installation that would make the operator delete pools (pools.ts judgeInstallationPools): the
 * pools judged are those there will be afterwards, the live ones with the bundle's version where it restores one.
 */
export async function refuseInstallationDeletingPools(client: KubeClient, planned: PlanTable, liveCrds: Map<string, KubeObject>, operatorImage?: string) {
  const at = planned.where((i) => {
    const h = planned.headAt(i);
    return h.kind === INSTALLATION_KIND && groupOf(h.apiVersion) === OPERATOR_GROUP && planned.refAt(i).name === INSTALLATION_NAME;
  })[0];
  if (at === undefined || !WRITES.has(planned.kindAt(at)) || !operatorImage) return;
  const inst = planned.get(at);
  const pools = new Map<string, KubeObject>();
  const poolCrd = liveCrds.get(crdKey(CALICO_CRD_GROUP, 'IPPool'));
  if (poolCrd) for (const p of await client.listAll(crdResourceType(poolCrd))) pools.set(p.metadata.name, p);
  for (const i of planned.where((i) => planned.headAt(i).kind === 'IPPool' && groupOf(planned.headAt(i).apiVersion) === CALICO_CRD_GROUP))
    if (!NOT_RESTORED.has(planned.kindAt(i))) pools.set(planned.refAt(i).name, desiredOf(planned.get(i)));
  const refusal = judgeInstallationPools(desiredOf(inst), [...pools.values()], operatorImage);
  if (!refusal) return;
  inst.action.action = 'refused';
  inst.action.reason = refusal.reason;
  inst.action.fix = refusal.fix;
  planned.set(at, inst);
}
