import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import path from 'node:path';
import { K } from '../../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../../kube/client.js';
import type { KubeObject } from '../../kube/types.js';
import { serveUnixToTcp } from './api-bridge.js';
import { ensureCalicoProgram, nodeSideFor } from './calico-programs.js';
import { deleteNetns, ensureNetns, netnsPath } from './netns.js';
import { NodeBridge, refusedByBridge } from './node-side-bridge.js';
import { CALICO_NODE_SELECTOR, cniPluginConfig, nodeAddresses, nodeSideEnv, podsForCni, wantedNodeSides, type NodeSideWanted } from './node-side-desired.js';
import { loopbackEtcdPort, writeSecretVolumes } from './node-side-etcd.js';
import { Slot } from './slot.js';

/**
 * Calico's node side for each kwok node, run as a kubelet would run the calico-node pod and call the CNI plugin
 * (docs/node-side.md): calico-node's start-up once per calico-node pod, then its tunnel-address allocator
 * until the pod goes; the real `calico` CNI plugin (with `calico-ipam`) ADD for each pod on a ready node, in a
 * network namespace made for the pod, its address written into the pod's status; DEL when the pod is deleted.
 */
export interface NodeSideStatus {
  nodes: Record<string, { calico?: string; startup: string; allocator?: { pid?: number; startedAt?: string; starts?: number }; error?: string }>;
  pods: Record<string, { node: string; ip?: string; netns: string; error?: string }>;
}

interface NodeRun {
  key: string;
  wanted: NodeSideWanted;
  tree: string;
  startup: 'waiting' | 'running' | 'done' | 'failed';
  startupChild?: ChildProcess;
  lastStartup: number;
  allocator: Slot;
  bridge: NodeBridge;
  /** On the etcd datastore: the Calico etcd's port carried into the node's namespace, beside the API server's. */
  etcdBridge?: NodeBridge;
  error?: string;
}

/** A pod the CNI plugin was called for (kept on disk so that a restarted supervisor still runs its DEL). */
interface PodNet {
  namespace: string;
  name: string;
  uid: string;
  node: string;
  containerID: string;
  netns: string;
  ip?: string;
  error?: string;
  lastTry?: number;
  /** Its DEL waits for the node's next calico-node (said once in the log). */
  waiting?: boolean;
}

export class NodeSide {
  private readonly nodes = new Map<string, NodeRun>();
  private readonly bins = new Map<string, string | Error | 'building'>();
  private readonly dir: string;
  private readonly podsFile: string;
  private pods: Record<string, PodNet>;
  private apiBridge?: Server;
  private etcdServer?: Server;
  private port?: number;

  constructor(
    private readonly client: KubeClient,
    private readonly workDir: string,
    private readonly kubeconfig: string,
    private readonly netnsPrefix: string,
    private readonly log: (line: string) => void,
  ) {
    this.dir = path.join(workDir, 'node-side');
    mkdirSync(this.dir, { recursive: true });
    this.podsFile = path.join(this.dir, 'pods.json');
    this.pods = existsSync(this.podsFile) ? (JSON.parse(readFileSync(this.podsFile, 'utf8')) as Record<string, PodNet>) : {};
  }

  private bin(tree: string): string | undefined {
    const got = this.bins.get(tree);
    if (got instanceof Error) throw got;
    if (got === 'building') return undefined;
    if (got) return got;
    this.bins.set(tree, 'building');
    this.log(`preparing node-side ${tree}`);
    ensureCalicoProgram('node-side', tree, this.log).then(
      (dir) => void this.bins.set(tree, dir),
      (err: Error) => void this.bins.set(tree, err),
    );
    return undefined;
  }

  async tick(): Promise<NodeSideStatus> {
    const cms = new Map<string, KubeObject | undefined>();
    const calicoNodePods = await this.client.listAll<KubeObject>(K.pod, { labelSelector: CALICO_NODE_SELECTOR });
    for (const p of calicoNodePods) {
      for (const c of [...(p.spec?.containers ?? []), ...(p.spec?.initContainers ?? [])])
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.configMapKeyRef;
          const k = `${p.metadata.namespace}/${ref?.name}`;
          if (ref && !cms.has(k)) cms.set(k, await this.client.getOrUndefined(K.configMap, p.metadata.namespace, ref.name));
        }
    }
    const wanted = wantedNodeSides(calicoNodePods, (ns, name, key) => cms.get(`${ns}/${name}`)?.data?.[key]);
    const status: NodeSideStatus = { nodes: {}, pods: {} };
    const seen = new Set<string>();
    const addresses = nodeAddresses(await this.client.listAll<KubeObject>(K.node));
    for (const w of wanted) {
      seen.add(w.node);
      status.nodes[w.node] = await this.followNode(w, addresses.get(w.node) ?? '127.0.1.250');
    }
    for (const [node, run] of this.nodes) if (!seen.has(node)) await this.stopNode(node, run);
    await this.followPods(new Set([...this.nodes].filter(([, r]) => r.startup === 'done').map(([n]) => n)));
    for (const p of Object.values(this.pods)) status.pods[`${p.namespace}/${p.name}`] = { node: p.node, ip: p.ip, netns: p.netns, error: p.error };
    return status;
  }

  private async followNode(w: NodeSideWanted, address: string): Promise<NodeSideStatus['nodes'][string]> {
    const tree = nodeSideFor(w.tag);
    if (!tree) return { startup: 'waiting', error: `no pinned Calico tree serves calico-node ${w.tag}` };
    const key = `${w.podUid} ${tree}`;
    let run = this.nodes.get(w.node);
    if (run && run.key !== key) {
      await this.stopNode(w.node, run);
      run = undefined;
    }
    if (!run) {
      run = {
        key,
        wanted: w,
        tree,
        startup: 'waiting',
        lastStartup: 0,
        allocator: new Slot(`tunnel-allocator-${w.node}`, this.dir, this.log),
        bridge: new NodeBridge(`api-bridge-${w.node}`, `${this.netnsPrefix}n-${shortHash(w.node)}`, this.apiPort, this.socket, this.dir, this.log),
      };
      const etcdPort = w.etcd && loopbackEtcdPort(w.env.ETCD_ENDPOINTS);
      if (etcdPort) run.etcdBridge = new NodeBridge(`etcd-bridge-${w.node}`, run.bridge.netns, etcdPort, this.etcdSocket, this.dir, this.log);
      this.nodes.set(w.node, run);
    }
    let dir: string | undefined;
    try {
      dir = this.bin(tree);
    } catch (err) {
      run.error = (err as Error).message;
    }
    const nodeDir = path.join(this.dir, w.node);
    mkdirSync(nodeDir, { recursive: true });
    const env = { ...process.env, ...nodeSideEnv(w, this.kubeconfig, nodeDir, address, this.secretsDir) };
    // On the etcd datastore the certificates come from a Secret volume: its files first, as the kubelet mounts them.
    const missing = w.etcd ? await writeSecretVolumes(this.client, w.etcd.secretMounts, this.secretsDir) : undefined;
    if (missing) run.error = missing;
    if (dir && !missing && (run.startup === 'waiting' || run.startup === 'failed') && Date.now() - run.lastStartup > 5000) {
      // Start-up runs once per calico-node pod and is run again after a failure, as the container would restart.
      run.lastStartup = Date.now();
      run.startup = 'running';
      const out = openSync(path.join(nodeDir, 'startup.log'), 'a');
      const child = spawn(path.join(dir, 'calico-node-lite'), ['-startup'], { stdio: ['ignore', out, out], env });
      run.startupChild = child;
      const r = run;
      child.on('exit', (code) => {
        r.startup = code === 0 ? 'done' : 'failed';
        r.startupChild = undefined;
        this.log(`calico-node start-up on ${w.node}: exit ${code}`);
      });
    }
    if (dir && run.startup === 'done') run.allocator.ensure(key, path.join(dir, 'calico-node-lite'), ['-allocate-tunnel-addrs'], env as Record<string, string>);
    const a = run.allocator;
    return {
      calico: tree,
      startup: run.startup,
      allocator: a.alive() ? { pid: a.running!.child.pid, startedAt: a.running!.startedAt, starts: a.starts.n } : undefined,
      error: run.error,
    };
  }

  private async stopNode(node: string, run: NodeRun): Promise<void> {
    run.startupChild?.kill('SIGKILL');
    await Promise.all([run.allocator.stop(), run.bridge.stop(), run.etcdBridge?.stop()]);
    this.nodes.delete(node);
  }

  private get socket(): string {
    return path.join(this.dir, 'api.sock');
  }

  private get etcdSocket(): string {
    return path.join(this.dir, 'etcd.sock');
  }

  /** The Secret volumes' files (the etcd certificates) of the calico-node pods, for the programs run out of cluster. */
  private get secretsDir(): string {
    return path.join(this.dir, 'secrets');
  }

  private get apiPort(): number {
    return (this.port ??= apiPort(this.kubeconfig));
  }

  /**
   * The namespace of a node (the CNI plugin's "host") with the API server's port carried into it and serving
   * (node-side-bridge.ts), or undefined when its bridge did not answer. A namespace made again here (it was removed
   * under a running bridge) gets a new bridge: the old one serves the namespace that lost the name.
   */
  private async nodeNetns(run: NodeRun): Promise<string | undefined> {
    if (ensureNetns(run.bridge.netns)) await Promise.all([run.bridge.stop(), run.etcdBridge?.stop()]);
    if (!this.apiBridge) this.apiBridge = serveUnixToTcp(this.socket, this.apiPort);
    if (run.etcdBridge) {
      this.etcdServer ??= serveUnixToTcp(this.etcdSocket, loopbackEtcdPort(run.wanted.env.ETCD_ENDPOINTS)!);
      if (!(await run.etcdBridge.ready())) return undefined;
    }
    return (await run.bridge.ready()) ? run.bridge.netns : undefined;
  }

  private async followPods(readyNodes: Set<string>): Promise<void> {
    const all = await this.client.listAll<KubeObject>(K.pod);
    const live = new Map(all.filter((p) => !p.metadata.deletionTimestamp).map((p) => [p.metadata.uid!, p]));
    // DEL first: a pod that was deleted (kwok removes it at once) or moved off the node side.
    for (const [uid, rec] of Object.entries(this.pods)) {
      if (live.has(uid)) continue;
      if (await this.cni('DEL', rec)) {
        deleteNetns(rec.netns);
        delete this.pods[uid];
        this.save();
      }
    }
    for (const pod of podsForCni([...live.values()], readyNodes)) {
      const uid = pod.metadata.uid!;
      let rec = this.pods[uid];
      if (rec?.ip) continue;
      if (rec?.lastTry && Date.now() - rec.lastTry < 2000) continue;
      if (!rec) {
        rec = {
          namespace: pod.metadata.namespace!,
          name: pod.metadata.name!,
          uid,
          node: pod.spec.nodeName,
          containerID: createHash('sha256').update(uid).digest('hex'),
          netns: `${this.netnsPrefix}p-${uid.replaceAll('-', '').slice(0, 16)}`,
        };
        this.pods[uid] = rec;
      }
      rec.lastTry = Date.now();
      ensureNetns(rec.netns);
      const result = await this.cni('ADD', rec);
      const ip = (result?.ips as any[] | undefined)?.[0]?.address?.split('/')[0];
      if (ip) {
        rec.ip = ip;
        rec.error = undefined;
        await this.writePodIp(pod, ip);
      }
      this.save();
    }
  }

  /** The address Calico gave, where `kubectl get pod -o wide` reads it (kwok wrote its own when the pod started). */
  private async writePodIp(pod: KubeObject, ip: string): Promise<void> {
    try {
      await this.client.mergePatch(K.pod, pod.metadata.namespace, pod.metadata.name!, { status: { podIP: ip, podIPs: [{ ip }] } }, { subresource: 'status' });
    } catch (err) {
      if (!(err instanceof KubeApiError && err.statusCode === 404)) throw err;
    }
  }

  /** Runs the CNI plugin in the node's namespace; the parsed result, or undefined (the error kept on the record) to retry. */
  private async cni(command: 'ADD' | 'DEL', rec: PodNet): Promise<Record<string, any> | undefined> {
    const run = this.nodes.get(rec.node);
    const dir = run ? this.bins.get(run.tree) : undefined;
    if (!run || typeof dir !== 'string' || !run.wanted.cniTemplate) {
      if (command === 'DEL') {
        // A rollout: the node's calico-node pod is there with its programs still being prepared, or between the old
        // and the new pod while the DaemonSet exists. A kubelet runs this DEL with the plugin left on the host; here it
        // waits for the node's next calico-node (a dropped one would leave the pod's address allocated).
        const preparing = run?.wanted.cniTemplate !== undefined;
        if (preparing || (!run && (await this.client.getOrUndefined(K.node, undefined, rec.node)) && (await this.calicoNodeDaemonSet()))) {
          if (!rec.waiting) this.log(`CNI DEL for ${rec.namespace}/${rec.name} waits for calico-node on ${rec.node}`);
          rec.waiting = true;
          return undefined;
        }
        // The node is gone, or Calico's node side is (no calico-node DaemonSet): nothing can release through it; the
        // namespace still goes, and the pod's address stays allocated (docs/node-side.md).
        this.log(`CNI DEL for ${rec.namespace}/${rec.name} dropped: no Node ${rec.node} or no calico-node DaemonSet`);
        return {};
      }
      return undefined;
    }
    const ns = await this.nodeNetns(run);
    if (!ns) {
      rec.error = `${command}: the API bridge into ${run.bridge.netns} does not serve`;
      this.log(`CNI ${command} for ${rec.namespace}/${rec.name} not run: ${rec.error}`);
      return undefined;
    }
    const config = cniPluginConfig(run.wanted, this.kubeconfig, path.join(this.dir, 'cni.log'), path.join(this.dir, 'endpoint-status'), this.secretsDir);
    const env = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: rec.containerID,
      CNI_NETNS: netnsPath(rec.netns),
      CNI_IFNAME: 'eth0',
      CNI_PATH: dir,
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${rec.namespace};K8S_POD_NAME=${rec.name};K8S_POD_INFRA_CONTAINER_ID=${rec.containerID};K8S_POD_UID=${rec.uid}`,
    };
    const call = () => runWithInput('ip', ['netns', 'exec', ns, path.join(dir, 'calico')], env, JSON.stringify(config));
    const started = Date.now();
    let { code, stdout } = await call();
    // A slow call holds the whole tick (one CNI call at a time): say so, for the wait that times out behind it.
    if (Date.now() - started > SLOW_CNI_MS)
      this.log(`CNI ${command} for ${rec.namespace}/${rec.name} took ${Math.round((Date.now() - started) / 1000)} s (exit ${code})`);
    // The plugin could not reach the API server through the bridge: once the bridge answers again (restarted when it
    // failed its check), the call is made again at once, as a kubelet retries a sandbox whose CNI call failed.
    if (code !== 0 && refusedByBridge(stdout, this.apiPort) && (await run.bridge.recover())) ({ code, stdout } = await call());
    let parsed: Record<string, any>;
    try {
      parsed = stdout.trim() ? JSON.parse(stdout) : {};
    } catch {
      parsed = { msg: stdout.trim() };
    }
    if (code === 0) return parsed;
    // A kubelet retries a failed ADD (for instance while the datastore is locked) and a failed DEL: so do we.
    rec.error = `${command}: ${parsed.msg ?? `exit ${code}`}${parsed.details ? ` (${parsed.details})` : ''}`;
    this.log(`CNI ${command} for ${rec.namespace}/${rec.name} failed: ${rec.error}`);
    return undefined;
  }

  /** The operator's (calico-system) or the manifest's (kube-system) calico-node DaemonSet exists. */
  private async calicoNodeDaemonSet(): Promise<boolean> {
    for (const ns of ['calico-system', 'kube-system']) if (await this.client.getOrUndefined(K.daemonSet, ns, 'calico-node')) return true;
    return false;
  }

  private save(): void {
    writeFileSync(`${this.podsFile}.tmp`, JSON.stringify(this.pods, null, 2));
    renameSync(`${this.podsFile}.tmp`, this.podsFile);
  }

  async stop(): Promise<void> {
    for (const [node, run] of [...this.nodes]) await this.stopNode(node, run);
    this.apiBridge?.close();
    this.etcdServer?.close();
  }
}

/** A CNI call this slow is logged: on this machine one takes well under a second when the API server answers. */
const SLOW_CNI_MS = 15_000;

function shortHash(s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, 12);
}

function apiPort(kubeconfig: string): number {
  const m = /server:\s*https?:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(kubeconfig, 'utf8'));
  if (!m) throw new Error(`${kubeconfig}: no 127.0.0.1 server`);
  return Number(m[1]);
}

function runWithInput(bin: string, args: string[], env: Record<string, string>, input: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', () => {});
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', () => resolve({ code: -1, stdout }));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout });
    });
    // A plugin that exits before reading its input (a failed DEL) closes the pipe: EPIPE on this write. Its exit
    // code is the answer; unhandled, the error event would end the whole supervisor.
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}
