/**
 * The IPAM driver (control-plane/ipam-driver: libcalico-go's IPAM client, called as the CNI plugin calls it) and
 * readers of the IPAM state it leaves: its JSON-lines log replayed into the set of addresses it holds, the
 * IPAMBlocks/IPAMHandles as stored, and `calicoctl ipam check` parsed into its problem counts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { cidrContains, parseCidr, parseIp } from '../../src/doctor/ip.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import {
  calicoctl,
  clearCalicoFinalizers,
  waitApiServiceAvailable,
  waitOperator,
  waitPoolAndDatastoreReady,
  waitTigeraStatusAvailable,
} from './calico-support.js';
import { applyFixture, calicoType, deleteNodes, kubeconfig, resetCalico, testClient } from './helpers.js';
import { populateCalico, type Population } from './population.js';
import { auditTrail, blockName } from '../support/audit-trail.js';

export const IPAM_BLOCK = calicoType('ipamblocks', 'IPAMBlock');
export const IPAM_HANDLE = calicoType('ipamhandles', 'IPAMHandle');

export interface DriverEvent {
  t: string;
  op: 'assign' | 'release' | 'fail' | 'end';
  call?: 'assign' | 'release';
  handle?: string;
  pod?: string;
  node?: string;
  ip?: string;
  error?: string;
  held?: number;
  unsettled?: string[];
}

export interface Churn {
  child: ChildProcess;
  logFile: string;
  /** Resolves with the driver's exit code once it has written its `end` line. */
  done: Promise<number | null>;
  /** SIGTERM: the driver finishes the call in flight, writes `end` and exits. */
  stop(): Promise<number | null>;
}

const running = new Set<Churn>();

/** Stop every churn still running (a test that failed before its own stop must not leave one behind). */
export async function stopAllChurns(): Promise<void> {
  await Promise.all([...running].map((c) => c.stop()));
}

/** Start `ipam-driver churn`, its JSON lines appended to `logFile`. */
export async function startChurn(
  logFile: string,
  args: { nodes: string[]; prefix: string; rate: number; target: number; durationS: number; seed?: number },
): Promise<Churn> {
  const dir = await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
  const out = await open(logFile, 'a');
  // setpriv (util-linux) has the kernel SIGKILL the driver when the thread that started it ends: a vitest worker
  // killed mid-churn runs no cleanup, and a driver left behind went on allocating under the next run's tests. That
  // thread is the worker process's main thread (vitest's forks pool), so the driver lives exactly as long as its worker.
  const child = spawn(
    'setpriv',
    [
      '--pdeathsig',
      'KILL',
      '--',
      path.join(dir, 'ipam-driver'),
      'churn',
      '--nodes',
      args.nodes.join(','),
      '--prefix',
      args.prefix,
      '--rate',
      String(args.rate),
      '--target',
      String(args.target),
      '--duration',
      `${args.durationS}s`,
      '--seed',
      String(args.seed ?? 1),
    ],
    { env: { ...process.env, KUBECONFIG: kubeconfig(), DATASTORE_TYPE: 'kubernetes' }, stdio: ['ignore', out.fd, 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (b) => (stderr += b));
  const done = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      void out.close();
      if (code !== 0) console.error(`ipam-driver exited ${code}: ${stderr.slice(-2000)}`);
      resolve(code);
    }),
  );
  const churn: Churn = {
    child,
    logFile,
    done,
    stop: () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return done;
    },
  };
  running.add(churn);
  void done.then(() => running.delete(churn));
  return churn;
}

export function readEvents(logFile: string): DriverEvent[] {
  // Go writes RFC 3339 with up to 9 fraction digits and trailing zeros cut: as ISO strings of JavaScript's form,
  // times compare as strings.
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const e = JSON.parse(l) as DriverEvent;
      return { ...e, t: new Date(e.t.replace(/(\.\d{3})\d+/, '$1')).toISOString() };
    });
}

/** Replays assign/release lines: handle -> address it holds (a handle holds one IPv4 address). */
export function heldByLog(events: DriverEvent[]): Map<string, string> {
  const held = new Map<string, string>();
  for (const e of events) {
    if (e.op === 'assign') held.set(e.handle!, e.ip!);
    else if (e.op === 'release') held.delete(e.handle!);
  }
  return held;
}

const ipToInt = (ip: string) => ip.split('.').reduce((a, o) => a * 256 + Number(o), 0);
const intToIp = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');

export interface IpamState {
  /** address -> handles allocated to it (more than one = held twice) */
  owners: Map<string, string[]>;
  /** handle -> the blocks and counts its IPAMHandle records */
  handles: Map<string, Record<string, number>>;
}

/** IPAM as stored: every allocated address of every IPAMBlock with its handle, and every IPAMHandle. */
export async function readIpam(client: KubeClient): Promise<IpamState> {
  const owners = new Map<string, string[]>();
  for (const b of await client.listAll(IPAM_BLOCK)) {
    const [base] = (b.spec.cidr as string).split('/');
    const attrs: { handle_id?: string }[] = b.spec.attributes ?? [];
    (b.spec.allocations as (number | null)[]).forEach((a, ordinal) => {
      if (a === null || a === undefined) return;
      const ip = intToIp(ipToInt(base!) + ordinal);
      owners.set(ip, [...(owners.get(ip) ?? []), attrs[a]?.handle_id ?? '<no handle>']);
    });
  }
  const handles = new Map<string, Record<string, number>>();
  for (const h of await client.listAll(IPAM_HANDLE)) handles.set(h.spec.handleID, h.spec.block ?? {});
  return { owners, handles };
}

/** `calicoctl ipam check` counts (its "Found N ..." lines) and the addresses it lists as leaked. */
export interface IpamCheck {
  leaked: number;
  notInPools: number;
  noAllocation: number;
  handlesWithoutIps: number;
  missingHandles: number;
  multipleOwners: number;
  problems: number;
  /** Addresses the Nodes name as their tunnel addresses (counted as in use). */
  nodeTunnelIps: number;
  leakedIps: Set<string>;
  /** In use (by a pod) but in no active pool: the kwok pods' own addresses here. */
  outsidePoolIps: string[];
  /** Who uses an address in an active pool that IPAM did not allocate (`Workload(<namespace>/<endpoint>)`). */
  noAllocationOwners: string[];
  text: string;
}

export async function ipamCheck(): Promise<IpamCheck> {
  return parseIpamCheck(await calicoctl(['ipam', 'check', '--show-problem-ips']));
}

/** The output of `calicoctl ipam check --show-problem-ips`, read into its counts and problem addresses. */
export function parseIpamCheck(text: string): IpamCheck {
  const num = (re: RegExp) => {
    const m = re.exec(text);
    if (!m) throw new Error(`calicoctl ipam check: no line matching ${re}:\n${text}`);
    return Number(m[1]);
  };
  return {
    leaked: num(/Found (\d+) IPs that are allocated in IPAM but not actually in use/),
    notInPools: num(/Found (\d+) in-use IPs that are not in active IP pools/),
    noAllocation: num(/Found (\d+) in-use IPs that are in active IP pools but have no corresponding IPAM allocation/),
    handlesWithoutIps: num(/Found (\d+) handles with no matching IPs/),
    missingHandles: num(/Found (\d+) handles mentioned in blocks with no matching handle resource/),
    multipleOwners: [...text.matchAll(/has multiple owners/g)].length,
    problems: num(/Check complete; found (\d+) problems/),
    nodeTunnelIps: num(/Found (\d+) node tunnel IPs/),
    leakedIps: new Set([...text.matchAll(/^\s+(\S+) leaked; attrs/gm)].map((m) => m[1]!)),
    outsidePoolIps: [...text.matchAll(/^\s+(\S+) in use by .* is not in any active IP pool/gm)].map((m) => m[1]!),
    noAllocationOwners: [...text.matchAll(/^\s+\S+ in use by (.*) and in active IPAM pool but has no IPAM allocation/gm)].map((m) => m[1]!),
    text,
  };
}

/**
 * Every address the driver's log says is held is allocated to its handle (and only to it), nothing it released is
 * allocated, and calicoctl ipam check finds no problem but the churn's own pod-less allocations.
 */
export async function expectIpamIntact(client: KubeClient, evs: DriverEvent[]): Promise<void> {
  const held = heldByLog(evs);
  const ipam = await readIpam(client);
  const lost: string[] = [];
  const lostHeld: [string, string][] = [];
  for (const [handle, ip] of held) {
    const before = lost.length;
    const owners = ipam.owners.get(ip) ?? [];
    if (owners.length !== 1 || owners[0] !== handle) lost.push(`${ip} of ${handle}: allocated to ${owners.join(', ') || 'nobody'}`);
    const recorded = Object.values(ipam.handles.get(handle) ?? {}).reduce((a, n) => a + n, 0);
    if (recorded !== 1) lost.push(`IPAMHandle ${handle} records ${recorded} addresses, not 1`);
    if (lost.length > before) lostHeld.push([handle, ip]);
  }
  expect(lost, lostHeld.length ? await lossTrail(client, evs, lostHeld) : '').toEqual([]);
  const twice = [...ipam.owners].filter(([, o]) => o.length > 1);
  expect(twice).toEqual([]);
  // Nothing the driver released (before or after the backup) is allocated again to its old handle.
  const podHandles = [...ipam.owners.values()].flat().filter((h) => h.startsWith('k8s-pod-network.'));
  expect(podHandles.sort()).toEqual([...held.keys()].sort());

  const check = await ipamCheck();
  expect(check.leakedIps).toEqual(new Set(held.values()));
  expect(check.leaked).toBe(held.size);
  expect({ noAllocation: check.noAllocation, handlesWithoutIps: check.handlesWithoutIps, missingHandles: check.missingHandles }).toEqual({
    noAllocation: 0,
    handlesWithoutIps: 0,
    missingHandles: 0,
  });
  // The kwok pods' addresses (kwok assigns them, not Calico) are the only ones in use outside the pools.
  expect(check.outsidePoolIps.length).toBe(check.notInPools);
  expect(check.outsidePoolIps.filter((ip) => ip.startsWith('192.168.'))).toEqual([]);
}

/** For a lost allocation: the driver's events for its handle and every recorded write to its handle and block. */
async function lossTrail(client: KubeClient, evs: DriverEvent[], lost: [string, string][]): Promise<string> {
  const blocks = (await client.listAll(IPAM_BLOCK)).map((b) => b.spec.cidr as string);
  const names = lost.flatMap(([handle, ip]) => [handle, ...blocks.filter((c) => inCidr(ip, c)).map(blockName)]);
  const driver = evs.filter((e) => lost.some(([h]) => e.handle === h)).map((e) => JSON.stringify(e));
  const runDir = path.join(new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' }).dir, 'run');
  const logLines = readdirSync(runDir)
    .filter((f) => f.endsWith('.log'))
    .flatMap((f) =>
      readFileSync(path.join(runDir, f), 'utf8')
        .split('\n')
        .filter((l) => lost.some(([h, ip]) => l.includes(h) || l.includes(`"${ip}"`)))
        .map((l) => `${f}: ${l.slice(0, 400)}`),
    );
  return [
    'the driver on the lost handles:',
    ...driver,
    'writes to their handles and blocks (audit log; the Calico programs all say Go-http-client, cni-rewind says so):',
    ...auditTrail(runDir, names),
    "the cluster's logs on them:",
    ...logLines.slice(-40),
  ].join('\n');
}

function inCidr(ip: string, cidr: string): boolean {
  const block = parseCidr(cidr);
  const address = parseIp(ip);
  return !!block && !!address && cidrContains(block, address);
}

/**
 * What `calicoctl ipam check` finds wrong, comparable between two runs: the leaked addresses (allocated, no Pod uses
 * them) and the counts of the other problems. In-use addresses outside every pool are left out: kwok gives its pods
 * addresses of its own range, and which pods exist changes with every rollout.
 */
export function ipamProblems(c: IpamCheck) {
  return {
    leakedIps: [...c.leakedIps].sort(),
    noAllocation: c.noAllocation,
    handlesWithoutIps: c.handlesWithoutIps,
    missingHandles: c.missingHandles,
    multipleOwners: c.multipleOwners,
  };
}

/**
 * IPAM exactly as `before`: every address allocated to the same handle, and `calicoctl ipam check` finding what it
 * found then (the pod-less allocations of the IPAM driver and the population, whose pods have no Pod object, are its
 * only "leaks"). `withPods`: every allocation has its Pod object (podsForPopulation, podsForDriverAllocations), so
 * the check finds no leak at all.
 */
export async function expectIpamAsBefore(client: KubeClient, before: IpamState, checkBefore: IpamCheck, opts: { withPods?: boolean } = {}): Promise<IpamCheck> {
  const after = await readIpam(client);
  expect(after.owners).toEqual(before.owners);
  expect(after.handles).toEqual(before.handles);
  const check = await ipamCheck();
  expect(ipamProblems(check), check.text).toEqual(ipamProblems(checkBefore));
  expect(ipamProblems(check)).toMatchObject({ noAllocation: 0, handlesWithoutIps: 0, missingHandles: 0, multipleOwners: 0 });
  expect(check.leakedIps).toEqual(opts.withPods ? new Set() : new Set(before.owners.keys()));
  return check;
}

/**
 * Calico 3.28.1 under the real v1.34.3 operator with a realistic population (pools, IPAM, policies, BGP/Felix, and
 * custom-resources.yaml's Installation and APIServer) on `nodes`, the v3 API served, TigeraStatus calico Available,
 * a ready datastore, and real allocations the IPAM driver made there (blocks claimed, affinities, handles).
 */
export async function installPopulatedReal328(
  client: KubeClient,
  cluster: LocalCluster,
  opts: { prefix: string; nodes: string[]; logFile: string },
): Promise<{ population: Population; events: DriverEvent[] }> {
  await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
  const population = await populateCalico(client, { prefix: opts.prefix, nodes: opts.nodes });
  await waitOperator(cluster, 'v1.34.3');
  await waitApiServiceAvailable(client, 240_000);
  await waitTigeraStatusAvailable(client, 'calico');
  await waitPoolAndDatastoreReady(client);
  const churn = await startChurn(opts.logFile, { nodes: opts.nodes, prefix: `${opts.prefix}${Date.now().toString(36)}`, rate: 6, target: 6, durationS: 6 });
  expect(await churn.done).toBe(0);
  return { population, events: readEvents(opts.logFile) };
}

/**
 * The start of the IPAM files: a clean 3.28.1 install by the real v1.34.3 operator on the kwok `nodes`, its pool
 * and datastore ready for the IPAM driver (`operators`: other operators the file goes on to run, built first).
 * `nodeSide`: the Calico trees of the node side to build first (each calico-node minor the file installs); given, the
 * node side runs too (calico-node's start-up and tunnel allocator per node, the CNI plugin per pod:
 * docs/node-side.md), so pods get their addresses from the real CNI plugin.
 */
export async function freshInstall328(
  cluster: LocalCluster,
  nodes: string[],
  operators: string[] = [],
  opts: { nodeSide?: string[] } = {},
): Promise<KubeClient> {
  for (const op of [...operators, 'v1.34.3']) await ensureCalicoProgram('operator', op);
  await ensureCalicoProgram('calico', CALICO_PROGRAMS_VERSION);
  if (opts.nodeSide) for (const tree of opts.nodeSide) await ensureCalicoProgram('node-side', tree);
  else await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
  const client = await testClient();
  await cluster.stopCalico();
  await clearCalicoFinalizers(client);
  await resetCalico(client);
  await createFakeNodes(
    client,
    nodes.map((name) => ({ name })),
  );
  await cluster.startCalico({ nodeSide: !!opts.nodeSide });
  await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
  await applyFixture(client, '3.28.1', 'custom-resources.yaml');
  await waitOperator(cluster, 'v1.34.3');
  await waitApiServiceAvailable(client, 240_000);
  await waitPoolAndDatastoreReady(client);
  return client;
}

/** What freshInstall328 set up, taken down again (churns stopped, programs stopped, Calico and the nodes removed). */
export async function teardownInstall(cluster: LocalCluster, client: KubeClient | undefined, nodePrefix: string): Promise<void> {
  await stopAllChurns();
  await cluster.stopCalico();
  if (!client) return;
  await clearCalicoFinalizers(client);
  await resetCalico(client);
  await deleteNodes(client, nodePrefix);
  client.close();
}
