import { describe, expect, it } from 'vitest';
import type { Bundle } from '../bundle/reader.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { bundleDataPresent, withoutOperatorDefaults } from './compare.js';
import type { InstallationTransform } from './types.js';

const crd = (kind: string, plural: string): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.crd.projectcalico.org` },
  spec: { group: 'crd.projectcalico.org', scope: 'Cluster', names: { kind, plural }, versions: [{ name: 'v1', served: true, storage: true }] },
});
const CRDS = [crd('IPAMBlock', 'ipamblocks'), crd('IPAMHandle', 'ipamhandles'), crd('BlockAffinity', 'blockaffinities'), crd('IPPool', 'ippools')];
const obj = (kind: string, name: string, spec: unknown): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
/** A CRD (version v1) whose schema gives `spec` these properties: what pruning, defaulting and map checks read. */
const crdWithSpec = (kind: string, plural: string, group: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: 'Cluster',
    names: { kind, plural },
    versions: [
      { name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: spec } } } } },
    ],
  },
});

/** Just what bundleDataPresent reads: CRDs and custom resources listed from the cluster, objects from a bundle. */
function fakes(live: KubeObject[], inBundle: KubeObject[], liveCrds = CRDS, bundleCrds: KubeObject[] = []) {
  const client = {
    listAll: async (t: ResourceType) => (t.kind === 'CustomResourceDefinition' ? liveCrds : live.filter((o) => o.kind === t.kind)),
  } as unknown as KubeClient;
  const bundle = {
    crds: async () => bundleCrds,
    objects: async function* () {
      for (const object of inBundle) yield { object };
    },
  } as unknown as Bundle;
  return { client, bundle };
}

const block = (cidr: string, handles: string[]) =>
  obj('IPAMBlock', cidr.replace(/[./]/g, '-'), { cidr, allocations: handles.map((_, i) => i), attributes: handles.map((h) => ({ handle_id: h })) });
const handle = (id: string) => obj('IPAMHandle', id, { handleID: id, block: { '10.0.0.0/30': 1 } });

describe('verify-data: IPAM is live state', () => {
  it('passes when pods came and went since the backup (blocks changed, handles released and added)', async () => {
    const { client, bundle } = fakes(
      [block('10.0.0.0/30', ['h2', 'h3']), handle('h2'), handle('h3'), obj('IPPool', 'p', { cidr: '10.0.0.0/16' })],
      [
        block('10.0.0.0/30', ['h1', 'h2']),
        handle('h1'),
        handle('h2'),
        obj('BlockAffinity', 'n1-10-0-0-0-30', { node: 'n1' }),
        obj('IPPool', 'p', { cidr: '10.0.0.0/16' }),
      ],
    );
    const r = await bundleDataPresent(client, bundle, {} as never);
    expect(r.differences).toEqual([]);
    expect(r.checked).toBe(5);
  });

  it('still reports a lost IPAM block, and configuration that changed', async () => {
    const { client, bundle } = fakes(
      [obj('IPPool', 'p', { cidr: '10.1.0.0/16' })],
      [block('10.0.0.0/30', ['h1']), obj('IPPool', 'p', { cidr: '10.0.0.0/16' })],
    );
    const r = await bundleDataPresent(client, bundle, {} as never);
    expect(r.differences.map((d) => `${d.object} ${d.problem}`)).toEqual(['IPAMBlock/10-0-0-0-30 missing', 'IPPool/p changed']);
  });

  it('does not call a block lost that kube-controllers removed because it was empty, or because its node went away (issue 29)', async () => {
    const node = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Node', metadata: { name } });
    const on = (b: KubeObject, n: string) => ({ ...b, spec: { ...b.spec, affinity: `host:${n}` } });
    const { client, bundle } = fakes(
      [node('n1')],
      [on(block('10.0.0.0/30', []), 'n1'), on(block('10.0.0.4/30', ['h1']), 'gone-node'), on(block('10.0.0.8/30', ['h2']), 'n1')],
    );
    const r = await bundleDataPresent(client, bundle, {} as never);
    expect(r.differences.map((d) => `${d.object} ${d.problem}`)).toEqual(['IPAMBlock/10-0-0-8-30 missing']);
  });
});

describe("verify-data after an upgrade: what the target's operator writes into FelixConfiguration default (issue 30)", () => {
  const felix = (spec: Record<string, unknown>) => obj('FelixConfiguration', 'default', spec);
  const crds = [...CRDS, crd('FelixConfiguration', 'felixconfigurations')];
  it('vxlanPort: 4789 written by the v1.40 operator is no difference under a 3.31 target; under 3.28 it still is', async () => {
    const { client, bundle } = fakes([felix({ bpfEnabled: false, vxlanPort: 4789 })], [felix({ bpfEnabled: false })], crds);
    expect((await bundleDataPresent(client, bundle, {} as never, 'v3.31.7')).differences).toEqual([]);
    const r = await bundleDataPresent(client, bundle, {} as never, 'v3.28.1');
    expect(r.differences.map((d) => `${d.object} ${d.problem}`)).toEqual(['FelixConfiguration/default changed']);
    expect(r.differences[0]!.detail).toMatch(/vxlanPort/);
  });
});

describe('verify-data: what the operators on both sides of the change write into FelixConfiguration default (issue 30)', () => {
  const felix = (spec: Record<string, unknown>) => obj('FelixConfiguration', 'default', spec);
  const crds = [...CRDS, crd('FelixConfiguration', 'felixconfigurations')];
  /** The differences verify-data reports for a bundle's and the cluster's FelixConfiguration `default` after a change from `installed` to `target`. */
  const judged = async (inBundle: Record<string, unknown>, live: Record<string, unknown>, installed: string, target: string) => {
    const { client, bundle } = fakes([felix(live)], [felix(inBundle)], crds);
    return (await bundleDataPresent(client, bundle, {} as never, target, installed)).differences.map((d) => `${d.object} ${d.problem}: ${d.detail}`);
  };

  it('3.31 -> 3.30: vxlanPort the installed v1.40 operator filled after the backup is no difference, though the v1.38 target never writes it', async () => {
    expect(await judged({ vxlanVNI: 4096 }, { vxlanVNI: 4096, vxlanPort: 4789 }, 'v3.31.7', 'v3.30.7')).toEqual([]);
    // GatewayAPI created between the backup and the pause: v1.40 gatewayapi_controller.go:467 fills policySyncPathPrefix.
    expect(await judged({}, { policySyncPathPrefix: '/var/run/nodeagent' }, 'v3.31.7', 'v3.29.7')).toEqual([]);
    // Neither side's operator writes it: someone else did.
    expect(await judged({}, { vxlanPort: 4789 }, 'v3.30.7', 'v3.29.7')).toEqual([
      expect.stringMatching(/^FelixConfiguration\/default changed: spec\.vxlanPort/),
    ]);
  });

  it('3.31 -> 3.29: the bundle has vxlanPort as v1.40 filled it and the cluster keeps it; another value is still a difference', async () => {
    expect(await judged({ vxlanPort: 4789 }, { vxlanPort: 4789 }, 'v3.31.7', 'v3.29.7')).toEqual([]);
    // Filled only where unset (v1.40.15 core_controller.go:1922): no operator changes a value the bundle has.
    expect(await judged({ vxlanPort: 4789 }, { vxlanPort: 8472 }, 'v3.31.7', 'v3.32.1')).toEqual([
      expect.stringMatching(/vxlanPort: bundle 4789 \/ cluster 8472/),
    ]);
  });

  it("nftablesMode is the target operator's, set from the Installation over any value: Enabled by v1.40, Auto by v1.42 for the same nftables dataplane", async () => {
    expect(await judged({ nftablesMode: 'Enabled' }, { nftablesMode: 'Auto' }, 'v3.31.7', 'v3.32.1')).toEqual([]);
    expect(await judged({ nftablesMode: 'Auto' }, { nftablesMode: 'Enabled' }, 'v3.32.1', 'v3.31.7')).toEqual([]);
    // programClusterRoutes is set from the Installation by v1.42 only: under the v1.40 target another value is a difference.
    expect(await judged({ programClusterRoutes: 'Enabled' }, { programClusterRoutes: 'Disabled' }, 'v3.32.1', 'v3.31.7')).toHaveLength(1);
  });

  it('dnsTrustedServers is no operator default on Calico: every generation writes it for Calico Enterprise only', async () => {
    const openshift = { dnsTrustedServers: ['k8s-service:openshift-dns/dns-default'] };
    expect(await judged({}, openshift, 'v3.31.7', 'v3.32.1')).toEqual([expect.stringMatching(/^FelixConfiguration\/default changed: spec\.dnsTrustedServers/)]);
  });
});

describe('withoutOperatorDefaults: what the tigera operator fills into FelixConfiguration default is not a change', () => {
  const felix = (spec: Record<string, unknown>, name = 'default') => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'FelixConfiguration',
    metadata: { name },
    spec,
  });
  it('drops a field the operator filled where the bundle had none (v1.34.3 writes bpfEnabled: false)', () => {
    const out = withoutOperatorDefaults(felix({ bpfEnabled: false, logSeverityScreen: 'Info' }), felix({ logSeverityScreen: 'Info' }), 'v3.28.1');
    expect(out.spec).toEqual({ logSeverityScreen: 'Info' });
  });
  it('keeps comparing a field the bundle sets, other fields, and other objects', () => {
    expect(withoutOperatorDefaults(felix({ bpfEnabled: true }), felix({ bpfEnabled: false }), 'v3.28.1').spec).toEqual({ bpfEnabled: true });
    expect(withoutOperatorDefaults(felix({ debugPort: 6060 }), felix({}), 'v3.28.1').spec).toEqual({ debugPort: 6060 });
    expect(withoutOperatorDefaults(felix({ bpfEnabled: false }, 'node.a'), felix({}, 'node.a'), 'v3.28.1').spec).toEqual({ bpfEnabled: false });
  });
  it("drops only what the target's operator generation fills (issue 30: tigera/operator v1.32.10-v1.42.3)", () => {
    const filledFrom: [string, unknown, string, string][] = [
      ['vxlanVNI', 4096, 'v3.27.4', 'v3.26.5'],
      ['nftablesMode', 'Disabled', 'v3.29.7', 'v3.28.1'],
      ['vxlanPort', 4789, 'v3.31.7', 'v3.30.7'],
      ['policySyncPathPrefix', '/var/run/nodeagent', 'v3.31.7', 'v3.30.7'],
      ['programClusterRoutes', 'Enabled', 'v3.32.1', 'v3.31.7'],
    ];
    for (const [field, value, filledBy, notYet] of filledFrom) {
      expect(withoutOperatorDefaults(felix({ [field]: value }), felix({}), filledBy).spec, `${field} under ${filledBy}`).toEqual({});
      expect(withoutOperatorDefaults(felix({ [field]: value }), felix({}), notYet).spec, `${field} under ${notYet}`).toEqual({ [field]: value });
    }
  });
});

describe('withoutOperatorDefaults: what the tigera operator writes back into the Installation where it was unset is not a change', () => {
  const inst = (spec: Record<string, unknown>) => ({ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default' }, spec });
  it('drops fields (also inside pool entries) the bundle left unset (v1.34.3 adds nodeAddressAutodetectionV6 once an IPv6 pool exists)', () => {
    const bundle = inst({ calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16' }] } });
    const live = inst({
      calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16', name: 'default-ipv4-ippool' }], nodeAddressAutodetectionV6: { firstFound: true } },
      linuxPolicySetupTimeoutSeconds: 0,
    });
    expect(withoutOperatorDefaults(live, bundle, 'v3.28.1').spec).toEqual(bundle.spec);
  });
  it('still compares what the bundle sets: a changed value, a pool removed or added', () => {
    const bundle = inst({ calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16', encapsulation: 'VXLAN' }], mtu: 1450 } });
    expect(
      withoutOperatorDefaults(inst({ calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16', encapsulation: 'IPIP' }], mtu: 1450 } }), bundle, 'v3.28.1').spec,
    ).toEqual({
      calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16', encapsulation: 'IPIP' }], mtu: 1450 },
    });
    expect(withoutOperatorDefaults(inst({ calicoNetwork: { ipPools: [], mtu: 1450 } }), bundle, 'v3.28.1').spec).toEqual({
      calicoNetwork: { ipPools: [], mtu: 1450 },
    });
    const two = [{ cidr: '192.168.0.0/16', encapsulation: 'VXLAN' }, { cidr: '10.0.0.0/16' }];
    expect(withoutOperatorDefaults(inst({ calicoNetwork: { ipPools: two, mtu: 1450 } }), bundle, 'v3.28.1').spec).toEqual({
      calicoNetwork: { ipPools: two, mtu: 1450 },
    });
  });
});

describe("verify-data: the Installation after a stop in a field the bundle's CRD lacks", () => {
  // Installation CRDs of 3.28 (ipPools entries without disableNewAllocations) and 3.29 (with it).
  const installationCrd = (entryFields: string[]): KubeObject => {
    const props = Object.fromEntries(
      entryFields.map((f) => [f, f === 'blockSize' ? { type: 'integer' } : f === 'disableNewAllocations' ? { type: 'boolean' } : { type: 'string' }]),
    );
    const ipPools = { type: 'array', items: { type: 'object', properties: props } };
    return crdWithSpec('Installation', 'installations', 'operator.tigera.io', { calicoNetwork: { type: 'object', properties: { ipPools } } });
  };
  const fields = ['name', 'cidr', 'blockSize', 'nodeSelector'];
  const crd328 = installationCrd(fields);
  const crd329 = installationCrd([...fields, 'disableNewAllocations']);
  const inst = (pools: Record<string, unknown>[]): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: { calicoNetwork: { ipPools: pools } },
  });
  const old = { name: 'default-ipv4-ippool', cidr: '192.168.0.0/16', blockSize: 26, nodeSelector: 'all()' };
  const other = { name: 'new-ipv4-pool', cidr: '10.100.0.0/16', blockSize: 26, nodeSelector: 'all()' };
  const transform: InstallationTransform = {
    removeFields: [],
    trimPoolsPerFamily: false,
    stopAllocations: { cidrs: ['192.168.0.0/16'], field: 'disableNewAllocations', value: true },
  };

  it('passes when the target operator keeps the planned stop and defaults the field on the other entries (3.28 -> 3.29)', async () => {
    const { client, bundle } = fakes(
      [
        inst([
          { ...old, disableNewAllocations: true },
          { ...other, disableNewAllocations: false },
        ]),
      ],
      [inst([old, other])],
      [...CRDS, crd329],
      [crd328],
    );
    const r = await bundleDataPresent(client, bundle, transform);
    expect(r.differences).toEqual([]);
    expect(r.checked).toBe(1);
  });

  it('reports an entry that lost the planned stop, and other changes', async () => {
    const { client, bundle } = fakes(
      [
        inst([
          { ...old, disableNewAllocations: false },
          { ...other, nodeSelector: '!all()' },
        ]),
      ],
      [inst([old, other])],
      [...CRDS, crd329],
      [crd328],
    );
    const r = await bundleDataPresent(client, bundle, transform);
    expect(r.differences.map((d) => `${d.object} ${d.problem}`)).toEqual(['Installation/default changed']);
    expect(r.differences[0]!.detail).toContain('disableNewAllocations');
    const lostOnly = fakes([inst([{ ...old, disableNewAllocations: false }, other])], [inst([old, other])], [...CRDS, crd329], [crd328]);
    const r2 = await bundleDataPresent(lostOnly.client, lostOnly.bundle, transform);
    expect(r2.differences.map((d) => `${d.object} ${d.problem} ${d.detail}`)).toEqual([
      'Installation/default changed ipPools 192.168.0.0/16: disableNewAllocations true planned, cluster false',
    ]);
  });
});

describe('verify-data: a pool the plan stopped in the target operator\'s terms (3.30 -> 3.28: nodeSelector "!all()")', () => {
  const spec = { cidr: '192.168.0.0/16', blockSize: 26, vxlanMode: 'CrossSubnet', natOutgoing: true, allowedUses: ['Workload', 'Tunnel'] };
  const inBundle = obj('IPPool', 'default-ipv4-ippool', { ...spec, nodeSelector: 'all()', disabled: true });
  const stop = { removeFields: [], trimPoolsPerFamily: false, stopAllocations: { cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' } };

  it("accepts the v1.34 operator's rewrite from the converted entry (the stop set, no `disabled`), and the pool as before it", async () => {
    for (const live of [obj('IPPool', 'default-ipv4-ippool', { ...spec, nodeSelector: '!all()' }), inBundle]) {
      const { client, bundle } = fakes([live], [inBundle]);
      expect((await bundleDataPresent(client, bundle, stop)).differences).toEqual([]);
    }
  });

  it('still reports a pool that allocates again, and the rewrite of a pool the plan did not convert', async () => {
    const enabled = fakes([obj('IPPool', 'default-ipv4-ippool', { ...spec, nodeSelector: 'all()' })], [inBundle]);
    expect((await bundleDataPresent(enabled.client, enabled.bundle, stop)).differences).toMatchObject([{ problem: 'changed' }]);
    const rewritten = fakes([obj('IPPool', 'default-ipv4-ippool', { ...spec, nodeSelector: '!all()' })], [inBundle]);
    expect((await bundleDataPresent(rewritten.client, rewritten.bundle, { ...stop, stopAllocations: undefined })).differences).toMatchObject([
      { problem: 'changed' },
    ]);
  });
});

describe('verify-data: the same value written another way (3.32.1 -> 3.31.7 by Helm on the real programs)', () => {
  const installationCrd = crdWithSpec('Installation', 'installations', 'operator.tigera.io', {
    controlPlaneNodeSelector: { type: 'object', additionalProperties: { type: 'string' } },
    calicoNetwork: { type: 'object', properties: { ipPools: { type: 'array', items: { type: 'object' } } } },
  });
  const kccCrd = crdWithSpec('KubeControllersConfiguration', 'kubecontrollersconfigurations', 'crd.projectcalico.org', {
    controllers: { type: 'object', properties: { node: { type: 'object', properties: { reconcilerPeriod: { type: 'string' } } } } },
  });
  const installation = (spec: Record<string, unknown>): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec,
  });
  const kcc = (period: string) => obj('KubeControllersConfiguration', 'default', { controllers: { node: { reconcilerPeriod: period } } });
  const differences = async (live: KubeObject[], inBundle: KubeObject[]) =>
    (
      await bundleDataPresent(
        fakes(live, inBundle, [...CRDS, installationCrd, kccCrd]).client,
        fakes(live, inBundle).bundle,
        { removeFields: [], trimPoolsPerFamily: false },
        'v3.31.7',
      )
    ).differences.map((d) => `${d.object} ${d.problem}`);

  it('an empty map is no map: controlPlaneNodeSelector {} (3.32 chart) and none (3.31 chart)', async () => {
    expect(await differences([installation({ calicoNetwork: {} })], [installation({ controlPlaneNodeSelector: {}, calicoNetwork: {} })])).toEqual([]);
    // A map with a key is compared, and an empty list is not an empty map (ipPools: [] means no default pool).
    expect(await differences([installation({})], [installation({ controlPlaneNodeSelector: { role: 'cp' } })])).toEqual(['Installation/default changed']);
    expect(await differences([installation({ calicoNetwork: {} })], [installation({ calicoNetwork: { ipPools: [] } })])).toEqual([
      'Installation/default changed',
    ]);
  });

  it('a duration Go prints in its own form is the same duration: 5m and 5m0s; 5m and 6m differ', async () => {
    expect(await differences([kcc('5m0s')], [kcc('5m')])).toEqual([]);
    expect(await differences([kcc('1h30m0s')], [kcc('90m')])).toEqual([]);
    expect(await differences([kcc('6m0s')], [kcc('5m')])).toEqual(['KubeControllersConfiguration/default changed']);
  });
});

describe('verify-data: what a chart or kube-controllers writes that means the same as unset', () => {
  const installation = (spec: Record<string, unknown>): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec,
  });
  const kcc = (spec: Record<string, unknown>) => obj('KubeControllersConfiguration', 'default', spec);
  const none = { removeFields: [], trimPoolsPerFamily: false };
  const differences = async (live: KubeObject[], inBundle: KubeObject[]) => {
    const installationCrd = { ...crd('Installation', 'installations'), spec: { ...crd('Installation', 'installations').spec, group: 'operator.tigera.io' } };
    const { client, bundle } = fakes(live, inBundle, [...CRDS, installationCrd, crd('KubeControllersConfiguration', 'kubecontrollersconfigurations')]);
    return (await bundleDataPresent(client, bundle, none, 'v3.31.7')).differences.map((d) => `${d.object} ${d.problem}`);
  };

  it("the 3.32 chart's controlPlaneTolerations: [] and nonPrivileged: Disabled are what unset means; other values are compared", async () => {
    expect(
      await differences([installation({ variant: 'Calico' })], [installation({ variant: 'Calico', controlPlaneTolerations: [], nonPrivileged: 'Disabled' })]),
    ).toEqual([]);
    expect(await differences([installation({})], [installation({ nonPrivileged: 'Enabled' })])).toEqual(['Installation/default changed']);
    expect(await differences([installation({ controlPlaneTolerations: [{ key: 'a' }] })], [installation({ controlPlaneTolerations: [] })])).toEqual([
      'Installation/default changed',
    ]);
  });

  it("kube-controllers' leakGracePeriod 15m and metrics port 9094, filled where the bundle had none; another value still differs", async () => {
    const bundled = kcc({ controllers: { node: { reconcilerPeriod: '5m' } }, prometheusMetricsPort: 0 });
    expect(
      await differences([kcc({ controllers: { node: { reconcilerPeriod: '5m', leakGracePeriod: '15m0s' } }, prometheusMetricsPort: 0 })], [bundled]),
    ).toEqual([]);
    expect(
      await differences(
        [kcc({ controllers: { node: { reconcilerPeriod: '5m' } }, prometheusMetricsPort: 9094 })],
        [kcc({ controllers: { node: { reconcilerPeriod: '5m' } } })],
      ),
    ).toEqual([]);
    expect(
      await differences([kcc({ controllers: { node: { reconcilerPeriod: '5m', leakGracePeriod: '20m0s' } }, prometheusMetricsPort: 0 })], [bundled]),
    ).toEqual(['KubeControllersConfiguration/default changed']);
    expect(await differences([kcc({ controllers: { node: { reconcilerPeriod: '5m' } }, prometheusMetricsPort: 9094 })], [bundled])).toEqual([
      'KubeControllersConfiguration/default changed',
    ]);
  });
});

describe('verify-data: a field the live CRD defaults is what the API server reads back (3.31.7 -> 3.32.1)', () => {
  const kccCrd = crdWithSpec('KubeControllersConfiguration', 'kubecontrollersconfigurations', 'crd.projectcalico.org', {
    healthChecks: { type: 'string', default: 'Enabled' },
    controllers: { type: 'object', properties: { loadBalancer: { type: 'object', properties: { assignIPs: { type: 'string', default: 'AllServices' } } } } },
  });
  const kcc = (spec: Record<string, unknown>) => obj('KubeControllersConfiguration', 'default', spec);
  const differences = async (live: KubeObject[], inBundle: KubeObject[]) => {
    const { client, bundle } = fakes(live, inBundle, [...CRDS, kccCrd]);
    return (await bundleDataPresent(client, bundle, { removeFields: [], trimPoolsPerFamily: false }, 'v3.32.1')).differences.map(
      (d) => `${d.object} ${d.problem}`,
    );
  };

  it('healthChecks: Enabled read back where the bundle had none is no difference; Disabled in the bundle still is', async () => {
    expect(await differences([kcc({ healthChecks: 'Enabled', controllers: {} })], [kcc({ controllers: {} })])).toEqual([]);
    expect(await differences([kcc({ healthChecks: 'Enabled' })], [kcc({ healthChecks: 'Disabled' })])).toEqual([
      'KubeControllersConfiguration/default changed',
    ]);
    // A default inside an object the bundle does not have is not filled (the API server defaults only present parents).
    expect(
      await differences([kcc({ healthChecks: 'Enabled', controllers: { loadBalancer: { assignIPs: 'AllServices' } } })], [kcc({ controllers: {} })]),
    ).toEqual(['KubeControllersConfiguration/default changed']);
  });
});

describe('verify-data: 3.32 renames default-tier policies in the datastore (policy_name_migrator.go)', () => {
  const gnp = (name: string, spec: Record<string, unknown>) => obj('GlobalNetworkPolicy', name, spec);
  const crds = [...CRDS, crd('GlobalNetworkPolicy', 'globalnetworkpolicies')];
  const differences = async (live: KubeObject[], inBundle: KubeObject[]) => {
    const { client, bundle } = fakes(live, inBundle, crds);
    return (await bundleDataPresent(client, bundle, { removeFields: [], trimPoolsPerFamily: false }, 'v3.32.1')).differences.map(
      (d) => `${d.object} ${d.problem}`,
    );
  };
  const spec = { selector: 'all()', types: ['Egress'] };

  it("the bundle's default.deny is the cluster's deny; a changed spec, another tier's policy or a lost one is still reported", async () => {
    expect(await differences([gnp('deny', spec)], [gnp('default.deny', spec)])).toEqual([]);
    expect(await differences([gnp('deny', { ...spec, types: ['Ingress'] })], [gnp('default.deny', spec)])).toEqual([
      'GlobalNetworkPolicy/default.deny changed',
    ]);
    expect(await differences([gnp('deny', { ...spec, tier: 'security' })], [gnp('security.deny', { ...spec, tier: 'security' })])).toEqual([
      'GlobalNetworkPolicy/security.deny missing',
    ]);
    expect(await differences([], [gnp('default.deny', spec)])).toEqual(['GlobalNetworkPolicy/default.deny missing']);
    // The migrator re-creates a rule without its empty source (an EntityRule matching everything); a real one counts.
    const rule = (source: unknown) => ({ ...spec, egress: [{ action: 'Deny', source, destination: { nets: ['169.254.169.254/32'] } }] });
    expect(await differences([gnp('deny', rule(undefined))], [gnp('default.deny', rule({}))])).toEqual([]);
    expect(await differences([gnp('deny', rule(undefined))], [gnp('default.deny', rule({ nets: ['10.0.0.0/8'] }))])).toEqual([
      'GlobalNetworkPolicy/default.deny changed',
    ]);
  });
});
