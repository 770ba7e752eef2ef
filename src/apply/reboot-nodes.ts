/**
 * Apply time of the rolling node step of a plan (`plan --reboot-nodes`): one node at a time, cordon, drain through the
 * Eviction API (PodDisruptionBudgets respected), reboot through the node's provider, wait until the node has
 * really rebooted and is Ready with its DaemonSet pods Ready, uncordon.
 *
 * Each node is resolved again (as at plan time, src/plan/rolling-nodes.ts) and refused if it now runs on another
 * machine.
 *
 * Resumable per node: the node's phase is remembered in the journal before each action. "Really rebooted" is
 * the kubelet's `status.nodeInfo.bootID` changing (a node that was merely Ready all along has not rebooted);
 * the bootID before the reboot is remembered too, so a resumed run that finds it already changed does not
 * reboot the machine a second time.
 */
import { parseDuration } from '../config/config.js';
import { cordon, drainNode, isNodeReady, podsToEvict, uncordon } from '../drain/drain.js';
import { EnvironmentError, errorMessage, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import type { RollingNodes } from '../plan/types.js';
import { chooseProvider, nodeInfo } from '../providers/resolve.js';
import { openRollingProviders } from '../plan/rolling-nodes.js';

/** What the journal keeps per node. */
interface NodeProgress {
  phase: 'draining' | 'rebooting' | 'rebooted' | 'done';
  /** The node's bootID before the reboot ('' when the kubelet reports none). */
  bootID: string;
}

const progressKey = (node: string) => `reboot-nodes/${node}`;
const bootIdOf = (n: KubeObject | undefined): string => n?.status?.nodeInfo?.bootID ?? '';

/** What the step needs of the executor's runtime (its StepRuntime has these): the journal and the reporter. */
export interface RollingRuntime {
  remember(key: string, value: unknown): void;
  recall<T = unknown>(key: string): T | undefined;
  reporter: Reporter;
}

/** Apply time: the step itself. Returns the one-line summary the executor journals. */
export async function rebootNodes(client: KubeClient, rolling: RollingNodes, rt: RollingRuntime): Promise<string> {
  const { reporter } = rt;
  const drainTimeoutMs = parseDuration(rolling.drainTimeout, 'drainTimeout');
  const readyTimeoutMs = parseDuration(rolling.readyTimeout, 'readyTimeout');
  const { providers, mapping } = await openRollingProviders(rolling, reporter);
  const total = rolling.nodes.length;
  let rebootedNow = 0;
  try {
    for (const [i, planned] of rolling.nodes.entries()) {
      const { node } = planned;
      const show = (status: string, done = false) =>
        reporter.progress({ id: 'reboot-nodes', label: `reboot nodes (${node})`, current: i + (done ? 1 : 0), total, status, done: done && i + 1 === total });
      let st = rt.recall<NodeProgress>(progressKey(node));
      if (st?.phase === 'done') {
        reporter.info('CNR_REBOOT_NODE_SKIP', `${node}: rebooted by an earlier run (journal)`, { node });
        show('done earlier', true);
        continue;
      }
      const live = await client.getOrUndefined(K.node, undefined, node);
      if (!live) throw new RefusedError(`node ${node} is not in the cluster any more`, { hint: 'make a new plan' });
      // One node at a time means never taking a second node out while another is down.
      const down: string[] = [];
      for (const other of rolling.nodes) {
        if (other.node === node) continue;
        const o = await client.getOrUndefined(K.node, undefined, other.node);
        if (o && !isNodeReady(o)) down.push(other.node);
      }
      if (down.length)
        throw new EnvironmentError(`not rebooting ${node}: node(s) ${down.join(', ')} are not Ready, and only one node may be out at a time`, {
          hint: 'bring them back, then continue with `cni-rewind apply PLAN --resume`',
        });

      const provider = await providers.get(planned.provider);
      const info = nodeInfo(live);
      const target = await provider.resolve(info, chooseProvider(info, mapping, planned.provider).entry);
      if (!target) throw new RefusedError(`node ${node}: provider ${planned.provider} cannot find its machine ${planned.machine} any more`);
      if (target.machine !== planned.machine)
        throw new RefusedError(`node ${node} now runs on ${target.machine}, the plan was made when it ran on ${planned.machine}`, { hint: 'make a new plan' });
      if (!provider.reboot)
        throw new RefusedError(`node ${node}: provider ${planned.provider} cannot reboot machines (it has no reboot)`, {
          hint: 'make a new plan without --reboot-nodes, or use a provider that can reboot',
        });

      const remember = (next: NodeProgress) => {
        rt.remember(progressKey(node), next);
        st = next;
      };
      try {
        if (!st) remember({ phase: 'draining', bootID: bootIdOf(live) });
        if (st!.phase === 'draining') {
          show('cordon + drain');
          await cordon(client, node);
          await drainNode(client, node, { timeoutMs: drainTimeoutMs }, reporter);
          // Pods that tolerate every taint (the tigera-operator does) may be scheduled straight back onto the
          // cordoned node; evicting them again would only repeat that. Name them: the reboot restarts them.
          const back = await podsToEvict(client, node);
          if (back.length)
            reporter.warn(
              'CNR_REBOOT_PODS_CAME_BACK',
              `${node}: ${back.length} pod(s) tolerating the cordon were scheduled back onto it and restart with the reboot: ${back.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).join(', ')}`,
              { node },
            );
          remember({ ...st!, phase: 'rebooting' });
        }
        if (st!.phase === 'rebooting') {
          const nowBoot = bootIdOf(await client.getOrUndefined(K.node, undefined, node));
          if (st!.bootID && nowBoot && nowBoot !== st!.bootID) {
            // A run killed right after asking for the reboot: the machine did reboot, do not reboot it again.
            reporter.info('CNR_REBOOT_NODE_ALREADY', `${node}: already rebooted by the interrupted run (boot id changed), not rebooting again`, { node });
          } else {
            show(`reboot ${planned.provider} ${planned.machine}`);
            reporter.info('CNR_REBOOT_NODE', `${node}: rebooting ${planned.provider} machine ${planned.machine}`, {
              node,
              provider: planned.provider,
              machine: planned.machine,
            });
            await provider.reboot!(target);
            rebootedNow++;
          }
          remember({ ...st!, phase: 'rebooted' });
        }
        show('wait until rebooted and Ready');
        await waitRebooted(client, node, st!.bootID, readyTimeoutMs, reporter);
        await waitDaemonPodsReady(client, node, readyTimeoutMs);
        await uncordon(client, node);
        remember({ ...st!, phase: 'done' });
        reporter.info('CNR_REBOOT_NODE_DONE', `${node}: rebooted, Ready and uncordoned (${i + 1}/${total})`, { node });
        show('done', true);
      } catch (err) {
        reporter.progress({ id: 'reboot-nodes', label: `reboot nodes (${node})`, current: i, total, status: 'failed', done: true });
        // The executor journals and shows this message only (not a hint), so it carries the way out itself.
        throw new EnvironmentError(
          `node ${node} (${st?.phase ?? 'before cordon'}): ${errorMessage(err)}; the node is left cordoned (\`kubectl uncordon ${node}\` gives it back without a reboot), the nodes after it were not touched`,
          { cause: err },
        );
      }
    }
  } finally {
    await providers.closeAll();
  }
  return `${total} node(s) rebooted one at a time (${rebootedNow} reboot(s) in this run): ${rolling.nodes.map((n) => n.node).join(', ')}`;
}

/**
 * Wait until the node runs a new boot (its bootID differs from the one before the reboot) and is Ready.
 * A kubelet that reports no bootID gives no way to tell; then Ready is all we can wait for, and we say so.
 */
async function waitRebooted(client: KubeClient, node: string, bootBefore: string, timeoutMs: number, reporter: Reporter): Promise<void> {
  if (!bootBefore)
    reporter.warn('CNR_REBOOT_NO_BOOT_ID', `${node}: the kubelet reports no bootID, so the reboot cannot be confirmed; waiting for Ready only`, { node });
  await client.waitFor(
    `node ${node} to come back Ready after its reboot`,
    async () => {
      const n = await client.getOrUndefined(K.node, undefined, node);
      if (!n || !isNodeReady(n)) return undefined;
      return !bootBefore || (bootIdOf(n) && bootIdOf(n) !== bootBefore) ? true : undefined;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

/** The node's DaemonSet pods (calico-node, kube-proxy, ...) Ready again: the node is back in the network. */
async function waitDaemonPodsReady(client: KubeClient, node: string, timeoutMs: number): Promise<void> {
  await client.waitFor(
    `the DaemonSet pods on node ${node} to be Ready`,
    async () => {
      const pods = await client.listAll(K.pod, { fieldSelector: `spec.nodeName=${node}` });
      const ds = pods.filter(
        (p) => p.metadata.ownerReferences?.some((o) => o.kind === 'DaemonSet') && !p.metadata.deletionTimestamp && p.status?.phase !== 'Succeeded',
      );
      return ds.every((p) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')) ? true : undefined;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}
