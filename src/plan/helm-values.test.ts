import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { editHelmValues, plannedValuesEdits } from './helm-values.js';
import type { InstallationTransform } from './types.js';

const none: InstallationTransform = { removeFields: [], trimPoolsPerFamily: false };
/** calico#9100 going to 3.28: the disabled pool's entry stops allocations with the v1.34 operator's nodeSelector. */
const stop328: InstallationTransform = { ...none, stopAllocations: { cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' } };
/** Installation default as the v1.32 operator filled it in from the chart's values without ipPools. */
const installation = {
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: {
    calicoNetwork: {
      bgp: 'Enabled',
      ipPools: [{ cidr: '192.168.0.0/16', blockSize: 26, encapsulation: 'VXLANCrossSubnet', natOutgoing: 'Enabled', nodeSelector: 'all()' }],
    },
  },
} as unknown as KubeObject;

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
    return (err as Error).message;
  }
  throw new Error('not refused');
}

describe('editHelmValues', () => {
  it('no pool edits: nothing to carry (removed fields are transform-installation’s, after helm)', () => {
    expect(editHelmValues({ a: 1 }, installation, none)).toBeUndefined();
    expect(editHelmValues({ a: 1 }, installation, { ...none, removeFields: ['spec.calicoNetwork.ipPools[0].disableNewAllocations'] })).toBeUndefined();
    expect(plannedValuesEdits(none)).toEqual([]);
  });

  it('stops the values’ own entry, keeping every other value of the user’s (the secret one too, never in the edits)', () => {
    const values = {
      imagePullSecrets: { gcr: 'c2VjcmV0' },
      installation: {
        kubernetesProvider: '',
        calicoNetwork: { bgp: 'Disabled', ipPools: [{ cidr: '192.168.0.0/16', encapsulation: 'VXLAN' }, { cidr: 'fd00::/48' }] },
      },
    };
    const out = editHelmValues(values, installation, stop328)!;
    expect(out.source).toBe('values');
    expect(out.values).toEqual({
      imagePullSecrets: { gcr: 'c2VjcmV0' },
      installation: {
        kubernetesProvider: '',
        calicoNetwork: { bgp: 'Disabled', ipPools: [{ cidr: '192.168.0.0/16', encapsulation: 'VXLAN', nodeSelector: '!all()' }, { cidr: 'fd00::/48' }] },
      },
    });
    expect(out.edits).toEqual(['192.168.0.0/16: nodeSelector "!all()"']);
    expect(JSON.stringify(out.edits)).not.toContain('c2VjcmV0');
    // The input is not changed, and the edited values edit to themselves (a resumed apply writes the same file).
    expect(values.installation.calicoNetwork.ipPools[0]).toEqual({ cidr: '192.168.0.0/16', encapsulation: 'VXLAN' });
    expect(editHelmValues(out.values, installation, stop328)).toEqual({ values: out.values, edits: [], source: 'values' });
  });

  it('values without ipPools (the chart default): the Installation’s own entries, stopped, become the values’ list', () => {
    for (const values of [null, {}, { installation: { enabled: true } }]) {
      const out = editHelmValues(values, installation, stop328)!;
      expect(out.source).toBe('installation');
      expect(out.values).toEqual({
        installation: {
          ...(values && 'installation' in values ? { enabled: true } : {}),
          calicoNetwork: {
            ipPools: [{ cidr: '192.168.0.0/16', blockSize: 26, encapsulation: 'VXLANCrossSubnet', natOutgoing: 'Enabled', nodeSelector: '!all()' }],
          },
        },
      });
      expect(out.edits).toEqual([
        "installation.calicoNetwork.ipPools written from Installation default's 1 entries (the values had none)",
        '192.168.0.0/16: nodeSelector "!all()"',
      ]);
    }
    // Only ipPools is taken from the Installation: its other calicoNetwork fields stay the chart's or the operator's.
    expect(installation.spec.calicoNetwork.ipPools[0].nodeSelector).toBe('all()');
  });

  it('trims to the first pool per family and drops fields the target CRD lacks, as transform-installation does live', () => {
    const t: InstallationTransform = {
      removeFields: ['spec.calicoNetwork.ipPools[0].disableNewAllocations'],
      trimPoolsPerFamily: true,
      stopAllocations: { cidrs: ['10.1.0.0/16'], field: 'nodeSelector', value: '!all()' },
    };
    const values = {
      installation: { calicoNetwork: { ipPools: [{ cidr: '10.1.0.0/16', disableNewAllocations: true }, { cidr: '10.2.0.0/16' }, { cidr: 'fd00::/48' }] } },
    };
    const out = editHelmValues(values, undefined, t)!;
    expect(out.values).toEqual({ installation: { calicoNetwork: { ipPools: [{ cidr: '10.1.0.0/16', nodeSelector: '!all()' }, { cidr: 'fd00::/48' }] } } });
    expect(out.edits).toEqual([
      '10.1.0.0/16: nodeSelector "!all()"',
      '10.1.0.0/16: disableNewAllocations removed (unknown to the target)',
      '10.2.0.0/16: entry dropped (one pool per family)',
    ]);
    expect(plannedValuesEdits(t)).toEqual([
      'installation.calicoNetwork.ipPools[cidr 10.1.0.0/16].nodeSelector: "!all()"',
      'installation.calicoNetwork.ipPools: the first pool per IP family kept',
    ]);
  });

  it('refuses by name what has no values to carry the edits: the chart’s Installation off, no entries, the stopped CIDR gone', () => {
    expect(refusal(() => editHelmValues({ installation: { enabled: false } }, installation, stop328))).toMatch(
      /^the release's values turn the chart's Installation off/,
    );
    expect(refusal(() => editHelmValues({}, undefined, stop328))).toMatch(
      /neither the release's values \(installation\.calicoNetwork\.ipPools\) nor Installation default/,
    );
    expect(refusal(() => editHelmValues({ installation: { calicoNetwork: { ipPools: [{ cidr: '10.9.0.0/16' }] } } }, installation, stop328))).toBe(
      "the plan stops allocations from 192.168.0.0/16, which the release's installation.calicoNetwork.ipPools does not list: the cluster changed since the plan",
    );
    expect(refusal(() => editHelmValues(['not', 'a', 'map'], installation, stop328))).toMatch(/not a map of values/);
  });

  it('unlists the entry of an unlabelled disabled pool (3.28): written from the Installation, then idempotent on the emptied values', () => {
    const unlist: InstallationTransform = { ...none, unlistPools: { cidrs: ['192.168.0.0/16'] } };
    expect(plannedValuesEdits(unlist)).toEqual(['installation.calicoNetwork.ipPools[cidr 192.168.0.0/16]: entry removed']);
    const out = editHelmValues({ installation: { kubernetesProvider: '' } }, installation, unlist)!;
    expect(out.source).toBe('installation');
    expect(out.values).toEqual({ installation: { kubernetesProvider: '', calicoNetwork: { ipPools: [] } } });
    expect(out.edits).toEqual([
      "installation.calicoNetwork.ipPools written from Installation default's 1 entries (the values had none)",
      '192.168.0.0/16: entry removed',
    ]);
    // A resumed apply reads the values it wrote: the list is empty, and that is the edit done, not a changed cluster.
    expect(editHelmValues(out.values, installation, unlist)).toEqual({ values: out.values, edits: [], source: 'values' });
  });
});
