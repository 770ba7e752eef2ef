#!/usr/bin/env node
/**
 * Plays the kubelet for Calico's control-plane programs on the local cluster: follows the objects a real
 * cluster would run as pods and runs the real programs out of cluster instead, all bound to 127.x:
 * - the `tigera-operator` Deployment: image tag -> that operator's binary, replicas 0 -> stopped;
 * - the operator-rendered Calico API server (Deployment calico-apiserver, Service calico-api, secret
 *   calico-apiserver-certs, in namespace calico-apiserver or, from 3.31, calico-system) -> the Calico API server on
 *   the Service's loopback ClusterIP and port;
 * - a calico-kube-controllers Deployment -> kube-controllers with the node controller (node and IPAM clean-up);
 * both from the Calico tree of the rendered image's minor (calicoProgramsFor).
 * Started detached by LocalCluster.startCalico(); its children share its process group, so stopping the
 * group stops everything. With --node-side, also Calico's node side per kwok node (node-side.ts).
 * Usage: calico-supervisor.js <work dir> <kubeconfig> [--node-side <netns prefix>]
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { K } from '../../kube/builtin.js';
import { KubeApiError, KubeClient } from '../../kube/client.js';
import type { KubeObject, ResourceType } from '../../kube/types.js';
import { BuildProcessLostError, calicoProgramsFor, ensureCalicoProgram } from './calico-programs.js';
import { etcdMetricsOff, kubeControllersEtcdEnv } from './kube-controllers-etcd.js';
import { NodeSide, type NodeSideStatus } from './node-side.js';
import { sleep, Slot } from './slot.js';
import { desiredApiServer, desiredKubeControllers, desiredOperator, OPERATOR_POD_FINALIZER, operatorPodActions } from './calico-desired.js';

const KCC: ResourceType = {
  group: 'crd.projectcalico.org',
  version: 'v1',
  plural: 'kubecontrollersconfigurations',
  kind: 'KubeControllersConfiguration',
  namespaced: false,
};

export interface SupervisorStatus {
  pid: number;
  updatedAt: string;
  /** `starts`: how often the program of this tag was started since the slot last ran another one (1: no restart). */
  operator?: { tag: string; pid?: number; startedAt?: string; starts?: number; error?: string };
  /** `calico`: the Calico tree whose program runs (or would run) for the rendered image's tag. */
  apiserver?: { address: string; port: number; calico?: string; pid?: number; startedAt?: string; error?: string };
  kubeControllers?: { calico?: string; pid?: number; startedAt?: string; error?: string };
  /** Calico's node side per kwok node and the pods the CNI plugin served (only when started with --node-side). */
  nodeSide?: NodeSideStatus & { error?: string };
}

export const SUPERVISOR_STATUS_FILE = 'calico-supervisor.json';
const API_SERVER_NAMESPACES = ['calico-system', 'calico-apiserver'];
const OPERATOR_NAMESPACE = 'tigera-operator';

export class CalicoSupervisor {
  private readonly operator: Slot;
  private readonly apiserver: Slot;
  private readonly kubeControllers: Slot;
  private readonly bins = new Map<string, string | Promise<string> | Error>();
  private stopping = false;

  constructor(
    private readonly client: KubeClient,
    private readonly workDir: string,
    private readonly kubeconfig: string,
    private readonly log: (line: string) => void,
    private readonly nodeSide?: NodeSide,
  ) {
    this.operator = new Slot('tigera-operator', workDir, log);
    this.apiserver = new Slot('calico-apiserver', workDir, log);
    this.kubeControllers = new Slot('calico-kube-controllers', workDir, log);
  }

  /** A built program's bin dir, or undefined while it builds (the build runs in the background). */
  private bin(kind: 'operator' | 'calico', tag: string): string | undefined {
    const k = `${kind} ${tag}`;
    const got = this.bins.get(k);
    if (typeof got === 'string') return got;
    if (got instanceof Error) throw got;
    if (!got) {
      this.log(`preparing ${k}`);
      const p = ensureCalicoProgram(kind, tag, this.log).then(
        (dir) => void this.bins.set(k, dir),
        (err: Error) => {
          this.log(err.message);
          // A lost build process is prepared again at the next tick; a failed build stays failed (status.error).
          if (err instanceof BuildProcessLostError) this.bins.delete(k);
          else this.bins.set(k, err);
        },
      );
      this.bins.set(k, p as unknown as Promise<string>);
    }
    return undefined;
  }

  /** The bin dir of the Calico tree serving an image tag; a tag no pinned tree serves, or a failed build, is reported in `into.error`. */
  private treeBin(tree: string | undefined, tag: string | undefined, into: { error?: string }): string | undefined {
    if (!tree) {
      into.error = `no pinned Calico tree serves image tag ${tag ?? '(none)'} (calico-programs.ts CALICO_PROGRAMS_FOR_MINOR)`;
      return undefined;
    }
    try {
      return this.bin('calico', tree);
    } catch (err) {
      into.error = (err as Error).message;
      return undefined;
    }
  }

  private get env(): Record<string, string> {
    return { KUBECONFIG: this.kubeconfig, DATASTORE_TYPE: 'kubernetes' };
  }

  async tick(): Promise<SupervisorStatus> {
    const status: SupervisorStatus = { pid: process.pid, updatedAt: new Date().toISOString() };
    const get = (r: ResourceType, ns: string | undefined, name: string) => this.client.getOrUndefined(r, ns, name);

    // The operator: one binary per image tag.
    const op = desiredOperator(await get(K.deployment, OPERATOR_NAMESPACE, 'tigera-operator'), await get(K.namespace, undefined, OPERATOR_NAMESPACE));
    if (this.operator.running && this.operator.running.key !== op?.tag) await this.operator.stop();
    await this.followOperatorPods();
    if (op) {
      status.operator = { tag: op.tag };
      try {
        const dir = this.bin('operator', op.tag);
        if (dir) {
          const args = ['--enable-leader-election=false', ...op.args];
          this.operator.ensure(op.tag, path.join(dir, 'operator'), args, { ...this.env, OPERATOR_NAMESPACE: 'tigera-operator' });
        }
      } catch (err) {
        status.operator.error = (err as Error).message;
      }
      Object.assign(status.operator, running(this.operator));
    }

    // The Calico API server behind the aggregation layer: namespace calico-apiserver up to operator v1.38 (3.30),
    // calico-system from v1.40 (3.31; tigera/operator pkg/render/apiserver.go APIServerNamespace). While an upgrade
    // moves it, the one that wants a replica and has its Service and certificate runs, the newer place first.
    // After a downgrade below 3.31 both exist for a while (v1.38 does not remove v1.40's): the one the APIService
    // names is the one the aggregator dials, as in a cluster where both would run.
    const apiService = await get(K.apiService, undefined, 'v3.projectcalico.org');
    const named: string | undefined = apiService?.spec?.service?.namespace;
    let api: ReturnType<typeof desiredApiServer>;
    for (const ns of named ? [named] : API_SERVER_NAMESPACES) {
      api = desiredApiServer(
        await get(K.deployment, ns, 'calico-apiserver'),
        await get(K.service, ns, 'calico-api'),
        await get(K.secret, ns, 'calico-apiserver-certs'),
      );
      if (api) break;
    }
    const apiTree = calicoProgramsFor(api?.tag);
    const apiKey = api && apiTree ? `${apiTree} ${api.fingerprint}` : undefined;
    if (this.apiserver.running && this.apiserver.running.key !== apiKey) await this.apiserver.stop();
    if (api) {
      status.apiserver = { address: api.address, port: api.port, calico: apiTree };
      const dir = this.treeBin(apiTree, api.tag, status.apiserver);
      if (dir && apiKey && !this.apiserver.alive()) {
        const certDir = path.join(this.workDir, 'calico-apiserver-certs');
        mkdirSync(certDir, { recursive: true, mode: 0o700 });
        writeAtomic(path.join(certDir, 'tls.crt'), api.cert);
        writeAtomic(path.join(certDir, 'tls.key'), api.key);
        const kc = `--kubeconfig=${this.kubeconfig}`;
        this.apiserver.ensure(
          apiKey,
          path.join(dir, 'apiserver'),
          [
            `--secure-port=${api.port}`,
            `--bind-address=${api.address}`,
            kc,
            `--authentication-kubeconfig=${this.kubeconfig}`,
            `--authorization-kubeconfig=${this.kubeconfig}`,
            `--tls-cert-file=${certDir}/tls.crt`,
            `--tls-private-key-file=${certDir}/tls.key`,
          ],
          this.env,
        );
      }
      Object.assign(status.apiserver, running(this.apiserver));
    }

    // calico-kube-controllers: IPAM garbage collection and the node controller.
    const manifestKc = await get(K.deployment, 'kube-system', 'calico-kube-controllers');
    const kcWanted = desiredKubeControllers([await get(K.deployment, 'calico-system', 'calico-kube-controllers'), manifestKc]);
    // calico-etcd.yaml's Deployment: the etcd datastore, its env as the Deployment says (kube-controllers-etcd.ts).
    const kcEtcd = kcWanted ? await kubeControllersEtcdEnv(this.client, manifestKc, path.join(this.workDir, 'calico-secrets')) : undefined;
    const kcTree = calicoProgramsFor(kcWanted?.tag);
    const kcKey = kcEtcd && kcTree ? `${kcTree} etcd` : kcTree;
    if (this.kubeControllers.running && this.kubeControllers.running.key !== kcKey) await this.kubeControllers.stop();
    if (kcWanted) {
      status.kubeControllers = { calico: kcTree, ...(kcEtcd?.missing ? { error: kcEtcd.missing } : {}) };
      const dir = this.treeBin(kcTree, kcWanted.tag, status.kubeControllers);
      if (dir && kcKey && kcEtcd && !kcEtcd.missing && !this.kubeControllers.alive() && (await etcdMetricsOff(dir, { ...this.env, ...kcEtcd.env }))) {
        const env = { ...this.env, ...kcEtcd.env };
        this.kubeControllers.ensure(kcKey, path.join(dir, 'kube-controllers'), ['-status-file', path.join(this.workDir, 'kube-controllers-status.json')], env);
      } else if (dir && kcTree && !kcEtcd && !this.kubeControllers.alive() && (await this.metricsOff())) {
        this.kubeControllers.ensure(kcTree, path.join(dir, 'kube-controllers'), ['-status-file', path.join(this.workDir, 'kube-controllers-status.json')], {
          ...this.env,
          // In 3.28-3.30 IPAM garbage collection is part of the node controller (a separate 'ipam' name is rejected).
          ENABLED_CONTROLLERS: 'node',
        });
      }
      Object.assign(status.kubeControllers, running(this.kubeControllers));
    }

    if (this.nodeSide) {
      try {
        status.nodeSide = await this.nodeSide.tick();
      } catch (err) {
        status.nodeSide = { nodes: {}, pods: {}, error: (err as Error).message };
      }
    }
    return status;
  }

  /**
   * Plays the kubelet's part for the operator's pods: a live pod is held by OPERATOR_POD_FINALIZER, a deleted one
   * is let go only once its process has stopped, so "no operator pod left" means "no operator process left".
   */
  private async followOperatorPods(): Promise<void> {
    const pods = await this.client.listAll<KubeObject>(K.pod, { namespace: OPERATOR_NAMESPACE });
    const act = operatorPodActions(pods, this.operator.alive() ? this.operator.running!.key : undefined);
    if (act.stop) await this.operator.stop();
    for (const pod of act.release) await this.holdPod(pod, false);
    for (const pod of act.hold) await this.holdPod(pod, true);
  }

  /** Add or remove the finalizer; a pod that changed or went meanwhile is looked at again on the next tick. */
  private async holdPod(pod: KubeObject, hold: boolean): Promise<void> {
    const others = (pod.metadata.finalizers ?? []).filter((f) => f !== OPERATOR_POD_FINALIZER);
    const finalizers = hold ? [...others, OPERATOR_POD_FINALIZER] : others.length ? others : null;
    try {
      await this.client.mergePatch(K.pod, OPERATOR_NAMESPACE, pod.metadata.name!, { metadata: { resourceVersion: pod.metadata.resourceVersion, finalizers } });
      if (!hold) this.log(`released operator pod ${pod.metadata.name}`);
    } catch (err) {
      if (!(err instanceof KubeApiError && (err.statusCode === 404 || err.statusCode === 409))) throw err;
    }
  }

  /** At shutdown: no pod may stay held by a supervisor that no longer runs (its namespace could never go). */
  private async releaseOperatorPods(): Promise<void> {
    try {
      const pods = await this.client.listAll<KubeObject>(K.pod, { namespace: OPERATOR_NAMESPACE });
      for (const pod of pods) if (pod.metadata.finalizers?.includes(OPERATOR_POD_FINALIZER)) await this.holdPod(pod, false);
    } catch (err) {
      this.log(`could not release the operator pods: ${(err as Error).message}`);
    }
  }

  /**
   * kube-controllers serves Prometheus metrics on every interface (:9094) unless its configuration `default`
   * says port 0; set that first. False while the CRD does not exist yet.
   */
  private async metricsOff(): Promise<boolean> {
    try {
      const kcc = await this.client.getOrUndefined(KCC, undefined, 'default');
      if (!kcc) {
        await this.client.create(KCC, {
          apiVersion: 'crd.projectcalico.org/v1',
          kind: 'KubeControllersConfiguration',
          metadata: { name: 'default' },
          spec: { controllers: { node: { reconcilerPeriod: '5m' } }, prometheusMetricsPort: 0 },
        });
      } else if (kcc.spec?.prometheusMetricsPort !== 0) {
        await this.client.mergePatch(KCC, undefined, 'default', { spec: { prometheusMetricsPort: 0 } });
      }
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && (err.statusCode === 404 || err.statusCode === 409)) return false;
      throw err;
    }
  }

  async run(statusFile: string): Promise<void> {
    const onSignal = () => void (this.stopping = true);
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    while (!this.stopping) {
      try {
        writeAtomic(statusFile, JSON.stringify(await this.tick(), null, 2));
      } catch (err) {
        this.log(`tick failed: ${(err as Error).message}`);
      }
      for (let i = 0; i < 10 && !this.stopping; i++) await sleep(100);
    }
    await Promise.all([this.operator.stop(), this.apiserver.stop(), this.kubeControllers.stop(), this.nodeSide?.stop()]);
    await this.releaseOperatorPods();
  }
}

function running(s: Slot): { pid?: number; startedAt?: string; starts?: number } {
  return s.alive() ? { pid: s.running!.child.pid, startedAt: s.running!.startedAt, starts: s.starts.n } : {};
}

function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}

async function main(): Promise<void> {
  const [workDir, kubeconfig, flag, netnsPrefix] = process.argv.slice(2);
  if (!workDir || !kubeconfig || (flag !== undefined && (flag !== '--node-side' || !netnsPrefix))) {
    process.stderr.write('usage: calico-supervisor.js <work dir> <kubeconfig> [--node-side <netns prefix>]\n');
    process.exit(2);
  }
  const log = (l: string) => process.stdout.write(`${new Date().toISOString()} ${l}\n`);
  const client = await KubeClient.connect({ kubeconfig });
  const nodeSide = flag ? new NodeSide(client, workDir, kubeconfig, netnsPrefix!, log) : undefined;
  await new CalicoSupervisor(client, workDir, kubeconfig, log, nodeSide).run(path.join(workDir, SUPERVISOR_STATUS_FILE));
  client.close();
  process.exit(0);
}

if (process.argv[1] && /calico-supervisor\.[jt]s$/.test(process.argv[1])) {
  main().catch((err) => {
    process.stderr.write(`calico-supervisor: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
