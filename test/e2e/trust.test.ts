/**
 * Trust boundaries against the real test cluster: a crafted bundle restored with `restore --resources --yes` writes only
 * Calico objects and the config export takes, names every object it refuses, and restores the rest; control
 * characters from a bundle never reach the terminal raw; a key file others can read gets a warning; `diff` names
 * objects that moved and refuses a file whose content is not what its path says; `apply --resume` re-checks the
 * cluster and the bundle before it continues.
 * (The one-line refusals of hostile plans, journals, bundles and key files are in the bad-input corpus.)
 * The population's allocations have their running Pod objects (podsForPopulation): the crafted-bundle restore brings
 * back their lost IPAMBlock, and set-up and each restore end with every pod's address held in IPAM by that pod
 * (expectPodAddressesHeld, issue 29).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configPathFor, resourcePathFor } from '../../src/bundle/paths.js';
import { dumpYaml } from '../../src/bundle/writer.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import { K } from '../../src/kube/builtin.js';
import { loadPlanKey, signPlan } from '../../src/plan/signature.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, calicoType, deleteNodes, resetCalico, runCli, testClient } from './helpers.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');
const POP_NS = 'trust-app';

/** Put an object into a bundle directory at `rel` and list it in the manifest (checksums right: only the content lies). */
function plant(dir: string, m: any, rel: string, obj: KubeObject): void {
  const body = dumpYaml(obj);
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), body);
  m.files[rel] = { sha256: sha256(body), size: Buffer.byteLength(body) };
}

describe('trust boundaries against the test cluster', () => {
  let client: KubeClient;
  let pop: Population;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-trust-'));
  const base = path.join(work, 'base');

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    // A run stopped half-way leaves the population's pods behind: start without them.
    await client.delete(K.namespace, undefined, POP_NS);
    await client.waitFor(`namespace ${POP_NS} gone`, async () => ((await client.getOrUndefined(K.namespace, undefined, POP_NS)) ? undefined : true), {
      timeoutMs: 120_000,
    });
    await deleteNodes(client, 'trust-');
    await createFakeNodes(client, [{ name: 'trust-node-1' }]);
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    pop = await populateCalico(client, { prefix: 'trust', namespace: POP_NS, nodes: ['trust-node-1'], customResources: false });
    // The pods behind the population's allocations, running with those addresses: restore puts back only
    // allocations a running pod uses (src/restore/ipam-use.ts).
    await podsForPopulation(client, pop);
    await expectPodAddressesHeld(client, populationPods(pop).length);
    const r = await runCli(['export', '--out', base]);
    expect(r.code, r.stderr).toBe(0);
  }, 600_000);
  afterAll(async () => {
    await client?.delete(K.namespace, undefined, POP_NS).catch(() => undefined);
    if (client) await deleteNodes(client, 'trust-').catch(() => undefined);
    client?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('restore of a crafted bundle writes none of the planted objects, names each, restores the rest', async () => {
    const dir = path.join(work, 'crafted');
    fs.cpSync(base, dir, { recursive: true });
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    const crb = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'trust-pwn' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'default' }],
    };
    plant(dir, m, resourcePathFor(crb as any), crb as any);
    m.resources.push({
      key: 'clusterrolebindings.rbac.authorization.k8s.io',
      group: 'rbac.authorization.k8s.io',
      version: 'v1',
      kind: 'ClusterRoleBinding',
      plural: 'clusterrolebindings',
      namespaced: false,
      count: 1,
    });
    m.counts['clusterrolebindings.rbac.authorization.k8s.io'] = 1;
    const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'trust-pwn', namespace: 'kube-system' }, stringData: { token: 'planted' } };
    plant(dir, m, configPathFor(secret as any), secret as any);
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'trust-pwn', namespace: 'tigera-operator' },
      spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'x', image: 'evil' }] } } },
    };
    plant(dir, m, configPathFor(deployment as any), deployment as any);
    // A Calico NetworkPolicy whose file says namespace trust-app while its content says kube-system.
    const np = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'trust-moved', namespace: 'kube-system' },
      spec: { selector: 'all()', types: ['Ingress'] },
    };
    plant(dir, m, resourcePathFor({ ...np, metadata: { ...np.metadata, namespace: pop.namespace } } as any), np as any);
    const netpols = m.resources.find((r: any) => r.kind === 'NetworkPolicy' && r.group === 'crd.projectcalico.org');
    netpols.count += 1;
    m.counts[netpols.key] = netpols.count;
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));
    expect((await runCli(['verify', dir])).code, 'the crafted bundle is self-consistent').toBe(0);

    // Something to restore: a pool of the population and the IPAMBlock its running pods' addresses are allocated
    // in, both deleted (the pods still run with those addresses: IPAM considers them free until the restore).
    const poolObj = pop.objects.find((o) => o.kind === 'IPPool')!;
    const ippools = calicoType('ippools', 'IPPool');
    await client.delete(ippools, undefined, poolObj.metadata.name);
    const blockObj = pop.objects.find((o) => o.kind === 'IPAMBlock')!;
    const ipamblocks = calicoType('ipamblocks', 'IPAMBlock');
    await client.delete(ipamblocks, undefined, blockObj.metadata.name);

    const r = await runCli(['restore', dir, '--resources', '--yes']);
    const out = r.stdout + r.stderr;
    expect(r.code, out).toBe(3);
    expect(out).toMatch(/ClusterRoleBinding trust-pwn: not restored: rbac\.authorization\.k8s\.io\/v1 ClusterRoleBinding is not a Calico kind/);
    expect(out).toMatch(/Secret kube-system\/trust-pwn: not restored: Secret kube-system\/trust-pwn is not Calico configuration/);
    expect(out).toMatch(/Deployment tigera-operator\/trust-pwn: not restored: Deployment tigera-operator\/trust-pwn is not Calico configuration/);
    expect(out).toMatch(
      /NetworkPolicy kube-system\/trust-moved: not restored: resources\/crd\.projectcalico\.org\/NetworkPolicy\/trust-app\/trust-moved\.yaml holds .* which belongs at resources\/crd\.projectcalico\.org\/NetworkPolicy\/kube-system\/trust-moved\.yaml/,
    );

    expect(await client.getOrUndefined(K.clusterRoleBinding, undefined, 'trust-pwn')).toBeUndefined();
    expect(await client.getOrUndefined(K.secret, 'kube-system', 'trust-pwn')).toBeUndefined();
    expect(await client.getOrUndefined(K.deployment, 'tigera-operator', 'trust-pwn')).toBeUndefined();
    const netpolType = calicoType('networkpolicies', 'NetworkPolicy', true);
    expect(await client.getOrUndefined(netpolType, 'kube-system', 'trust-moved')).toBeUndefined();
    expect(await client.getOrUndefined(netpolType, pop.namespace, 'trust-moved')).toBeUndefined();
    // The rest of the bundle was restored: the pool, and the block with every running pod's allocation.
    expect((await client.get(ippools, undefined, poolObj.metadata.name)).spec.cidr).toBe(poolObj.spec.cidr);
    expect((await client.get(ipamblocks, undefined, blockObj.metadata.name)).spec.cidr).toBe(blockObj.spec.cidr);
    await expectPodAddressesHeld(client, populationPods(pop).length);
  });

  it('restore does not create a Calico CRD whose conversion webhook the bundle changed (issue 32 #6)', async () => {
    const name = 'caliconodestatuses.crd.projectcalico.org';
    const dir = path.join(work, 'crd-webhook');
    fs.cpSync(base, dir, { recursive: true });
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    const rel = `crds/${name}.yaml`;
    const crd = yaml.load(fs.readFileSync(path.join(dir, rel), 'utf8')) as any;
    crd.spec.conversion = {
      strategy: 'Webhook',
      webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://127.0.0.1:1/collect' } },
    };
    plant(dir, m, rel, crd);
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));
    expect((await runCli(['verify', dir])).code, 'the edited bundle is self-consistent').toBe(0);
    await client.delete(K.crd, undefined, name);
    for (let i = 0; i < 100 && (await client.getOrUndefined(K.crd, undefined, name)); i++) await new Promise((r) => setTimeout(r, 100));
    try {
      const r = await runCli(['restore', dir, '--resources', '--yes']);
      const out = r.stdout + r.stderr;
      expect(r.code, out).toBe(3);
      expect(out).toMatch(
        /CustomResourceDefinition caliconodestatuses\.crd\.projectcalico\.org: not restored: .*its spec\.conversion differs from every shipped/,
      );
      expect(await client.getOrUndefined(K.crd, undefined, name)).toBeUndefined();
      await expectPodAddressesHeld(client, populationPods(pop).length);
    } finally {
      await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    }
  });

  it('control characters from a bundle are shown escaped by inspect, list, verify and doctor', async () => {
    const root = path.join(work, 'esc-root');
    const dir = path.join(root, 'esc');
    fs.mkdirSync(root);
    fs.cpSync(base, dir, { recursive: true });
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    const evil = '\x1b]0;owned\x07\x1b[2J\nFAKE LINE\r';
    m.id = `id${evil}`;
    m.cluster.name = `c${evil}`;
    m.notes.push(`note${evil}`);
    m.calico.version = `v${evil}`;
    m.createdAt = new Date().toISOString();
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));
    fs.writeFileSync(path.join(dir, `planted${evil.replace(/\n|\r/g, '')}`), 'x');
    for (const args of [
      ['inspect', dir],
      ['list', root],
      ['verify', dir],
      ['doctor', dir],
    ]) {
      const r = await runCli(args);
      const out = r.stdout + r.stderr;
      expect(out, args[0]).not.toMatch(/[\x07\x0d]|\x1b(?!\[(?:1|2|22|31|32|33|39)m)/);
      expect(
        out.split('\n').some((l) => l.startsWith('FAKE LINE')),
        `${args[0]}: ${out}`,
      ).toBe(false);
      if (args[0] === 'inspect' || args[0] === 'list') expect(out, args[0]).toContain('\\x1b]0;owned\\x07');
    }
  });

  it('a key file others can read is used with a warning', async () => {
    const key = path.join(work, 'open.key');
    fs.writeFileSync(key, '6a'.repeat(32), { mode: 0o644 });
    fs.chmodSync(key, 0o644);
    const r = await runCli(['export', '--encrypt', '--encryption-key-file', key, '--out', path.join(work, 'warned')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/warning: encryption key file .*open\.key can be read by other users \(mode 644\); chmod 600 it/);
    fs.chmodSync(key, 0o600);
    const quiet = await runCli(['verify', path.join(work, 'warned'), '--encryption-key-file', key]);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stderr).not.toMatch(/can be read by other users/);
  });

  it('diff names objects that moved (another namespace, another name) and refuses a file whose content lies about its path', async () => {
    const netpols = calicoType('networkpolicies', 'NetworkPolicy', true);
    const gnps = calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy');
    const np = pop.objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'trust-allow-dns')!;
    const gnp = pop.objects.find((o) => o.kind === 'GlobalNetworkPolicy')!;
    await client.delete(netpols, pop.namespace, np.metadata.name);
    await client.create(netpols, { ...np, metadata: { name: np.metadata.name, namespace: 'default' } });
    await client.delete(gnps, undefined, gnp.metadata.name);
    await client.create(gnps, { ...gnp, metadata: { name: 'trust-renamed' } });
    try {
      const r = await runCli(['diff', base, '--kinds', 'NetworkPolicy,GlobalNetworkPolicy']);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toContain(`moved:           NetworkPolicy ${pop.namespace}/trust-allow-dns (bundle) -> NetworkPolicy default/trust-allow-dns (cluster)`);
      expect(r.stdout).toContain(`moved:           GlobalNetworkPolicy ${gnp.metadata.name} (bundle) -> GlobalNetworkPolicy trust-renamed (cluster)`);
      expect(r.stdout).not.toMatch(/only in (bundle|cluster): .*(trust-allow-dns|trust-deny-metadata|trust-renamed)/);
      const j = JSON.parse((await runCli(['diff', base, '--kinds', 'NetworkPolicy,GlobalNetworkPolicy', '-o', 'json'])).stdout);
      expect(j.moved.map((m: any) => `${m.from.name}->${m.to.namespace ?? ''}/${m.to.name}`).sort()).toEqual([
        'trust-allow-dns->default/trust-allow-dns',
        `${gnp.metadata.name}->/trust-renamed`,
      ]);

      // A bundle file moved to another namespace's path (checksums right): its path has no live object, so reading
      // it is the only way to see that it is trust-app's policy; diff refuses the bundle naming the file.
      const dir = path.join(work, 'misplaced');
      fs.cpSync(base, dir, { recursive: true });
      const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
      const rel = Object.keys(m.files).find((f) => f.endsWith(`/NetworkPolicy/${pop.namespace}/trust-deny-db.yaml`))!;
      const moved = rel.replace(`/${pop.namespace}/`, '/kube-system/');
      fs.mkdirSync(path.dirname(path.join(dir, moved)), { recursive: true });
      fs.renameSync(path.join(dir, rel), path.join(dir, moved));
      m.files[moved] = m.files[rel];
      delete m.files[rel];
      fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));
      const d = await runCli(['diff', dir, '--kinds', 'NetworkPolicy']);
      expect(d.code, d.stdout + d.stderr).toBe(2);
      expect(d.stderr).toMatch(
        /NetworkPolicy\/kube-system\/trust-deny-db\.yaml holds .*NetworkPolicy trust-app\/trust-deny-db, which belongs at .*NetworkPolicy\/trust-app\/trust-deny-db\.yaml/,
      );
    } finally {
      await client.delete(netpols, 'default', np.metadata.name);
      await client.delete(gnps, undefined, 'trust-renamed');
      await client.apply(netpols, np, { fieldManager: 'cni-rewind-e2e' });
      await client.apply(gnps, gnp, { fieldManager: 'cni-rewind-e2e' });
    }
  });

  it('apply --resume re-checks the cluster and the bundle: an edited bundle or another cluster is refused (exit 5)', async () => {
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    const bundle = path.join(work, 'resume-base');
    const ex = await runCli(['export', '--out', bundle]);
    expect(ex.code, ex.stderr).toBe(0);
    const plan = path.join(work, 'resume-plan.json');
    const p = await runCli(['plan', '--to', '3.27.4', '--bundle', bundle, '--no-disk-snapshots', '--out', plan]);
    expect(p.code, p.stdout + p.stderr).toBe(0);
    // Started, then killed after its first step (preflight, which changes nothing): a run to resume.
    const started = await runCli(['apply', plan, '--yes'], { env: { CNI_REWIND_TEST_KILL_AFTER_STEP: '1' } });
    expect(started.code, started.stderr).not.toBe(0);
    expect(fs.readdirSync(work).filter((f) => f.startsWith('resume-base.') && f.endsWith('.journal'))).toHaveLength(1);
    try {
      // The bundle edited since the run started (checksum not fixed: verify catches it).
      const rel = Object.keys(JSON.parse(fs.readFileSync(path.join(bundle, 'manifest.json'), 'utf8')).files).find((f) => f.includes('/IPPool/'))!;
      const original = fs.readFileSync(path.join(bundle, rel));
      fs.appendFileSync(path.join(bundle, rel), '# edited\n');
      const edited = await runCli(['apply', plan, '--resume', '--yes']);
      expect(edited.code, edited.stdout + edited.stderr).toBe(5);
      expect(edited.stderr).toMatch(/the plan's bundle .*resume-base fails verify: .*IPPool/);
      fs.writeFileSync(path.join(bundle, rel), original);
      // The same journal resumed against another cluster: the plan (signed by its user) names another uid than
      // this cluster's, as a plan made on cluster A and resumed with a kubeconfig of cluster B does.
      const other = path.join(work, 'resume-plan-other.json');
      const pj = JSON.parse(fs.readFileSync(plan, 'utf8'));
      pj.cluster.uid = '00000000-0000-0000-0000-000000000001';
      fs.writeFileSync(other, JSON.stringify(signPlan(pj, loadPlanKey()!)));
      const elsewhere = await runCli(['apply', other, '--resume', '--yes']);
      expect(elsewhere.code, elsewhere.stdout + elsewhere.stderr).toBe(5);
      expect(elsewhere.stderr).toMatch(/this plan was made for cluster .*uid 00000000-0000-0000-0000-000000000001.*not this one/);
      // Nothing after the preflight step ran: the operator was never paused.
      expect((await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec.replicas).toBe(1);
    } finally {
      await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    }
  });
});
