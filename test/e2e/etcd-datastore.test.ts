/**
 * A Calico that keeps its data in etcd (issue 31), installed from v3.28.1's calico-etcd.yaml on a TLS etcd and run by
 * Calico's real programs in etcd mode (kube-controllers, calico-node's start-up and tunnel allocator per node, the CNI
 * plugin per pod; etcd-cluster-support.ts). The night it guards against: Calico's data in etcd is lost while pods run.
 * backup reads it from etcd; after the loss restore puts every pool, policy and IPAM record back, with the programs
 * running; a pod created after has an address no other pod holds. status, doctor and plan say what they do on etcd.
 */
import https from 'node:https';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tlsOptions } from '../../src/dev/local-cluster/calico-etcd.js';
import { prefixEnd } from '../../src/etcd/gateway.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { etcdIpamHolders, etcdValues, podOn, waitEtcdPodIp, withCalicoOnEtcd } from './etcd-cluster-support.js';
import { runCli } from './helpers.js';
import { calicoConfigData, deleteCalicoCrds, kddIpamHolders, kddReady, KDD, readPlan } from './etcd-migrate-support.js';
import { KILL_AFTER_STEP_ENV } from '../support/kill-after-step.js';
import { MIGRATE_STEP_IDS } from '../../src/plan/steps.js';

const real = withCalicoOnEtcd('etcdr');
const CLUSTER_INFO_KEY = '/calico/resources/v3/projectcalico.org/clusterinformations/default';
const calicoKeys = (prefix?: string) => etcdValues(real, prefix);
const ipamHolders = () => etcdIpamHolders(real);
const waitPodIp = (name: string) => waitEtcdPodIp(real, name);

/** The disaster: every key under `prefix` deleted from Calico's etcd (etcd's own deleterange, as etcdctl del --prefix). */
function deletePrefix(prefix: string): Promise<void> {
  const info = real.etcd();
  const body = JSON.stringify({ key: Buffer.from(prefix).toString('base64'), range_end: prefixEnd(prefix).toString('base64') });
  return new Promise((resolve, reject) => {
    const req = https.request(new URL('/v3/kv/deleterange', info.endpoint), { method: 'POST', ...tlsOptions(info) }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`deleterange: HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const USER_CONFIG = `
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: { name: reserved-pool }
spec: { cidr: 10.77.0.0/24, disabled: true, ipipMode: Never, natOutgoing: false, nodeSelector: all() }
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: { name: deny-metadata }
spec: { order: 10, selector: all(), types: [Egress], egress: [{ action: Deny, destination: { nets: [169.254.169.254/32] } }, { action: Allow }] }
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: { name: allow-web, namespace: default }
spec: { selector: app == 'web', ingress: [{ action: Allow, protocol: TCP, destination: { ports: [80] } }] }
`;

/** The keys restore must bring back exactly: the user's config and every IPAM record. */
const mustReturn = (k: string) => k.startsWith('/calico/ipam/v2/') || /\/(ippools|globalnetworkpolicies|networkpolicies)\//.test(k);

describe('a Calico on the etcd datastore (calico-etcd.yaml, TLS etcd, real programs in etcd mode)', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-'));
  const bundle = path.join(work, 'bundle');
  let before: Map<string, string>;
  const podIps = new Map<string, string>();
  afterAll(async () => {
    for (const name of ['etcd-web-1', 'etcd-web-2', 'etcd-web-3', 'etcd-web-4', 'etcd-web-5', 'etcd-web-6'])
      await real
        .client()
        .delete(K.pod, 'default', name, { gracePeriodSeconds: 0 })
        .catch(() => undefined);
  });

  it('runs: pods get addresses from the CNI plugin in etcd mode, and the user configures Calico with calicoctl', async () => {
    const client = real.client();
    for (const [i, name] of ['etcd-web-1', 'etcd-web-2', 'etcd-web-3'].entries()) await client.create(K.pod, podOn(name, real.nodes[i % 2]!));
    for (const name of ['etcd-web-1', 'etcd-web-2', 'etcd-web-3']) podIps.set(name, await waitPodIp(name));
    await real.calicoctl(['apply', '-f', '-'], USER_CONFIG);
    const keys = await calicoKeys();
    expect([...keys.keys()].filter((k) => k.includes('/ipam/v2/handle/')).length).toBeGreaterThanOrEqual(3);
    expect(keys.has('/calico/resources/v3/projectcalico.org/ippools/reserved-pool')).toBe(true);
    // The data is in etcd, not in the Kubernetes API.
    expect((await client.listMetadata(K.crd)).filter((c) => c.metadata.name.endsWith('projectcalico.org'))).toEqual([]);
  });

  it('status names the etcd datastore; doctor says the CRDs are absent by design; a plan across 3.32 is refused by name', async () => {
    const status = await runCli(['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(
      'Datastore   etcd (calico-config etcd_endpoints): export, backup, restore and plan --to work on etcd; plan --migrate-datastore moves it to Kubernetes',
    );
    const doctor = await runCli(['doctor', '-o', 'json']);
    const ids = (JSON.parse(doctor.stdout).findings as { id: string }[]).map((f) => f.id);
    expect(ids).toContain('etcd-datastore');
    expect(ids).not.toContain('calico-crds-missing');
    // Said before any bundle is looked for (etcd-upgrade.test.ts plans and applies 3.28.1 <-> 3.29.7).
    const plan = await runCli(['plan', '--to', '3.32.1', '--out', path.join(work, 'plan.json')]);
    expect(plan.code, plan.stderr).toBe(5);
    expect(plan.stderr).toContain('crosses v3.32.0, whose kube-controllers renames default-tier policies in etcd');
    // Without calicoctl of the cluster's release the migration cannot be carried out: refused before a plan exists.
    const migrate = await runCli(['plan', '--migrate-datastore', '--calicoctl', path.join(work, 'no-calicoctl'), '--out', path.join(work, 'plan.json')]);
    expect(migrate.code, migrate.stderr).toBe(5);
    expect(migrate.stderr).toContain('calicoctl not found');
    expect(readdirSync(work)).toEqual([]);
  });

  it('backup reads every v3 resource and IPAM record from etcd into the bundle, and no key material', async () => {
    before = await calicoKeys();
    const r = await runCli(['backup', '--out', bundle, '--allow-unprotected-nodes', '-o', 'json']);
    expect([0, 3], r.stderr).toContain(r.code);
    const manifest = JSON.parse(readFileSync(path.join(bundle, 'manifest.json'), 'utf8'));
    expect(manifest.datastore.type).toBe('etcd');
    expect(manifest.counts['ippools.projectcalico.org']).toBe(2);
    expect(manifest.counts['globalnetworkpolicies.projectcalico.org']).toBe(1);
    const ipamBefore = [...before.keys()].filter((k) => k.startsWith('/calico/ipam/v2/')).length;
    const ipamCounted = ['blocks', 'handles', 'affinities', 'config'].reduce((s, k) => s + (manifest.counts[`${k}.ipam.etcd`] ?? 0), 0);
    expect(ipamCounted).toBe(ipamBefore);
    const key = readFileSync(real.etcd().keyFile, 'utf8').split('\n')[1]!;
    for (const f of Object.keys(manifest.files)) expect(readFileSync(path.join(bundle, f), 'utf8')).not.toContain(key);
    const verify = await runCli(['verify', bundle]);
    expect(verify.code, verify.stderr).toBe(0);
    const inspect = await runCli(['inspect', bundle]);
    expect(inspect.stdout).toContain(`Datastore   etcd (read from Calico's etcd at revision ${manifest.datastore.revision})`);
    const diff = await runCli(['diff', bundle, '--kinds', 'IPPool,GlobalNetworkPolicy,NetworkPolicy,ipam']);
    expect(diff.code, `${diff.stdout}\n${diff.stderr}`).toBe(0);
  });

  it('after every Calico key is lost and calico-node starts again, restore puts every pool, policy and pod allocation back', async () => {
    await deletePrefix('/calico/resources/');
    await deletePrefix('/calico/ipam/');
    expect([...(await calicoKeys()).keys()].filter(mustReturn)).toEqual([]);
    const lost = await runCli(['diff', bundle, '--kinds', 'IPPool']);
    expect(lost.code, lost.stderr).toBe(1);
    expect(lost.stdout).toContain('only in bundle:  IPPool reserved-pool');
    // calico-node on node-1 starts again (a node reboot): start-up re-creates the default pool and ClusterInformation,
    // and the tunnel allocator re-claims the same block (libcalico-go seeds it from the hostname), empty but for the
    // tunnel address: the running pods' addresses in it are free there until restore puts them back.
    const node1Block = [...before].find(([k, v]) => k.includes('/assignment/ipv4/block/') && v.includes(`"host:${real.nodes[0]}"`))![0];
    const client = real.client();
    for (const p of await client.listAll<KubeObject>(K.pod, { namespace: 'kube-system', labelSelector: 'k8s-app=calico-node' }))
      if (p.spec?.nodeName === real.nodes[0]) await client.delete(K.pod, 'kube-system', p.metadata.name, { gracePeriodSeconds: 0 });
    const reclaimed = await client.waitFor(
      `${node1Block} re-claimed by node-1's tunnel allocator`,
      async () => (await calicoKeys(node1Block)).get(node1Block),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(reclaimed).not.toBe(before.get(node1Block));

    const dry = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(dry.code, dry.stderr).toBe(0);
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.ok).toBe(true);
    expect(result.ipamProblems ?? []).toEqual([]);
    expect(result.guards.releaseProblems).toEqual([]);
    const after = await calicoKeys();
    // The user's config as it was (the default pool calico-node made again has a new uid: the same pool); every IPAM
    // record Calico did not write again byte for byte.
    const spec = (v: string | undefined) => (v === undefined ? undefined : JSON.stringify(JSON.parse(v).spec));
    const rewritten = (k: string) => k === node1Block || k.includes(real.nodes[0]!);
    for (const [k, v] of before) {
      if (!mustReturn(k)) continue;
      if (k.startsWith('/calico/resources/')) expect(spec(after.get(k)), k).toBe(spec(v));
      else if (!rewritten(k)) expect(after.get(k), k).toBe(v);
      else expect(after.has(k), k).toBe(true);
    }
    // The re-claimed block: each running pod's address allocated to its handle again, at its ordinal.
    const was = JSON.parse(before.get(node1Block)!);
    const now = JSON.parse(after.get(node1Block)!);
    const pods = (b: any) =>
      new Map(
        (b.allocations as (number | null)[])
          .flatMap((a, o): [number, string][] => (a === null ? [] : [[o, b.attributes[a].handle_id as string]]))
          .filter(([, h]) => h.startsWith('k8s-pod-network.')),
      );
    expect(pods(was).size).toBeGreaterThan(0);
    expect(pods(now)).toEqual(pods(was));
    const ci = JSON.parse(after.get('/calico/resources/v3/projectcalico.org/clusterinformations/default')!);
    expect(ci.spec.datastoreReady).toBe(true);
    const pools = await real.calicoctl(['get', 'ippools', '-o', 'json']);
    const reserved = JSON.parse(pools).items.find((p: KubeObject) => p.metadata.name === 'reserved-pool');
    expect(reserved.spec.disabled).toBe(true);
    const diff = await runCli(['diff', bundle, '--kinds', 'IPPool,GlobalNetworkPolicy,NetworkPolicy']);
    expect(diff.code, `${diff.stdout}\n${diff.stderr}`).toBe(0);
  });

  it('wrap around a calicoctl that deletes a pool and fails: backed up from etcd, the pool restored into etcd', async () => {
    const e = real.etcd();
    const script = path.join(work, 'risky.sh');
    writeFileSync(
      script,
      [
        '#!/bin/sh',
        `export DATASTORE_TYPE=etcdv3 ETCD_ENDPOINTS=${e.endpoint} ETCD_CA_CERT_FILE=${e.caFile} ETCD_CERT_FILE=${e.certFile} ETCD_KEY_FILE=${e.keyFile}`,
        `${real.calicoctlPath()} delete ippool reserved-pool --allow-version-mismatch || exit 3`,
        'exit 1',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const r = await runCli(['wrap', '--restore-on-failure', '--out', path.join(work, 'wrap-bundle'), '--', script], { cwd: work });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(1); // the wrapped command's exit code
    expect(r.stderr + r.stdout).toContain('reserved-pool');
    const pool = await calicoKeys('/calico/resources/v3/projectcalico.org/ippools/reserved-pool');
    expect(JSON.parse(pool.get('/calico/resources/v3/projectcalico.org/ippools/reserved-pool')!).spec.disabled).toBe(true);
  });

  it('a restore run again changes nothing; a pod created after gets an address no other pod holds', async () => {
    const again = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).counts.create ?? 0).toBe(0);
    await real.client().create(K.pod, podOn('etcd-web-4', real.nodes[0]!));
    const ip = await waitPodIp('etcd-web-4');
    expect([...podIps.values()]).not.toContain(ip);
    // Every running pod: an address no other pod has, allocated in etcd's IPAM to that very pod.
    const pods = (await real.client().listAll<KubeObject>(K.pod, { namespace: 'default' })).filter((p) => p.metadata.name!.startsWith('etcd-web-'));
    const addrs = pods.map((p) => p.status?.podIP as string);
    expect(new Set(addrs).size, addrs.join(' ')).toBe(4);
    const held = await ipamHolders();
    for (const p of pods) expect(held.get(p.status!.podIP), p.metadata.name).toBe(p.metadata.name);
  });

  // The move to the Kubernetes datastore (plan --migrate-datastore) with the real calicoctl of the release: first a run
  // killed once calico.yaml is rolled out, rolled back to etcd; then the whole migration, verified and unlocked.
  const planFile = path.join(work, 'migrate-plan.json');
  const cli = (args: string[], env: Record<string, string> = {}) => runCli([...args, '--calicoctl', real.calicoctlPath()], { env });

  it('plan --migrate-datastore; applies killed after the lock and after calico.yaml went in are rolled back to etcd, whose IPAM gives the next pod its address', async () => {
    const client = real.client();
    const etcdInfo = async () => JSON.parse((await calicoKeys(CLUSTER_INFO_KEY)).get(CLUSTER_INFO_KEY)!).spec.datastoreReady;
    // A Calico Node of a host that is no Kubernetes node (no 'k8s' orchestrator reference): calicoctl's export stops on
    // it, after etcd is locked. Refused by plan; one added after the plan is refused by apply before the lock.
    const orphanPlan = path.join(work, 'migrate-orphan.json');
    expect((await cli(['plan', '--migrate-datastore', '--bundle', bundle, '--no-disk-snapshots', '--out', orphanPlan])).code).toBe(0);
    await real.calicoctl(
      ['create', '-f', '-'],
      'apiVersion: projectcalico.org/v3\nkind: Node\nmetadata: { name: bare-metal-1 }\nspec: { bgp: { ipv4Address: 10.99.0.1/24 } }\n',
    );
    const refused = await cli(['plan', '--migrate-datastore', '--bundle', bundle, '--no-disk-snapshots', '--out', path.join(work, 'refused.json')]);
    expect(refused.code, refused.stderr).toBe(5);
    expect(refused.stderr).toContain("bare-metal-1 in etcd have no 'k8s' orchestrator reference");
    const atLock = await cli(['apply', orphanPlan, '--yes', '-o', 'json']);
    expect(atLock.code, atLock.stderr).toBe(5);
    expect(JSON.parse(atLock.stdout).failed.step).toBe('migrate-lock-etcd');
    expect(await etcdInfo()).toBe(true);
    await real.calicoctl(['delete', 'node', 'bare-metal-1']);
    // Killed right after the lock (step 2): the rollback only unlocks etcd, calico-etcd.yaml's objects untouched.
    const early = path.join(work, 'migrate-early.json');
    expect((await cli(['plan', '--migrate-datastore', '--bundle', bundle, '--no-disk-snapshots', '--out', early])).code).toBe(0);
    const dsBefore = (await client.get(K.daemonSet, 'kube-system', 'calico-node')).metadata.resourceVersion;
    expect((await cli(['apply', early, '--yes'], { [KILL_AFTER_STEP_ENV]: '2' })).code).not.toBe(0);
    expect(await etcdInfo()).toBe(false);
    const unlocked = await cli(['apply', early, '--rollback', '--yes']);
    expect(unlocked.code, `${unlocked.stdout}\n${unlocked.stderr}`).toBe(0);
    expect(unlocked.stdout).toContain("calico-etcd.yaml was still in place; Calico's etcd unlocked");
    expect(await etcdInfo()).toBe(true);
    expect((await client.get(K.daemonSet, 'kube-system', 'calico-node')).metadata.resourceVersion).toBe(dsBefore);

    const plan = await cli(['plan', '--migrate-datastore', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile]);
    expect(plan.code, `${plan.stdout}\n${plan.stderr}`).toBe(0);
    const written = readPlan(planFile);
    expect(written.steps.map((st) => st.id)).toEqual(MIGRATE_STEP_IDS);
    expect(written.migrate?.rollback.calicoConfig.etcd_endpoints).toBe(real.etcd().endpoint);
    expect(Object.keys(written.transforms.manifest?.calicoConfig ?? {}).filter((k) => k.startsWith('etcd_'))).toEqual([]);
    // Killed right after step 4 (apply-calico-manifest): calico.yaml in place, both datastores locked.
    const killed = await cli(['apply', planFile, '--yes'], { [KILL_AFTER_STEP_ENV]: '4' });
    expect(killed.code, `${killed.stdout}\n${killed.stderr}`).not.toBe(0);
    expect((await calicoConfigData(client)).etcd_endpoints).toBeUndefined();
    expect(await kddReady(client)).toBe(false);
    expect(await etcdInfo()).toBe(false);

    const back = await cli(['apply', planFile, '--rollback', '--yes']);
    expect(back.code, `${back.stdout}\n${back.stderr}`).toBe(0);
    expect(back.stdout).toContain('rolled back');
    expect(back.stdout).toContain('kubectl delete crd');
    expect((await calicoConfigData(client)).etcd_endpoints).toBe(real.etcd().endpoint);
    expect(await etcdInfo()).toBe(true);
    await client.create(K.pod, podOn('etcd-web-5', real.nodes[1]!));
    const ip = await waitPodIp('etcd-web-5');
    const held = await ipamHolders();
    expect(held.get(ip)).toBe('etcd-web-5');
    expect([...held.values()].filter((p) => p === 'etcd-web-5')).toHaveLength(1);
    // The copy is still there, so a new plan is refused until it is deleted as the rollback said.
    const again = await cli(['plan', '--migrate-datastore', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile]);
    expect(again.code, again.stderr).toBe(5);
    expect(again.stderr).toContain('already holds Calico data');
    expect((await deleteCalicoCrds(client)).length).toBeGreaterThan(5);
  });

  it('the migration: the copy verified against etcd, calico.yaml rolled out, Kubernetes unlocked; every pod keeps its address and a new one gets a free one', async () => {
    const client = real.client();
    const fresh = path.join(work, 'bundle-before-migration');
    const b = await runCli(['backup', '--out', fresh, '--allow-unprotected-nodes']);
    expect([0, 3], b.stderr).toContain(b.code);
    const plan = await cli(['plan', '--migrate-datastore', '--bundle', fresh, '--no-disk-snapshots', '--out', planFile]);
    expect(plan.code, `${plan.stdout}\n${plan.stderr}`).toBe(0);
    const r = await cli(['apply', planFile, '--yes', '-o', 'json']);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.steps.find((st: { id: string }) => st.id === 'verify-migrated').summary).toMatch(/IPAM allocations/);
    expect(await kddReady(client)).toBe(true);
    expect((await calicoConfigData(client)).etcd_endpoints).toBeUndefined();
    const status = await runCli(['status']);
    expect(status.stdout).toContain('Datastore   Kubernetes');
    // The user's configuration in the Kubernetes datastore.
    const reserved = (await client.listAll<KubeObject>(KDD.ipPool)).find((p) => p.spec.cidr === '10.77.0.0/24');
    expect(reserved?.spec.disabled).toBe(true);
    expect((await client.listAll<KubeObject>(KDD.gnp)).map((p) => p.metadata.name).join(' ')).toContain('deny-metadata');
    expect((await client.listAll<KubeObject>(KDD.np, { namespace: 'default' })).map((p) => p.metadata.name).join(' ')).toContain('allow-web');
    // Every running pod's address is held in the copied IPAM by that pod; a new pod gets an address none of them has.
    await client.create(K.pod, podOn('etcd-web-6', real.nodes[0]!));
    const ip = await waitPodIp('etcd-web-6');
    const pods = (await client.listAll<KubeObject>(K.pod, { namespace: 'default' })).filter((p) => p.metadata.name!.startsWith('etcd-web-'));
    const addrs = pods.map((p) => p.status?.podIP as string);
    expect(new Set(addrs).size, addrs.join(' ')).toBe(pods.length);
    expect(addrs).toContain(ip);
    const held = await kddIpamHolders(client);
    for (const p of pods) expect(held.get(p.status!.podIP), p.metadata.name).toBe(p.metadata.name);
    // Once pods got addresses from the copy, going back to etcd would give them out twice: refused.
    const back = await cli(['apply', planFile, '--rollback', '--yes']);
    expect(back.code, back.stderr).toBe(5);
    expect(back.stderr).toContain('the migration finished');
  });
});
