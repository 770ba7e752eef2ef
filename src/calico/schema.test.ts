import { describe, expect, it } from 'vitest';
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { readShippedFile } from './shipped.js';
import { checkAgainstSchema, pruneUnknownFields } from './schema.js';

const load = (version: string, file: string): KubeObject[] => parseManifests(readShippedFile(version, file)!.text, `${version}/${file}`);
const crd = (version: string, name: string): KubeObject => {
  const c = load(version, 'tigera-operator.yaml').find((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === name);
  if (!c) throw new Error(`no CRD ${name} in ${version}`);
  return c;
};

/** An Installation as the 3.28 operator leaves it: custom-resources.yaml plus the fields the operator writes. */
function installation328(): KubeObject {
  const inst = structuredClone(load('3.28.1', 'custom-resources.yaml').find((o) => o.kind === 'Installation')!);
  inst.spec.calicoNetwork.ipPools[0].allowedUses = ['Workload', 'Tunnel'];
  inst.spec.calicoNetwork.linuxPolicySetupTimeoutSeconds = 0;
  return inst;
}

describe('checkAgainstSchema with the real Calico CRDs', () => {
  it('finds the Installation fields that the 3.27.4 CRD does not know', () => {
    const findings = checkAgainstSchema(installation328(), crd('3.27.4', 'installations.operator.tigera.io'));
    expect(
      findings
        .filter((f) => f.kind === 'pruned')
        .map((f) => f.path)
        .sort(),
    ).toEqual(['spec.calicoNetwork.ipPools[0].allowedUses', 'spec.calicoNetwork.ipPools[0].name', 'spec.calicoNetwork.linuxPolicySetupTimeoutSeconds']);
    expect(findings.filter((f) => f.kind === 'rejected')).toEqual([]);
  });

  it('finds nothing for the same Installation against its own 3.28.1 CRD', () => {
    expect(checkAgainstSchema(installation328(), crd('3.28.1', 'installations.operator.tigera.io'))).toEqual([]);
  });

  it('finds nothing for the 3.27.4 custom resources against the 3.27.4 CRDs', () => {
    for (const obj of load('3.27.4', 'custom-resources.yaml')) {
      const name = obj.kind === 'Installation' ? 'installations.operator.tigera.io' : 'apiservers.operator.tigera.io';
      expect(checkAgainstSchema(obj, crd('3.27.4', name))).toEqual([]);
    }
  });

  it('rejects wrong types, enum values and missing required fields', () => {
    const inst = installation328();
    inst.spec.calicoNetwork.ipPools[0].encapsulation = 'GRE';
    inst.spec.calicoNetwork.ipPools[0].blockSize = '26';
    delete inst.spec.calicoNetwork.ipPools[0].cidr;
    const findings = checkAgainstSchema(inst, crd('3.28.1', 'installations.operator.tigera.io'));
    expect(findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: 'spec.calicoNetwork.ipPools[0].encapsulation',
          kind: 'rejected',
          detail: expect.stringContaining('"GRE" is not one of'),
        }),
        expect.objectContaining({ path: 'spec.calicoNetwork.ipPools[0].blockSize', kind: 'rejected', detail: 'is string, the schema wants integer' }),
        expect.objectContaining({ path: 'spec.calicoNetwork.ipPools[0].cidr', kind: 'rejected', detail: 'required field is missing' }),
      ]),
    );
    expect(findings).toHaveLength(3);
  });

  it('enforces maxItems (3.28 allows at most 25 Installation pools)', () => {
    const inst = installation328();
    inst.spec.calicoNetwork.ipPools = Array.from({ length: 26 }, (_, i) => ({ cidr: `10.${i}.0.0/16`, name: `p${i}` }));
    const findings = checkAgainstSchema(inst, crd('3.28.1', 'installations.operator.tigera.io'));
    expect(findings).toEqual([{ path: 'spec.calicoNetwork.ipPools', kind: 'rejected', detail: 'has 26 items, at most 25 allowed' }]);
  });

  it('accepts int-or-string fields both ways and checks IPPool fields', () => {
    const pool: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPPool',
      metadata: { name: 'p', labels: { a: 'b' }, uid: 'x', resourceVersion: '1' },
      spec: {
        cidr: '10.0.0.0/16',
        disabled: true,
        blockSize: 26,
        ipipMode: 'Never',
        vxlanMode: 'Always',
        natOutgoing: true,
        nodeSelector: 'all()',
        frobnicate: 1,
      },
    };
    const ipPoolCrd = crd('3.28.1', 'ippools.crd.projectcalico.org');
    expect(checkAgainstSchema(pool, ipPoolCrd)).toEqual([{ path: 'spec.frobnicate', kind: 'pruned', detail: 'field not in the CRD schema' }]);
    pool.spec.disabled = 'yes';
    expect(checkAgainstSchema(pool, ipPoolCrd).map((f) => `${f.kind} ${f.path}`)).toEqual(['rejected spec.disabled', 'pruned spec.frobnicate']);
    const gnp: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'GlobalNetworkPolicy',
      metadata: { name: 'allow-dns' },
      spec: { selector: 'all()', types: ['Egress'], egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53, 'dns-range', '1000:2000'] } }] },
    };
    const gnpCrd = crd('3.28.1', 'globalnetworkpolicies.crd.projectcalico.org');
    expect(checkAgainstSchema(gnp, gnpCrd)).toEqual([]);
    gnp.spec.egress[0].destination.ports.push(true);
    expect(checkAgainstSchema(gnp, gnpCrd)).toEqual([
      { path: 'spec.egress[0].destination.ports[3]', kind: 'rejected', detail: 'is boolean, the schema wants integer or string' },
    ]);
  });

  it('reports a version the CRD does not serve', () => {
    const inst = installation328();
    inst.apiVersion = 'operator.tigera.io/v2';
    expect(checkAgainstSchema(inst, crd('3.27.4', 'installations.operator.tigera.io'))).toEqual([
      expect.objectContaining({ path: 'apiVersion', kind: 'rejected' }),
    ]);
  });

  it('finds FelixConfiguration 3.28 fields against the 3.27 CRD', () => {
    const felix: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'FelixConfiguration',
      metadata: { name: 'default' },
      spec: { debugHost: 'localhost', debugPort: 6060, logSeverityScreen: 'Info', bpfEnabled: false },
    };
    expect(
      checkAgainstSchema(felix, crd('3.27.4', 'felixconfigurations.crd.projectcalico.org'))
        .map((f) => f.path)
        .sort(),
    ).toEqual(['spec.debugHost', 'spec.debugPort']);
    expect(checkAgainstSchema(felix, crd('3.28.1', 'felixconfigurations.crd.projectcalico.org'))).toEqual([]);
  });
});

describe('3.30.7 objects against 3.28.1 CRDs', () => {
  it('finds IPPool assignmentMode and BlockAffinity type (new in 3.30)', () => {
    const crd330 = (name: string) => load('3.30.7', 'operator-crds.yaml').find((o) => o.metadata.name === name)!;
    const pool: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPPool',
      metadata: { name: 'p' },
      spec: { cidr: '10.0.0.0/16', assignmentMode: 'Automatic' },
    };
    expect(checkAgainstSchema(pool, crd330('ippools.crd.projectcalico.org'))).toEqual([]);
    expect(checkAgainstSchema(pool, crd('3.28.1', 'ippools.crd.projectcalico.org'))).toEqual([
      { path: 'spec.assignmentMode', kind: 'pruned', detail: 'field not in the CRD schema' },
    ]);
    const ba: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'BlockAffinity',
      metadata: { name: 'b' },
      spec: { cidr: '10.0.0.0/26', node: 'n', state: 'confirmed', deleted: 'false', type: 'host' },
    };
    expect(checkAgainstSchema(ba, crd('3.28.1', 'blockaffinities.crd.projectcalico.org')).map((f) => f.path)).toEqual(['spec.type']);
  });
});

describe('pruneUnknownFields', () => {
  it('removes exactly what 3.27 would prune and leaves the input untouched', () => {
    const inst = installation328();
    const before = structuredClone(inst);
    const c = crd('3.27.4', 'installations.operator.tigera.io');
    const pruned = pruneUnknownFields(inst, c);
    expect(inst).toEqual(before);
    expect(pruned.spec.calicoNetwork.ipPools[0]).toEqual({
      blockSize: 26,
      cidr: '192.168.0.0/16',
      encapsulation: 'VXLANCrossSubnet',
      natOutgoing: 'Enabled',
      nodeSelector: 'all()',
    });
    expect(pruned.spec.calicoNetwork.linuxPolicySetupTimeoutSeconds).toBeUndefined();
    expect(pruned.metadata).toEqual(inst.metadata);
    expect(checkAgainstSchema(pruned, c)).toEqual([]);
  });
});
