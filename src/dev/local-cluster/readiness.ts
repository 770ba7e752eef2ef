/**
 * When the local cluster is usable: `npm run cluster -- up` returns only once every condition of its list holds
 * (the API server; with --calico the v3 API, the operator's report, the default pools, the programs the supervisor
 * runs). A condition is a name and a check, so what another part of the harness starts (the node-side programs)
 * adds its own conditions to the list without touching the wait.
 */
import { operatorPoolBehaviour } from '../../calico/knowledge.js';
import { K } from '../../kube/builtin.js';
import type { KubeClient } from '../../kube/client.js';
import type { KubeObject, ResourceType } from '../../kube/types.js';
import type { CalicoInstallMode } from './calico-install.js';
import type { SupervisorStatus } from './calico-supervisor.js';
import { etcdRange, type CalicoEtcd } from './calico-etcd.js';

export interface ReadinessCondition {
  /** What is waited for, as the progress line and the timeout name it: "APIService v3.projectcalico.org Available". */
  name: string;
  /** undefined once the condition holds; otherwise what is seen now ("no APIService", "Available False"). */
  check(): Promise<string | undefined>;
}

export class NotReadyError extends Error {
  constructor(
    readonly missing: { name: string; seen: string }[],
    timeoutMs: number,
  ) {
    super(`not ready after ${Math.round(timeoutMs / 1000)} s: ${missing.map((m) => `${m.name} (${m.seen})`).join('; ')}`);
  }
}

export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Called after each round with the conditions not met yet (empty once all hold). */
  onRound?: (missing: { name: string; seen: string }[], elapsedMs: number) => void;
}

/** Check every condition each round until all hold in the same round; a check that throws counts as not met. */
export async function waitUntilReady(conditions: readonly ReadinessCondition[], opts: WaitOptions): Promise<void> {
  const started = Date.now();
  for (;;) {
    const missing: { name: string; seen: string }[] = [];
    for (const c of conditions) {
      const seen = await c.check().catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
      if (seen !== undefined) missing.push({ name: c.name, seen });
    }
    const elapsed = Date.now() - started;
    opts.onRound?.(missing, elapsed);
    if (!missing.length) return;
    if (elapsed >= opts.timeoutMs) throw new NotReadyError(missing, opts.timeoutMs);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 1000));
  }
}

const condition = (name: string, check: () => Promise<string | undefined>): ReadinessCondition => ({ name, check });

/** The control plane's processes run and the Kubernetes API server answers /readyz (LocalCluster.isUp). */
export function apiServerConditions(isUp: () => Promise<boolean>): ReadinessCondition[] {
  return [condition('Kubernetes API server ready (/readyz)', async () => ((await isUp()) ? undefined : 'not ready'))];
}

const TIGERA_STATUS: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'tigerastatuses', kind: 'TigeraStatus', namespaced: false };
const INSTALLATION: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };
const IPPOOL: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ippools', kind: 'IPPool', namespaced: false };

type Program = 'operator' | 'apiserver' | 'kubeControllers';
const PROGRAM_NAMES: Record<Program, string> = { operator: 'tigera operator', apiserver: 'Calico API server', kubeControllers: 'calico-kube-controllers' };

/** A program the Calico supervisor runs: started, and no error (a build that failed, a tag no tree serves). */
export function programRunning(status: () => SupervisorStatus | undefined, program: Program): ReadinessCondition {
  return condition(`${PROGRAM_NAMES[program]} running (Calico supervisor)`, async () => {
    const st = status();
    if (!st) return 'the Calico supervisor is not running';
    const p = st[program];
    if (!p) return 'not asked for by the installed objects yet';
    if (p.error) return p.error;
    return p.pid ? undefined : 'starting (a first build of the program takes minutes)';
  });
}

function conditionOf(o: KubeObject | undefined, type: string): string | undefined {
  return o?.status?.conditions?.find((c: { type: string }) => c.type === type)?.status;
}

/** The pools the Installation lists, by the names the operator gives them (3.27's entries have none: the default names). */
export function installationPoolNames(installation: KubeObject | undefined): string[] {
  const pools: { name?: string; cidr?: string }[] = installation?.spec?.calicoNetwork?.ipPools ?? [];
  return pools.map((p) => p.name ?? (p.cidr?.includes(':') ? 'default-ipv6-ippool' : 'default-ipv4-ippool'));
}

/**
 * What a Calico install of `version` by `mode` has once it is usable on the local cluster. Node-side programs
 * (calico-node, the CNI plugin) are not in this list: nodeSideConditions adds them where the harness runs them.
 */
export function calicoConditions(
  client: KubeClient,
  status: () => SupervisorStatus | undefined,
  version: string,
  mode: CalicoInstallMode,
): ReadinessCondition[] {
  if (mode === 'manifest') {
    // calico.yaml has no Calico API server and no operator; its pools are created by calico-node (node side).
    return [
      condition('CRD ippools.crd.projectcalico.org Established', async () => {
        const crd = await client.getOrUndefined(K.crd, undefined, 'ippools.crd.projectcalico.org');
        return conditionOf(crd, 'Established') === 'True' ? undefined : crd ? 'not Established' : 'not created';
      }),
      programRunning(status, 'kubeControllers'),
    ];
  }
  const list = [
    programRunning(status, 'operator'),
    programRunning(status, 'apiserver'),
    programRunning(status, 'kubeControllers'),
    condition('APIService v3.projectcalico.org Available', async () => {
      const svc = await client.request<KubeObject>('GET', '/apis/apiregistration.k8s.io/v1/apiservices/v3.projectcalico.org').catch(() => undefined);
      const available = svc?.status?.conditions?.find((c: { type: string }) => c.type === 'Available');
      if (available?.status === 'True') return undefined;
      return svc ? `Available ${available?.status ?? 'not reported'}${available?.reason ? ` (${available.reason})` : ''}` : 'no APIService';
    }),
    condition('TigeraStatus calico Available', async () => {
      const ts = await client.getOrUndefined(TIGERA_STATUS, undefined, 'calico').catch(() => undefined);
      if (!ts) return 'not reported yet';
      const [a, d] = [conditionOf(ts, 'Available'), conditionOf(ts, 'Degraded')];
      return a === 'True' && d !== 'True' ? undefined : `Available ${a ?? '-'}, Degraded ${d ?? '-'}`;
    }),
  ];
  // An operator that manages pools creates the Installation's pools itself; before 3.28 calico-node does (node side).
  if (operatorPoolBehaviour(version.startsWith('v') ? version : `v${version}`).managesPools) {
    list.push(
      condition("the Installation's default pools present", async () => {
        const names = installationPoolNames(await client.getOrUndefined(INSTALLATION, undefined, 'default'));
        if (!names.length) return 'the Installation lists no pool yet';
        const missing: string[] = [];
        for (const n of names) if (!(await client.getOrUndefined(IPPOOL, undefined, n))) missing.push(n);
        return missing.length ? `missing ${missing.join(', ')}` : undefined;
      }),
    );
  }
  return list;
}

/**
 * With the node side running (calico-node's start-up and tunnel allocator per node): every node that has a
 * calico-node pod finished start-up and runs its allocator, and a pool exists (before 3.28, and with calico.yaml,
 * calico-node's start-up is what creates the default pool, so this is the pool condition of those installs).
 */
export function nodeSideConditions(client: KubeClient, status: () => SupervisorStatus | undefined, etcd?: CalicoEtcd): ReadinessCondition[] {
  return [
    condition('calico-node started and its tunnel allocator running on every node', async () => {
      const side = status()?.nodeSide;
      if (!side) return 'not reported yet';
      if (side.error) return side.error;
      const nodes = Object.entries(side.nodes);
      if (!nodes.length) return 'no node runs a calico-node pod yet';
      const waiting = nodes.filter(([, n]) => n.startup !== 'done' || !n.allocator?.pid);
      return waiting.length ? waiting.map(([name, n]) => `${name}: start-up ${n.startup}${n.error ? ` (${n.error})` : ''}`).join('; ') : undefined;
    }),
    etcd
      ? // On the etcd datastore (calico-etcd.yaml) the pool start-up creates is a key in the Calico etcd.
        condition('an IP pool present in the Calico etcd', async () =>
          (await etcdRange(etcd, '/calico/resources/v3/projectcalico.org/ippools/')).length ? undefined : 'no IPPool',
        )
      : condition('an IP pool present', async () => ((await client.listAll(IPPOOL).catch(() => [])).length ? undefined : 'no IPPool')),
  ];
}
