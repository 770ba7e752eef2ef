import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { makePki, writeKubeconfig } from './pki.js';
import { packageRoot } from '../../core/package-root.js';
import { stateRoot } from './paths.js';
import { SUPERVISOR_STATUS_FILE, type SupervisorStatus } from './calico-supervisor.js';
import { deleteNetns, listNetns, netnsPrefix } from './netns.js';
import { apiserverArgs, controllerManagerArgs, goProgramEnv, schedulerArgs, singleMemberEtcdArgs } from './component-args.js';
import { kwokConfig, writeKwokConfig } from './kwok-config.js';
import { calicoEtcdInfo, startCalicoEtcd, type CalicoEtcd } from './calico-etcd.js';

/**
 * A real Kubernetes control plane on 127.0.0.1 for tests and the demo: etcd, kube-apiserver,
 * kube-controller-manager, kube-scheduler (built from Go modules by control-plane/build.sh) and kwok
 * playing the kubelets. Processes are spawned detached; their PIDs are recorded and they are stopped by
 * process group, never by name.
 */
export interface LocalClusterOptions {
  /** Instance name; each has its own state dir and port block. */
  name?: string;
  /** First port of a block of 8 (apiserver = base, etcd = base+1/+2, KCM = base+3, scheduler = base+4). */
  portBase?: number;
  log?: (line: string) => void;
}

export interface ClusterState {
  name: string;
  workDir: string;
  kubeconfig: string;
  server: string;
  binDir: string;
  pids: Record<string, number>;
  startedAt: string;
  /** What `up` started it with (configDigest()); a running cluster with another is restarted, not reused. */
  configDigest?: string;
}

const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;

export class LocalCluster {
  readonly name: string;
  readonly portBase: number;
  readonly dir: string;
  private readonly log: (line: string) => void;

  constructor(opts: LocalClusterOptions = {}) {
    this.name = opts.name ?? 'e2e';
    this.portBase = opts.portBase ?? Number(process.env.CNI_REWIND_E2E_PORT_BASE ?? 16443);
    this.dir = path.join(stateRoot(), 'local-cluster', this.name);
    this.log = opts.log ?? (() => {});
  }

  get ports() {
    const b = this.portBase;
    return { apiserver: b, etcd: b + 1, etcdPeer: b + 2, kcm: b + 3, scheduler: b + 4 };
  }

  get statePath(): string {
    return path.join(this.dir, 'state.json');
  }

  readState(): ClusterState | undefined {
    try {
      return JSON.parse(readFileSync(this.statePath, 'utf8')) as ClusterState;
    } catch {
      return undefined;
    }
  }

  /** True when a recorded cluster's processes are all alive and the API server answers. */
  async isUp(): Promise<boolean> {
    const st = this.readState();
    if (!st) return false;
    if (!COMPONENTS.every((c) => st.pids[c] && alive(st.pids[c]!))) return false;
    return probe(`${st.server}/readyz`, path.join(st.workDir, 'pki', 'ca.crt'));
  }

  /** Build (or find cached) binaries. Streams the build's progress lines to the log. */
  ensureBinaries(): string {
    const script = path.join(packageRoot(), 'control-plane', 'build.sh');
    this.log('checking the control-plane binaries (first build from Go modules takes 15-30 min on 2 cores)');
    const res = spawnSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (res.status !== 0) throw new Error(`building the control plane failed (exit ${res.status}); see the output above`);
    const bin = res.stdout.trim().split('\n').pop()!;
    return bin;
  }

  /** The binaries, kwok's configuration and every component's flags this code starts a cluster with, as one digest. */
  private configDigest(binDir: string): string {
    const pki = path.join(this.dir, 'run', 'pki');
    const kubeconfig = path.join(this.dir, 'kubeconfig');
    const flags = [apiserverArgs(this.ports, pki), controllerManagerArgs(this.ports, pki, kubeconfig), schedulerArgs(this.ports, kubeconfig)];
    return createHash('sha256')
      .update(JSON.stringify([binDir, kwokConfig(path.join(binDir, 'kwok-stages')), flags]))
      .digest('hex')
      .slice(0, 16);
  }

  /** Start the control plane (idempotent: an already running instance started by the same configuration is reused). */
  async up(): Promise<ClusterState> {
    if (await this.isUp()) {
      const running = this.readState()!;
      // A cluster started by other code (an older clone, a rehearsal) keeps that code's kwok stages and flags:
      // reused only when they are what this code would start.
      if (running.configDigest === this.configDigest(running.binDir)) {
        this.log(`cluster "${this.name}" is already running`);
        return running;
      }
      this.log(`cluster "${this.name}" runs a configuration other than this code's: restarting it`);
    }
    await this.down(); // clear leftovers of a crashed run
    const binDir = this.ensureBinaries();
    const workDir = path.join(this.dir, 'run');
    rmSync(workDir, { recursive: true, force: true });
    mkdirSync(workDir, { recursive: true, mode: 0o700 });
    const pki = path.join(workDir, 'pki');
    makePki(pki);
    const p = this.ports;
    const server = `https://127.0.0.1:${p.apiserver}`;
    const kubeconfig = path.join(this.dir, 'kubeconfig');
    writeKubeconfig(kubeconfig, pki, server, `cni-rewind-${this.name}`);
    const kwokConfig = path.join(workDir, 'kwok.yaml');
    writeKwokConfig(kwokConfig, path.join(binDir, 'kwok-stages'));

    const state: ClusterState = {
      name: this.name,
      workDir,
      kubeconfig,
      server,
      binDir,
      pids: {},
      startedAt: new Date().toISOString(),
      configDigest: this.configDigest(binDir),
    };
    const save = () => writeState(this.statePath, state);
    const start = (name: string, args: string[]) => {
      const out = openSync(path.join(workDir, `${name}.log`), 'a');
      const child = spawn(path.join(binDir, name), args, { detached: true, stdio: ['ignore', out, out], env: goProgramEnv() });
      child.unref();
      state.pids[name] = child.pid!;
      save();
    };
    try {
      this.log('starting etcd');
      start('etcd', [
        ...singleMemberEtcdArgs('e2e', `${workDir}/etcd`, 'http', p.etcd, p.etcdPeer),
        '--unsafe-no-fsync=true',
        '--auto-compaction-retention=1',
        '--quota-backend-bytes=4294967296',
        '--listen-metrics-urls=',
      ]);
      await waitUntil('etcd', () => probe(`http://127.0.0.1:${p.etcd}/health`), 60_000);
      this.log('starting kube-apiserver');
      start('kube-apiserver', apiserverArgs(p, pki));
      await waitUntil('kube-apiserver', () => probe(`${server}/readyz`, path.join(pki, 'ca.crt')), 120_000);
      this.log('starting kube-controller-manager, kube-scheduler and kwok');
      start('kube-controller-manager', controllerManagerArgs(p, pki, kubeconfig));
      start('kube-scheduler', schedulerArgs(p, kubeconfig));
      start('kwok', [
        `--kubeconfig=${kubeconfig}`,
        `--config=${kwokConfig}`,
        '--manage-all-nodes=false',
        '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
        '--node-lease-duration-seconds=40',
        '--cidr=10.244.0.0/16',
        '--node-ip=127.0.0.1',
      ]);
      await waitUntil('kube-controller-manager', () => probe(`https://127.0.0.1:${p.kcm}/healthz`, undefined), 60_000);
      await waitUntil('kube-scheduler', () => probe(`https://127.0.0.1:${p.scheduler}/healthz`, undefined), 60_000);
      for (const c of COMPONENTS) if (!alive(state.pids[c]!)) throw new Error(`${c} exited; see ${path.join(this.dir, 'failed-run', `${c}.log`)}`);
      this.log(`cluster "${this.name}" is up at ${server}`);
      return state;
    } catch (err) {
      await this.down({ keepLogs: true });
      throw err;
    }
  }

  /** Stop every recorded process (by process group) and remove the run directory. */
  async down(opts: { keepLogs?: boolean } = {}): Promise<void> {
    const st = this.readState();
    if (st) {
      const pids = Object.values(st.pids).filter((p) => p > 0);
      for (const pid of pids) signalGroup(pid, 'SIGTERM');
      const deadline = Date.now() + 10_000;
      while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      for (const pid of pids) if (alive(pid)) signalGroup(pid, 'SIGKILL');
      while (pids.some(alive)) await new Promise((r) => setTimeout(r, 50));
      if (opts.keepLogs) {
        // Keep the logs of a failed start for diagnosis; the next start clears them.
        const failed = path.join(this.dir, 'failed-run');
        rmSync(failed, { recursive: true, force: true });
        renameSync(st.workDir, failed);
      } else {
        rmSync(st.workDir, { recursive: true, force: true });
      }
    }
    // The node side's namespaces (per node and per pod) go with the cluster, also after a crashed supervisor.
    for (const ns of listNetns(netnsPrefix(this.name))) deleteNetns(ns);
    rmSync(this.statePath, { force: true });
  }

  /**
   * Start the Calico supervisor (idempotent): it runs the real tigera operator, Calico API server and
   * kube-controllers that the cluster's objects ask for (calico-supervisor.ts). Stopped by stopCalico() or down().
   * `nodeSide`: also calico-node's start-up and tunnel allocator per kwok node and the CNI plugin per pod (node-side.ts).
   */
  async startCalico(opts: { nodeSide?: boolean } = {}): Promise<void> {
    const st = this.readState();
    if (!st) throw new Error('cluster not running');
    const pid = st.pids['calico-supervisor'];
    if (pid && alive(pid)) return;
    const script = path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'calico-supervisor.js');
    const out = openSync(path.join(st.workDir, 'calico-supervisor.log'), 'a');
    const args = [script, st.workDir, st.kubeconfig, ...(opts.nodeSide ? ['--node-side', netnsPrefix(this.name)] : [])];
    const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', out, out] });
    child.unref();
    st.pids['calico-supervisor'] = child.pid!;
    writeState(this.statePath, st);
    this.log(`Calico supervisor started (pid ${child.pid}); log: ${path.join(st.workDir, 'calico-supervisor.log')}`);
  }

  /**
   * Stop the Calico supervisor and every program it runs (they share its process group), and remove the node
   * side's network namespaces: with no supervisor left, nothing would run their DEL.
   */
  async stopCalico(): Promise<void> {
    const st = this.readState();
    const pid = st?.pids['calico-supervisor'];
    if (!st || !pid) return;
    await stopGroup(pid);
    for (const ns of listNetns(netnsPrefix(this.name))) deleteNetns(ns);
    delete st.pids['calico-supervisor'];
    writeState(this.statePath, st);
  }

  /** What the Calico supervisor runs right now (its status file), if it runs. */
  calicoStatus(): SupervisorStatus | undefined {
    const st = this.readState();
    const pid = st?.pids['calico-supervisor'];
    if (!st || !pid || !alive(pid)) return undefined;
    try {
      return JSON.parse(readFileSync(path.join(st.workDir, SUPERVISOR_STATUS_FILE), 'utf8')) as SupervisorStatus;
    } catch {
      return undefined;
    }
  }

  /**
   * The etcd of Calico's etcd-datastore install (calico-etcd.ts), started unless it runs; its pid is in the state, so
   * `down` stops it and removes its data. `wipe`: a running one is stopped and it starts with no data and new certificates.
   */
  async ensureCalicoEtcd(opts: { wipe?: boolean } = {}): Promise<CalicoEtcd> {
    const st = this.readState();
    if (!st) throw new Error('cluster not running');
    const pid = st.pids['calico-etcd'];
    if (pid && alive(pid) && !opts.wipe) return calicoEtcdInfo(st.workDir, this.portBase);
    if (pid) await stopGroup(pid);
    await startCalicoEtcd(st.binDir, st.workDir, this.portBase, {
      ...opts,
      // Recorded at once: a start that then fails its wait still leaves a process `down` must stop.
      started: (p) => {
        st.pids['calico-etcd'] = p;
        writeState(this.statePath, st);
      },
    });
    return calicoEtcdInfo(st.workDir, this.portBase);
  }

  /** The Calico etcd's endpoint and certificate files while it runs (ensureCalicoEtcd), else undefined. */
  calicoEtcd(): CalicoEtcd | undefined {
    const st = this.readState();
    const pid = st?.pids['calico-etcd'];
    return st && pid && alive(pid) ? calicoEtcdInfo(st.workDir, this.portBase) : undefined;
  }

  /** Stop and later restart only the API server (fault tests). */
  async stopApiserver(): Promise<void> {
    const st = this.readState();
    const pid = st?.pids['kube-apiserver'];
    if (!st || !pid) throw new Error('cluster not running');
    signalGroup(pid, 'SIGKILL');
    while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
  }

  async startApiserver(): Promise<void> {
    const st = this.readState();
    if (!st) throw new Error('cluster not running');
    const pki = path.join(st.workDir, 'pki');
    this.respawn(st, 'kube-apiserver', apiserverArgs(this.ports, pki));
    await waitUntil('kube-apiserver', () => probe(`${st.server}/readyz`, path.join(pki, 'ca.crt')), 120_000);
  }

  /**
   * Restarts kube-controller-manager, as a user does when Calico's release notes ask for it (the v3 UIDs that change
   * at 3.27.5/3.28.1 leave its garbage collector's graph wrong until then; plan finding v3-uids-change).
   */
  async restartControllerManager(): Promise<void> {
    const st = this.readState();
    const pid = st?.pids['kube-controller-manager'];
    if (!st || !pid) throw new Error('cluster not running');
    await stopGroup(pid);
    this.respawn(st, 'kube-controller-manager', controllerManagerArgs(this.ports, path.join(st.workDir, 'pki'), st.kubeconfig));
    await waitUntil('kube-controller-manager', () => probe(`https://127.0.0.1:${this.ports.kcm}/healthz`, undefined), 60_000);
  }

  /** Starts one component of a running cluster again, its output appended to its log, and records its pid. */
  private respawn(st: ClusterState, name: (typeof COMPONENTS)[number], args: string[]): void {
    const out = openSync(path.join(st.workDir, `${name}.log`), 'a');
    const child = spawn(path.join(st.binDir, name), args, { detached: true, stdio: ['ignore', out, out], env: goProgramEnv() });
    child.unref();
    st.pids[name] = child.pid!;
    writeState(this.statePath, st);
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie still answers kill(0); treat it as gone.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

function writeState(file: string, st: ClusterState): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, JSON.stringify(st, null, 2));
  renameSync(tmp, file);
}

async function stopGroup(pid: number): Promise<void> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + 20_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  signalGroup(pid, 'SIGKILL');
  while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  }
}

function probe(url: string, caFile?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const mod = u.protocol === 'http:' ? http : https;
    const req = mod.get(
      url,
      { timeout: 2000, ...(u.protocol === 'https:' ? (caFile && existsSync(caFile) ? { ca: readFileSync(caFile) } : { rejectUnauthorized: false }) : {}) },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} did not become ready within ${timeoutMs / 1000}s`);
}
