/**
 * plan + apply for a calico.yaml (manifest) install against the real control plane: Calico 3.28.1 installed from
 * its calico.yaml (kube-system calico-node DaemonSet, calico-kube-controllers, the 18 crd.projectcalico.org CRDs;
 * kwok's fake kubelets run the pods) with a realistic population, downgraded in place to 3.27.4, interrupted
 * (SIGKILL) at every step boundary and resumed, then upgraded to 3.28.1 and to 3.30.7. calico-node itself does not
 * run here: where it would write ClusterInformation on start, the test says so and writes it.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal, journalPathFor } from '../../src/apply/journal.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { deleteNodes, runCli, testClient } from './helpers.js';
import { applyKilledAtEachStep } from './plan-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import {
  freshManifestCluster,
  fixtures,
  NODES,
  MANIFEST_STEPS,
  CLUSTER_INFO,
  FELIX,
  FELIX_NODE,
  images,
  calicoYaml,
  REGISTRY,
  RELEASE_REPO,
  installedYaml,
  nodeSettings,
  crdSchemas,
  manifestSnapshot,
  waitManifestRollout,
  installCalicoManifest,
  calicoNodeStarted,
} from './plan-manifest-support.js';

describe('plan and apply on a calico.yaml (manifest) install: 3.28.1 -> 3.27.4 -> 3.28.1 -> 3.30.7', () => {
  let client: KubeClient;
  let dir: string;
  let population: Population;
  let installed: Awaited<ReturnType<typeof manifestSnapshot>>;
  let downgraded: Awaited<ReturnType<typeof manifestSnapshot>> | undefined;
  const timings: string[] = [];

  async function exportAndPlan(name: string, to: string, extra: string[] = []): Promise<{ bundle: string; plan: string; out: any }> {
    const bundle = path.join(dir, `bundle-${name}`);
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, `plan-${name}.yaml`);
    const p = await runCli(['plan', '--to', to, '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json', ...extra]);
    expect(p.code, p.stderr).toBe(0);
    return { bundle, plan, out: JSON.parse(p.stdout) };
  }

  async function applyPlan(name: string, plan: string): Promise<any> {
    const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const res = JSON.parse(r.stdout);
    expect(res.ok).toBe(true);
    expect(res.steps.map((s: any) => s.status)).toEqual(MANIFEST_STEPS.map(() => 'done'));
    const line = `${name}: ${res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', ')}`;
    timings.push(line);
    console.log('apply steps', line);
    return res;
  }

  /** The cluster runs exactly `version`'s calico.yaml with the admins' edits: its CRD definitions, workload images (rolled out), calico-node settings and calico-config. */
  async function expectExactly(version: string): Promise<void> {
    const want = installedYaml(version);
    const snap = await manifestSnapshot(client);
    for (const crd of want.filter((o) => o.kind === 'CustomResourceDefinition' && o.spec.group === 'crd.projectcalico.org')) {
      expect(snap.crds[crd.metadata.name], crd.metadata.name).toBe(crdSchemas(crd));
    }
    // No operator.tigera.io CRD appeared: a calico.yaml install has none (the fixtures folder also holds tigera-operator.yaml).
    expect(Object.keys(snap.crds).filter((n) => n.endsWith('.operator.tigera.io'))).toEqual([]);
    expect(snap.node).toEqual(images(want.find((o) => o.kind === 'DaemonSet')));
    expect(snap.node).toContain(`${REGISTRY}node:v${version}`);
    expect(snap.kubeControllers).toEqual([`${REGISTRY}kube-controllers:v${version}`]);
    expect(snap.nodeSettings).toEqual(nodeSettings(want.find((o) => o.kind === 'DaemonSet')));
    expect(snap.nodeSettings.env).toEqual(
      expect.arrayContaining(['IP_AUTODETECTION_METHOD=interface=ens.*', 'CALICO_IPV4POOL_VXLAN=Always', 'CALICO_IPV4POOL_CIDR=10.244.0.0/16']),
    );
    expect(snap.config).toBe(canonicalJson(want.find((o) => o.kind === 'ConfigMap')!.data));
    expect(JSON.parse(snap.config)).toMatchObject({ calico_backend: 'vxlan', veth_mtu: '1450' });
    await waitManifestRollout(client, version); // already done: apply's wait-rollout waited for it
    const pods = await client.listAll(K.pod, { namespace: 'kube-system', labelSelector: 'k8s-app=calico-node' });
    expect(
      pods
        .filter((p) => !p.metadata.deletionTimestamp)
        .map((p) => p.spec.containers[0].image)
        .sort(),
    ).toEqual(NODES.map(() => `${REGISTRY}node:v${version}`));
    // The apply must not free an address a running pod has (issue 29): the population's allocations have their pods.
    await expectPodAddressesHeld(client, populationPods(population).length);
  }

  /** Every population object is present with the content it had at install time (except those named). */
  function expectDataUnchanged(snap: Awaited<ReturnType<typeof manifestSnapshot>>, except: string[] = []): void {
    for (const o of population.objects) {
      const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      expect(snap.data[k], k).toBeDefined();
      if (!except.includes(k)) expect(snap.data[k], k).toBe(installed.data[k]);
    }
    const keys = (s: typeof snap) =>
      Object.keys(s.data)
        .filter((k) => !k.startsWith('ClusterInformation/'))
        .sort();
    expect(keys(snap)).toEqual(keys(installed));
  }

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-plan-manifest-e2e-'));
    await freshManifestCluster(client, 'fpm-');
    await installCalicoManifest(client, '3.28.1');
    await calicoNodeStarted(client, 'v3.28.1');
    population = await populateCalico(client, { prefix: 'fpm', nodes: NODES, customResources: false });
    const felix = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'FelixConfiguration',
      metadata: { name: FELIX_NODE },
      spec: { debugPort: 6061, logSeverityScreen: 'Debug' },
    };
    await client.apply(FELIX, felix, { fieldManager: 'cni-rewind-e2e' });
    population.objects.push(felix);
    await podsForPopulation(client, population);
    expect(populationPods(population).length).toBeGreaterThan(0);
    await expectPodAddressesHeld(client, populationPods(population).length);
    installed = await manifestSnapshot(client);
  }, 600_000);
  afterAll(async () => {
    if (timings.length) console.log(`plan-manifest apply timings:\n  ${timings.join('\n  ')}`);
    await deleteNodes(client, 'fpm-');
    client.close();
  });

  it('status and doctor detect a manifest install of v3.28.1', async () => {
    const s = await runCli(['status', '-o', 'json']);
    expect(s.code, s.stderr).toBe(0);
    expect(JSON.parse(s.stdout).calico).toMatchObject({
      installType: 'manifest',
      version: 'v3.28.1',
      versionSource: 'calico-node-image',
      calicoNodeImage: `${REGISTRY}node:v3.28.1`,
      calicoNodeNamespace: 'kube-system',
    });
    const d = await runCli(['doctor', '-o', 'json']);
    expect([0, 1], d.stderr).toContain(d.code);
    const report = JSON.parse(d.stdout);
    expect(report.calico).toMatchObject({ installType: 'manifest', version: 'v3.28.1' });
    expect(report.findings.map((f: any) => f.id)).not.toContain('version-skew');
  });

  it('plan --to 3.27.4 lays out the manifest steps and the schema finding, refuses --strategy reinstall in one line, changes nothing', async () => {
    const before = await manifestSnapshot(client);
    const bundle = path.join(dir, 'bundle-plan-only');
    expect((await runCli(['export', '--out', bundle])).code).toBe(0);
    const args = ['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots'];

    // The FelixConfiguration field 3.27 prunes needs --allow-field-loss: exit 5, saying which object and field.
    const refused = await runCli([...args, '-o', 'json']);
    expect(refused.code, refused.stderr).toBe(5);
    const out = JSON.parse(refused.stdout);
    expect(out.current).toMatchObject({ installType: 'manifest', version: 'v3.28.1' });
    expect(out.current.operatorImage).toBeUndefined();
    expect(out.target.version).toBe('v3.27.4');
    expect(out.target.operatorImage).toBeUndefined();
    expect(Object.keys(out.target.files).sort()).toEqual(['calico.yaml', 'custom-resources.yaml']);
    expect(out.direction).toBe('downgrade');
    expect(out.steps.map((s: any) => s.id)).toEqual(MANIFEST_STEPS);
    const f = out.findings.find((x: any) => x.id === 'felixconfiguration-fields-pruned');
    expect(f, JSON.stringify(out.findings)).toMatchObject({
      action: 'requires-flag',
      flag: 'allow-field-loss',
      satisfied: false,
      objects: [`FelixConfiguration/${FELIX_NODE}`],
    });
    expect(f.details.join('\n')).toMatch(/spec\.debugPort/);
    expect(out.findings.filter((x: any) => x.action === 'refuse' || x.id.startsWith('installation'))).toEqual([]);
    // The admins' edits of the 3.28.1 calico.yaml, found against the release and carried into 3.27.4's.
    const edits = out.findings.find((x: any) => x.id === 'calico-manifest-edits');
    expect(edits, JSON.stringify(out.findings)).toMatchObject({
      action: 'transform',
      objects: expect.arrayContaining([
        'DaemonSet/kube-system/calico-node',
        'ConfigMap/kube-system/calico-config',
        'Deployment/kube-system/calico-kube-controllers',
      ]),
    });
    expect(edits.details).toEqual(
      expect.arrayContaining([
        'calico-node env IP_AUTODETECTION_METHOD=interface=ens.* (v3.28.1 calico.yaml: not set)',
        'calico-node env CALICO_IPV4POOL_VXLAN=Always (v3.28.1 calico.yaml: Never)',
        'calico-config calico_backend=vxlan (v3.28.1 calico.yaml: bird)',
        'calico-config veth_mtu=1450 (v3.28.1 calico.yaml: 0)',
        `image ${REGISTRY}node instead of ${RELEASE_REPO}node`,
      ]),
    );
    expect(edits.details).toHaveLength(11);
    expect(out.transforms.manifest.from).toBe('v3.28.1');
    expect(refused.stderr).toMatch(/FelixConfiguration fields that v3\.27\.4's CRD prunes/);

    const human = await runCli([...args, '--allow-field-loss']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('Calico v3.28.1 (manifest install) -> v3.27.4: downgrade');
    expect(human.stdout).toMatch(/2\. apply the target CRDs: replace each crd\.projectcalico\.org CRD of calico\.yaml/);
    expect(human.stdout).toMatch(/3\. apply the target calico\.yaml/);
    expect(human.stdout).toMatch(/4\. wait for the rollout: the calico-node DaemonSet and the calico-kube-controllers Deployment in kube-system/);
    expect(human.stdout).not.toMatch(/pause|tigera|Installation/);
    expect(human.stdout).toContain('spec.debugPort (unknown to v3.27.4)');

    // Reinstall is not built for calico.yaml installs: one clear line, exit 2, nothing written.
    const planFile = path.join(dir, 'plan-reinstall.yaml');
    const re = await runCli([...args, '--allow-field-loss', '--strategy', 'reinstall', '--out', planFile]);
    expect(re.code).toBe(2);
    expect(re.stdout).toBe('');
    expect(re.stderr.trim().split('\n')).toHaveLength(1);
    expect(re.stderr).toMatch(/--strategy reinstall is implemented for operator installs only; use in-place/);

    expect(await manifestSnapshot(client)).toEqual(before);
  });

  it('apply --yes downgrades to exactly 3.27.4 (CRDs, images, rollout) and keeps every pool, IPAM object and policy unchanged; diff shows only the planned changes', async () => {
    const { plan, bundle, out } = await exportAndPlan('down', '3.27.4', ['--allow-field-loss']);
    const res = await applyPlan('3.28.1 -> 3.27.4', plan);
    expect(res.steps.find((s: any) => s.id === 'apply-calico-manifest').summary).toMatch(
      /13 objects of calico\.yaml applied with 11 edit\(s\) of the v3\.28\.1 calico\.yaml carried over/,
    );
    expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toMatch(
      /DaemonSet calico-node .*registry\.example\.internal:5000\/calico\/node:v3\.27\.4 rolled out; Deployment calico-kube-controllers registry\.example\.internal:5000\/calico\/kube-controllers:v3\.27\.4 rolled out/,
    );
    await expectExactly('3.27.4');

    // The version is the DaemonSet's now, although ClusterInformation still names 3.28.1 until calico-node restarts.
    expect((await client.get(CLUSTER_INFO, undefined, 'default')).spec.calicoVersion).toBe('v3.28.1');
    const s = JSON.parse((await runCli(['status', '-o', 'json'])).stdout);
    expect(s.calico).toMatchObject({ installType: 'manifest', version: 'v3.27.4' });
    await calicoNodeStarted(client, 'v3.27.4');

    // Data: every pool (the disabled one still disabled), IPAM object and policy as before; the per-node
    // FelixConfiguration lost debugPort, as the plan said (--allow-field-loss).
    const after = await manifestSnapshot(client);
    expectDataUnchanged(after, [`FelixConfiguration//${FELIX_NODE}`]);
    expect(JSON.parse(after.data[`IPPool//${population.disabledPool}`]!).spec.disabled).toBe(true);
    expect(JSON.parse(after.data[`FelixConfiguration//${FELIX_NODE}`]!).spec).toEqual({ logSeverityScreen: 'Debug' });

    // diff against the bundle (Calico resources and CRDs): exactly what the plan changed: the CRDs whose
    // definition differs between the two calico.yaml, the pruned Felix field, ClusterInformation's version.
    const d = await runCli(['diff', bundle, '-o', 'json']);
    expect(d.code, d.stderr).toBe(1);
    const diff = JSON.parse(d.stdout);
    const changed = diff.changed.map((c: any) => `${c.ref.kind}/${c.ref.namespace ?? ''}/${c.ref.name}`).sort();
    console.log('diff after the downgrade:', changed.join(', '));
    expect(diff.onlyInBundle).toEqual([]);
    expect(diff.onlyInCluster).toEqual([]);
    const newer = new Map(calicoYaml('3.28.1').map((o) => [o.metadata.name, canonicalJson(o.spec)]));
    const planned = [
      'ClusterInformation//default',
      `FelixConfiguration//${FELIX_NODE}`,
      ...calicoYaml('3.27.4')
        .filter((o) => o.kind === 'CustomResourceDefinition' && newer.get(o.metadata.name) !== canonicalJson(o.spec))
        .map((o) => `CustomResourceDefinition//${o.metadata.name}`),
    ].sort();
    expect(changed).toEqual(planned);
    expect(changed).toContain('CustomResourceDefinition//felixconfigurations.crd.projectcalico.org');

    const j = Journal.read(journalPathFor(bundle, out.id));
    expect(j.done).toBe(true);
    expect((await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME)).spec.holderIdentity).toBeUndefined();
    downgraded = after;
  });

  it('SIGKILL after each step in turn, then --resume: the downgrade ends in the same state', async () => {
    expect(downgraded, 'needs the uninterrupted downgrade above').toBeDefined();
    await installCalicoManifest(client, '3.28.1');
    await calicoNodeStarted(client, 'v3.28.1');
    const { plan, bundle, out } = await exportAndPlan('killed', '3.27.4', ['--allow-field-loss']);
    expect(out.steps.map((s: any) => s.id)).toEqual(MANIFEST_STEPS);
    await applyKilledAtEachStep(plan, bundle, out, async (k) => {
      if (k === 2) {
        // Killed between the CRDs and calico.yaml: the 3.27.4 CRDs are in, calico-node still runs 3.28.1.
        expect(images(await client.get(K.daemonSet, 'kube-system', 'calico-node'))).toContain(`${REGISTRY}node:v3.28.1`);
      }
    });
    await expectExactly('3.27.4');
    await calicoNodeStarted(client, 'v3.27.4');
    expect(await manifestSnapshot(client)).toEqual(downgraded);
  });

  it("upgrade 3.27.4 -> 3.28.1: only the admins' calico.yaml edits to carry, exactly 3.28.1 (with them) afterwards, data unchanged", async () => {
    const before = await manifestSnapshot(client);
    const { plan, out } = await exportAndPlan('up-3.28.1', '3.28.1');
    expect(out).toMatchObject({ direction: 'upgrade', current: { installType: 'manifest', version: 'v3.27.4' }, target: { version: 'v3.28.1' } });
    expect(out.steps.map((s: any) => s.id)).toEqual(MANIFEST_STEPS);
    // Only the admins' edits, now found against the 3.27.4 calico.yaml, to carry over.
    expect(out.findings.filter((f: any) => f.action !== 'none' && f.action !== 'keep').map((f: any) => [f.id, f.details.length])).toEqual([
      ['calico-manifest-edits', 11],
    ]);
    expect(out.transforms.manifest.from).toBe('v3.27.4');
    await applyPlan('3.27.4 -> 3.28.1', plan);
    await expectExactly('3.28.1');
    await calicoNodeStarted(client, 'v3.28.1');
    const after = await manifestSnapshot(client);
    // The debugPort value the 3.27 CRD hid was never written away (the API server prunes on read; nothing wrote
    // the object in between): with the 3.28 CRD it shows again. verify-data does not count that as a change.
    expect(JSON.parse(after.data[`FelixConfiguration//${FELIX_NODE}`]!).spec).toEqual({ debugPort: 6061, logSeverityScreen: 'Debug' });
    expect({ ...after.data, [`FelixConfiguration//${FELIX_NODE}`]: '' }).toEqual({ ...before.data, [`FelixConfiguration//${FELIX_NODE}`]: '' });
    expectDataUnchanged(after);
  });

  it('upgrade 3.28.1 -> 3.30.7: its calico.yaml (22 Calico CRDs + 2 policy.networking.k8s.io) applies and the data stays', async () => {
    const before = await manifestSnapshot(client);
    const { plan, out } = await exportAndPlan('up-3.30.7', '3.30.7');
    expect(out).toMatchObject({ direction: 'upgrade', current: { version: 'v3.28.1' }, target: { version: 'v3.30.7' } });
    expect(out.findings.filter((f: any) => f.action !== 'none' && f.action !== 'keep').map((f: any) => [f.id, f.details.length])).toEqual([
      ['calico-manifest-edits', 11],
    ]);
    await applyPlan('3.28.1 -> 3.30.7', plan);
    await expectExactly('3.30.7');
    for (const crd of calicoYaml('3.30.7').filter((o) => o.kind === 'CustomResourceDefinition' && o.spec.group === 'policy.networking.k8s.io')) {
      expect(crdSchemas(await client.get(K.crd, undefined, crd.metadata.name)), crd.metadata.name).toBe(crdSchemas(crd));
    }
    await calicoNodeStarted(client, 'v3.30.7');
    const after = await manifestSnapshot(client);
    for (const k of Object.keys(before.data)) if (!k.startsWith('ClusterInformation/')) expect(after.data[k], k).toBe(before.data[k]);
  });
});
