import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configPathFor, crdPathFor, nodePathFor, resourcePathFor } from '../bundle/paths.js';
import { openBundle } from '../bundle/reader.js';
import { BundleWriter } from '../bundle/writer.js';
import { doctorReport, loadBundleState } from './doctor.js';
import { fixtureCrd } from '../../test/support/doctor-fixtures.js';
import { entry, installationWith, pool } from '../../test/support/doctor-state.js';

/** doctor BUNDLE, offline: a bundle written by the real BundleWriter (an encrypted Secret in it, no key given). */
describe('loadBundleState', () => {
  it('reads pools, Installation, CRDs, workloads and nodes from a bundle; never reads Secrets', async () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-doctor-unit-')), 'b');
    const w = await BundleWriter.open(out, { encryptionKey: randomBytes(32) });
    const objs = [
      installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]),
      pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true, allowedUses: ['Workload', 'Tunnel'] }),
      { ...block(), metadata: { name: '10-0-0-0-26' } },
    ];
    for (const o of objs) await w.writeObject(resourcePathFor(o), o);
    w.manifest.resources = [
      {
        key: 'installations.operator.tigera.io',
        group: 'operator.tigera.io',
        version: 'v1',
        kind: 'Installation',
        plural: 'installations',
        namespaced: false,
        count: 1,
      },
      { key: 'ippools.crd.projectcalico.org', group: 'crd.projectcalico.org', version: 'v1', kind: 'IPPool', plural: 'ippools', namespaced: false, count: 1 },
      {
        key: 'ipamblocks.crd.projectcalico.org',
        group: 'crd.projectcalico.org',
        version: 'v1',
        kind: 'IPAMBlock',
        plural: 'ipamblocks',
        namespaced: false,
        count: 1,
      },
      {
        key: 'ipamhandles.crd.projectcalico.org',
        group: 'crd.projectcalico.org',
        version: 'v1',
        kind: 'IPAMHandle',
        plural: 'ipamhandles',
        namespaced: false,
        count: 0,
      },
    ];
    for (const kind of ['Installation', 'IPPool', 'IPAMBlock']) {
      const crd = fixtureCrd('3.28.1', kind);
      await w.writeObject(crdPathFor(crd), crd);
    }
    const operator = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'tigera-operator', namespace: 'tigera-operator' },
      spec: { replicas: 1, template: { spec: { containers: [{ name: 'tigera-operator', image: 'quay.io/tigera/operator:v1.34.3' }] } } },
      status: { readyReplicas: 1 },
    };
    await w.writeObject(configPathFor(operator), operator);
    const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'node-certs', namespace: 'calico-system' }, data: { 'tls.key': 'c2VjcmV0' } };
    await w.writeObject(configPathFor(secret), secret, { secret: true });
    await w.writeObject(nodePathFor('n1'), { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', annotations: {} } });
    w.manifest.counts.nodes = 1;
    w.manifest.calico = { installType: 'operator', version: 'v3.28.1' };
    await w.commit();

    const bundle = await openBundle(out); // no key: doctor must not need it
    try {
      const state = await loadBundleState(bundle);
      expect(Object.keys(state.objects).sort()).toEqual([
        'installations.operator.tigera.io',
        'ipamblocks.crd.projectcalico.org',
        'ipamhandles.crd.projectcalico.org',
        'ippools.crd.projectcalico.org',
      ]);
      expect(state.objects['ipamhandles.crd.projectcalico.org']).toEqual([]); // exported with no objects: present, empty
      expect(state.workloads.map((x) => x.name)).toEqual(['tigera-operator']);
      expect(state.nodes).toEqual([{ name: 'n1', ready: undefined, tunnelIPs: [] }]);
      expect(state.pods).toBeUndefined();
      expect(state.source).toMatchObject({ type: 'bundle', path: out });
      const r = doctorReport(state);
      // The incident is found offline; the block of a node absent from the bundle too.
      expect(r.findings.map((f) => f.id).sort()).toEqual(['ipam-block-affinity-missing-node', 'pool-disabled-will-be-reenabled']);
      expect(r.notes.join(' ')).toMatch(/bundles keep no pods/);
    } finally {
      await bundle.close();
    }
  });
});

function block() {
  return {
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPAMBlock',
    metadata: { name: 'x' },
    spec: { cidr: '10.0.0.0/26', affinity: 'host:old-node', allocations: [], attributes: [], unallocated: [], strictAffinity: false },
  };
}
