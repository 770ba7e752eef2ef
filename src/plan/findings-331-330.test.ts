import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings } from './findings.js';
import { installation328 } from '../../test/support/doctor-state.js';

describe('3.31.7 -> 3.30.7 with the real CRDs: the CNI directories v1.40 writes by itself need no flag (issue 30)', async () => {
  const [r330, r331] = await Promise.all(['3.30.7', '3.31.7'].map((v) => loadRelease(v, { offline: true })));
  const refusals = (inst: KubeObject) =>
    computeFindings({ crds: r331.crds, objects: new Map([['installations.operator.tigera.io', [inst]]]) }, r330, { version: 'v3.31.7' }, new Set())
      .findings.filter((f) => f.severity === 'error')
      .map((f) => `${f.id}: ${f.details?.join('; ')}`);
  const with331 = (cni: Record<string, string>, provider?: string): KubeObject => ({
    ...installation328(),
    spec: {
      ...installation328().spec,
      ...(provider ? { kubernetesProvider: provider } : {}),
      cni: { type: 'Calico', ipam: { type: 'Calico' }, specVersion: 'Auto', ...cni },
    },
  });

  it('the defaults of the provider (render/node.go DefaultCNIDirectories) are dropped; other directories are configuration', () => {
    // As v1.40.15 wrote them on the path matrix's 3.31.7 install (core_controller.go:631-637).
    expect(refusals(with331({ binDir: '/opt/cni/bin', confDir: '/etc/cni/net.d' }))).toEqual([]);
    expect(refusals(with331({ binDir: '/home/kubernetes/bin', confDir: '/etc/cni/net.d' }, 'GKE'))).toEqual([]);
    expect(refusals(with331({ binDir: '/var/lib/cni/bin', confDir: '/var/run/multus/cni/net.d' }, 'OpenShift'))).toEqual([]);
    expect(refusals(with331({ binDir: '/usr/libexec/cni', confDir: '/etc/cni/net.d' }))).toEqual([
      'installation-fields-lost: spec.cni.binDir: "/usr/libexec/cni" (unknown to v3.30.7)',
    ]);
    // GKE's directory is not the default elsewhere.
    expect(refusals(with331({ binDir: '/home/kubernetes/bin', confDir: '/etc/cni/net.d' }))).toHaveLength(1);
  });
});
