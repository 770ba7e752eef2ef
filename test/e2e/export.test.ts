import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import { resourceKey } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { packageRoot } from '../../src/core/package-root.js';
import { applyFixture, calicoType, deleteNodes, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';
import { populateCalico, type Population } from './population.js';

const CALICO_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io', 'policy.networking.k8s.io'];
const SECRET_VALUE = 'c3VwZXItc2VjcmV0LWNhLWtleS1kby1ub3QtcHJpbnQ='; // base64 of a fake CA key

describe('export, inspect, verify, list, diff on a populated Calico 3.28.1 cluster', () => {
  let client: KubeClient;
  let pop: Population;
  let work: string;
  let bundle: string;

  const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at /);

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await deleteNodes(client, 'exp-');
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    pop = await populateCalico(client, { prefix: 'exp', nodes: ['exp-node-1', 'exp-node-2', 'exp-node-3'] });
    await createFakeNodes(client, [
      {
        name: 'exp-node-1',
        providerID: 'aws:///us-east-1a/i-0123456789abcdef0',
        annotations: { 'projectcalico.org/IPv4Address': '10.0.0.11/24', 'projectcalico.org/IPv4VXLANTunnelAddr': '10.240.0.1' },
      },
      { name: 'exp-node-2', annotations: { 'projectcalico.org/IPv4Address': '10.0.0.12/24' } },
    ]);
    await client.apply(
      K.secret,
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'tigera-ca-private', namespace: 'tigera-operator' }, data: { 'tls.key': SECRET_VALUE } },
      { fieldManager: 'e2e' },
    );
    await client.apply(
      K.configMap,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'kubernetes-services-endpoint', namespace: 'tigera-operator' },
        data: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '6443' },
      },
      { fieldManager: 'e2e' },
    );
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-export-e2e-'));
    bundle = path.join(work, 'b1');
  });
  afterAll(async () => {
    await deleteNodes(client, 'exp-');
    client.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** Live object counts of every Calico CRD, keyed `<plural>.<group>`, read independently of the tool. */
  async function liveCounts(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const crd of (await client.listAll(K.crd)).filter((c) => CALICO_GROUPS.includes(c.spec.group))) {
      const t = crdResourceType(crd);
      out[resourceKey(t)] = (await client.listAll(t)).length;
    }
    return out;
  }

  it('exports; inspect -o json reports exactly the counts that exist; verify passes; diff exits 0', async () => {
    const r = await runCli(['export', '--out', bundle, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(SECRET_VALUE);
    expect(JSON.parse(r.stdout).path).toBe(bundle);

    const i = await runCli(['inspect', bundle, '-o', 'json']);
    expect(i.code, i.stderr).toBe(0);
    const m = JSON.parse(i.stdout);
    const live = await liveCounts();
    expect(Object.keys(live)).toHaveLength(22);
    for (const [k, n] of Object.entries(live)) expect(m.counts[k], k).toBe(n);
    // What the population created is there (and nothing was double counted).
    for (const [k, n] of Object.entries(pop.counts)) expect(m.counts[k], k).toBe(n);
    expect(m.counts['ippools.crd.projectcalico.org']).toBe(3);
    expect(m.counts['customresourcedefinitions.apiextensions.k8s.io']).toBe(22);
    expect(m.counts['secrets']).toBe(1);
    expect(m.counts['nodes']).toBeGreaterThanOrEqual(2);
    const ns = await client.get(K.namespace, undefined, 'kube-system');
    expect(m.cluster.uid).toBe(ns.metadata.uid);
    expect(m.calico).toMatchObject({ installType: 'operator', version: 'v3.28.1' });
    expect(m.formatVersion).toMatch(/^2\.\d+\.\d+$/);
    expect(m.notes.join('\n')).toMatch(/projectcalico\.org\/v3 view skipped/);
    expect(m.snapshots).toEqual([]);

    // Layout, modes, contents.
    expect(fs.statSync(bundle).mode & 0o777).toBe(0o700);
    const secretFile = path.join(bundle, 'config/tigera-operator/Secret/tigera-ca-private.yaml');
    expect(fs.statSync(secretFile).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(secretFile, 'utf8')).toContain(SECRET_VALUE);
    const disabled = fs.readFileSync(path.join(bundle, `resources/crd.projectcalico.org/IPPool/_cluster/${pop.disabledPool}.yaml`), 'utf8');
    expect(disabled).toMatch(/disabled: true/);
    expect(disabled).not.toMatch(/managedFields/);
    expect(fs.existsSync(path.join(bundle, `resources/crd.projectcalico.org/NetworkPolicy/${pop.namespace}/exp-allow-dns.yaml`))).toBe(true);
    expect(fs.readFileSync(path.join(bundle, 'nodes/exp-node-1.yaml'), 'utf8')).toMatch(/projectcalico.org\/IPv4VXLANTunnelAddr: 10\.240\.0\.1/);
    expect(fs.readFileSync(path.join(bundle, 'nodes/exp-node-1.yaml'), 'utf8')).not.toMatch(/kwok/);
    expect(fs.existsSync(path.join(bundle, 'config/tigera-operator/Deployment/tigera-operator.yaml'))).toBe(true);
    expect(fs.readdirSync(work)).toEqual(['b1']); // no temporary left behind

    const table = await runCli(['inspect', bundle]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/ippools\.crd\.projectcalico\.org\s+3/);
    expect(table.stdout).toContain('v3.28.1 (operator install)');

    const v = await runCli(['verify', bundle]);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/OK/);

    const d = await runCli(['diff', bundle]);
    expect(d.code, d.stdout + d.stderr).toBe(0);
    expect(d.stdout).toMatch(/no differences/);
  });

  it('diff exits 1 and shows a changed, a deleted and a new object; --kinds narrows it', async () => {
    const ippool = calicoType('ippools', 'IPPool');
    const gns = calicoType('globalnetworksets', 'GlobalNetworkSet');
    const saved = await client.get(gns, undefined, 'exp-blocklist');
    // The incident: the disabled pool comes back enabled.
    await client.mergePatch(ippool, undefined, pop.disabledPool, { spec: { disabled: false } });
    await client.delete(gns, undefined, 'exp-blocklist');
    await client.apply(
      ippool,
      { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'exp-pool-new' }, spec: { cidr: '10.250.0.0/16' } },
      { fieldManager: 'e2e' },
    );
    try {
      const d = await runCli(['diff', bundle]);
      expect(d.code, d.stderr).toBe(1);
      expect(d.stdout).toContain(`changed:         IPPool ${pop.disabledPool}`);
      expect(d.stdout).toMatch(/^-\s+disabled: true$/m);
      expect(d.stdout).toMatch(/^\+\s+disabled: false$/m);
      expect(d.stdout).toContain('only in bundle:  GlobalNetworkSet exp-blocklist');
      expect(d.stdout).toContain('only in cluster: IPPool exp-pool-new');
      expect(d.stdout).not.toMatch(/resourceVersion|managedFields|creationTimestamp/);

      const j = await runCli(['diff', bundle, '-o', 'json', '--kinds', 'IPPool']);
      expect(j.code).toBe(1);
      const r = JSON.parse(j.stdout);
      expect(r.changed.map((c: any) => c.ref.name)).toEqual([pop.disabledPool]);
      expect(r.onlyInBundle).toEqual([]);
      expect(r.onlyInCluster.map((x: any) => x.name)).toEqual(['exp-pool-new']);
      expect(r.compared).toEqual(['ippools.crd.projectcalico.org']);

      const narrow = await runCli(['diff', bundle, '--kinds', 'networkpolicies,bgppeers']);
      expect(narrow.code, narrow.stdout).toBe(0);
    } finally {
      await client.mergePatch(ippool, undefined, pop.disabledPool, { spec: { disabled: true } });
      await client.delete(ippool, undefined, 'exp-pool-new');
      const { metadata, ...rest } = saved;
      await client.create(gns, { ...rest, metadata: { name: metadata.name, labels: metadata.labels } });
    }
    const again = await runCli(['diff', bundle]);
    expect(again.code, again.stdout).toBe(0);
  });

  it('verify fails naming the file when one byte is flipped; reading commands refuse the edited file', async () => {
    const copy = path.join(work, 'flipped');
    fs.cpSync(bundle, copy, { recursive: true });
    const rel = `resources/crd.projectcalico.org/IPPool/_cluster/${pop.disabledPool}.yaml`;
    const f = path.join(copy, rel);
    const buf = fs.readFileSync(f);
    const at = buf.indexOf('true');
    buf[at] = 't'.charCodeAt(0) ^ 0x20; // 'true' -> 'True': one byte
    fs.writeFileSync(f, buf);
    const v = await runCli(['verify', copy]);
    expect(v.code).toBe(2);
    expect(v.stdout).toContain(`${rel}: sha256 does not match`);
    expect(v.stderr).toContain(rel);
    noStack(v.stderr);
    const vj = await runCli(['verify', copy, '-o', 'json']);
    expect(JSON.parse(vj.stdout)).toMatchObject({ ok: false, problems: [{ file: rel }] });
    const d = await runCli(['diff', copy]);
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/does not match its checksum/);
    noStack(d.stderr);
  });

  it('writes and reads a .tar.gz; bad input gives one clear line and exit 2', async () => {
    const tgz = path.join(work, 'b2.tar.gz');
    const r = await runCli(['export', '--out', tgz, '--exclude-secrets']);
    expect(r.code, r.stderr).toBe(0);
    expect(fs.readdirSync(work).filter((f) => f.startsWith('.'))).toEqual([]);
    expect((await runCli(['verify', tgz])).code).toBe(0);
    const m = JSON.parse((await runCli(['inspect', tgz, '-o', 'json'])).stdout);
    expect(m.secretsExcluded).toBe(true);
    expect(m.counts.secrets).toBeUndefined();
    expect(m.notes.join(' ')).toMatch(/Secrets were left out/);
    expect(m.counts['ipamblocks.crd.projectcalico.org']).toBe(3);
    expect((await runCli(['diff', tgz])).code).toBe(0);

    const cases: [string, () => string, RegExp][] = [
      [
        'truncated',
        () => {
          const p = path.join(work, 'trunc.tar.gz');
          const full = fs.readFileSync(tgz);
          fs.writeFileSync(p, full.subarray(0, full.length - 200));
          return p;
        },
        /truncated|not a valid gzip|cannot be read/,
      ],
      [
        'not a bundle',
        () => {
          const p = path.join(work, 'notes.txt');
          fs.writeFileSync(p, 'hello');
          return p;
        },
        /is not a bundle/,
      ],
      ['missing', () => path.join(work, 'nope'), /no such bundle/],
      [
        'newer major',
        () => {
          const p = path.join(work, 'future');
          fs.cpSync(bundle, p, { recursive: true });
          const mf = JSON.parse(fs.readFileSync(path.join(p, 'manifest.json'), 'utf8'));
          fs.writeFileSync(path.join(p, 'manifest.json'), JSON.stringify({ ...mf, formatVersion: '3.0.0' }));
          return p;
        },
        /format 3\.0\.0, newer than this cni-rewind reads/,
      ],
    ];
    for (const [what, make, re] of cases) {
      const p = make();
      for (const cmd of ['inspect', 'verify', 'diff']) {
        const x = await runCli([cmd, p]);
        expect(x.code, `${cmd} ${what}: ${x.stderr}`).toBe(2);
        expect(x.stderr, `${cmd} ${what}`).toMatch(re);
        expect(x.stderr.trim().split('\n').length, `${cmd} ${what}: ${x.stderr}`).toBeLessThanOrEqual(2);
        noStack(x.stderr);
      }
    }
  });

  it('list shows bundles newest first and ignores what is not a bundle', async () => {
    const l = await runCli(['list', work, '-o', 'json']);
    expect(l.code, l.stderr).toBe(0);
    const rows = JSON.parse(l.stdout);
    const names = rows.map((r: any) => path.basename(r.path));
    // b2.tar.gz was written after b1; 'future' has a newer major format and is not listed; 'flipped' is a copy of b1.
    expect(names[0]).toBe('b2.tar.gz');
    expect(names).toContain('b1');
    expect(names).not.toContain('future');
    expect(names).not.toContain('notes.txt');
    const dates = rows.map((r: any) => r.createdAt);
    expect([...dates].sort().reverse()).toEqual(dates);
    const t = await runCli(['list', work]);
    expect(t.stdout.split('\n')[0]).toMatch(/^CREATED\s+CLUSTER/);
    // The default directory is ./cni-rewind-backups, relative to where the user runs it.
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-list-'));
    const e = await runCli(['export'], { cwd });
    expect(e.code, e.stderr).toBe(0);
    const dl = JSON.parse((await runCli(['list', '-o', 'json'], { cwd })).stdout);
    expect(dl).toHaveLength(1);
    expect(dl[0].path).toMatch(/^cni-rewind-backups\/cni-rewind-[a-z0-9-]+-\d{8}T\d{6}Z$/);
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('exports a kind a future Calico adds and the shared AdminNetworkPolicy kinds, but not other kinds of that group', async () => {
    const crd = (group: string, kind: string, plural: string, scope = 'Cluster') => ({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      // *.k8s.io groups are protected: the API server wants the approval annotation upstream's CRDs carry.
      metadata: {
        name: `${plural}.${group}`,
        ...(group.endsWith('.k8s.io')
          ? { annotations: { 'api-approved.kubernetes.io': 'https://github.com/kubernetes-sigs/network-policy-api/pull/30' } }
          : {}),
      },
      spec: {
        group,
        names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
        scope,
        versions: [
          { name: 'v1alpha1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } },
        ],
      },
    });
    const future = crd('crd.projectcalico.org', 'FutureThing', 'futurethings');
    const anp = crd('policy.networking.k8s.io', 'AdminNetworkPolicy', 'adminnetworkpolicies');
    // A kind of the shared group that no Calico release ships (3.32's ClusterNetworkPolicy is Calico's and exported).
    const other = crd('policy.networking.k8s.io', 'ExamplePolicy', 'examplepolicies');
    const { applyManifests } = await import('../../src/kube/manifests.js');
    await applyManifests(client, [future, anp, other] as any, { fieldManager: 'e2e' });
    await applyManifests(
      client,
      [
        { apiVersion: 'crd.projectcalico.org/v1alpha1', kind: 'FutureThing', metadata: { name: 'ft-1' }, spec: { x: 1 } },
        { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name: 'anp-1' }, spec: { priority: 10 } },
        { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'ExamplePolicy', metadata: { name: 'ex-1' }, spec: {} },
      ] as any,
      { fieldManager: 'e2e' },
    );
    const out = path.join(work, 'future');
    fs.rmSync(out, { recursive: true, force: true });
    try {
      const r = await runCli(['export', '--out', out]);
      expect(r.code, r.stderr).toBe(0);
      const m = JSON.parse((await runCli(['inspect', out, '-o', 'json'])).stdout);
      expect(m.counts['futurethings.crd.projectcalico.org']).toBe(1);
      expect(m.counts['adminnetworkpolicies.policy.networking.k8s.io']).toBe(1);
      expect(m.counts['examplepolicies.policy.networking.k8s.io']).toBeUndefined();
      expect(fs.existsSync(path.join(out, 'resources/crd.projectcalico.org/FutureThing/_cluster/ft-1.yaml'))).toBe(true);
      expect(fs.existsSync(path.join(out, 'crds/adminnetworkpolicies.policy.networking.k8s.io.yaml'))).toBe(true);
      expect(fs.existsSync(path.join(out, 'crds/examplepolicies.policy.networking.k8s.io.yaml'))).toBe(false);
      expect((await runCli(['verify', out])).code).toBe(0);
      expect((await runCli(['diff', out])).code).toBe(0);
    } finally {
      for (const c of [future, anp, other]) await client.delete(K.crd, undefined, c.metadata.name);
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  it('an interrupted export never leaves something verify accepts', async () => {
    // Enough objects that the export is still writing when it is killed.
    await populateCalico(client, { prefix: 'bulk', nodes: ['bulk-node-1'], extraHandles: 4000, customResources: false });
    for (const sig of ['SIGKILL', 'SIGTERM'] as const) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-interrupt-'));
      const out = path.join(dir, 'b');
      const child = spawn(process.execPath, [path.join(packageRoot(), 'dist/src/cli/main.js'), 'export', '--out', out], {
        env: { ...process.env, KUBECONFIG: kubeconfig() },
        stdio: 'ignore',
      });
      const exited = new Promise<NodeJS.Signals | null>((res) => child.on('exit', (_code, signal) => res(signal)));
      // Wait until IPAM handles are being written, then interrupt.
      const deadline = Date.now() + 60_000;
      for (;;) {
        const partial = fs.readdirSync(dir).find((f) => f.startsWith('.b.partial-'));
        // 4,000 handles are more than one list page: they go into one packed file (bundle format 2).
        if (partial && fs.existsSync(path.join(dir, partial, 'resources/crd.projectcalico.org/IPAMHandle.jsonl'))) break;
        if (Date.now() > deadline) throw new Error('export never started writing IPAM handles');
        await new Promise((r) => setTimeout(r, 20));
      }
      child.kill(sig);
      // SIGTERM: the CLI aborts the export, which removes its directory; then the process still ends by the signal.
      expect(await exited, `${sig} ends the process`).toBe(sig);
      expect(fs.existsSync(out), sig).toBe(false);
      const left = fs.readdirSync(dir);
      if (sig === 'SIGTERM') expect(left, 'SIGTERM cleans up its temporary directory').toEqual([]);
      for (const f of left) {
        const v = await runCli(['verify', path.join(dir, f)]);
        expect(v.code, `${sig}: verify ${f}`).toBe(2);
        expect(v.stderr).toMatch(/not a bundle: it has no manifest\.json/);
      }
      const l = JSON.parse((await runCli(['list', dir, '-o', 'json'])).stdout);
      expect(l).toEqual([]);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
