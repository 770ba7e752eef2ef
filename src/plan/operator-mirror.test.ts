import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { pruneUnknownFields } from '../calico/schema.js';
import { isErrorKind } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings, transformInstallation } from './findings.js';
import { planOperatorImage, withPlannedOperatorImage } from './operator-mirror.js';

const refusal = (f: () => unknown): { message: string; hint?: string } => {
  try {
    f();
  } catch (err) {
    expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
    return err as { message: string; hint?: string };
  }
  throw new Error('not refused');
};

describe('the target operator image of an install that pulls from a mirror', async () => {
  const target = await loadRelease('3.28.1');
  const released = target.operatorImage!;

  it("the shipped release's image is quay.io's (what an air-gapped cluster cannot pull)", () => {
    expect(released).toBe('quay.io/tigera/operator:v1.34.3');
  });

  it('an operator from quay.io keeps the release image, with no finding', () => {
    expect(planOperatorImage({ image: 'quay.io/tigera/operator:v1.32.10', version: 'v3.27.4' }, target)).toEqual({ image: released });
  });

  it('a mirror host, a mirror with a path and a port: the release path and tag under the same mirror, said in one line', () => {
    for (const mirror of ['registry.example.internal', 'harbor.example.internal:5000/quay-proxy', 'localhost:5000']) {
      const r = planOperatorImage({ image: `${mirror}/tigera/operator:v1.32.10`, version: 'v3.27.4' }, target);
      expect(r.image).toBe(`${mirror}/tigera/operator:v1.34.3`);
      expect(r.finding).toMatchObject({ id: 'operator-image-mirror', action: 'transform', objects: ['Deployment/tigera-operator/tigera-operator'] });
      expect(r.finding!.title).toBe(`operator image from mirror ${mirror}: ${mirror}/tigera/operator:v1.34.3 instead of ${released}`);
    }
  });

  it('Docker Hub without a registry name stays without one', () => {
    expect(planOperatorImage({ image: 'tigera/operator:v1.32.10', version: 'v3.27.4' }, target).image).toBe('tigera/operator:v1.34.3');
  });

  it('a digest-pinned image with a known version: the mirror kept, the target named by its tag and the digest said', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    for (const image of [`registry.example.internal/tigera/operator@${digest}`, `registry.example.internal/tigera/operator:v1.32.10@${digest}`]) {
      const r = planOperatorImage({ image, version: 'v3.27.4' }, target);
      expect(r.image).toBe('registry.example.internal/tigera/operator:v1.34.3');
      expect(r.finding!.details.join(' ')).toContain(`pinned by digest ${digest}`);
    }
  });

  it('a digest-pinned image whose release nothing names is refused by name, from a mirror or from quay.io', () => {
    const e = refusal(() => planOperatorImage({ image: `registry.example.internal/tigera/operator@sha256:${'b'.repeat(64)}` }, target));
    expect(e.message).toMatch(/of the tigera-operator Deployment is pinned by digest and nothing in the cluster names its Calico release/);
    expect(e.hint).toMatch(/registry\.example\.internal\/tigera\/operator:<tag>@sha256:b+/);
    expect(refusal(() => planOperatorImage({ image: `quay.io/tigera/operator@sha256:${'b'.repeat(64)}` }, target)).message).toMatch(/pinned by digest/);
  });

  it('a mirror path that does not end in tigera/operator, or a retagged image, is refused with the --manifests way out', () => {
    const flat = refusal(() => planOperatorImage({ image: 'registry.example.internal/calico-operator:v1.32.10', version: 'v3.27.4' }, target));
    expect(flat.message).toMatch(/path does not end in tigera\/operator: the target operator's image in that mirror cannot be derived/);
    expect(flat.hint).toMatch(/--manifests/);
    const retagged = refusal(() => planOperatorImage({ image: 'registry.example.internal/tigera/operator:v1.32.10-mirror.1', version: 'v3.27.4' }, target));
    expect(retagged.message).toMatch(/retagged tag v1\.32\.10-mirror\.1/);
    expect(refusal(() => planOperatorImage({ image: 'registry.example.internal/tigera/operator:latest', version: 'v3.27.4' }, target)).message).toMatch(
      /retagged tag latest/,
    );
    expect(refusal(() => planOperatorImage({ image: 'registry.example.internal/tigera/operator', version: 'v3.27.4' }, target)).message).toMatch(
      /retagged tag latest/,
    );
  });

  it('a target tigera-operator.yaml the user already pointed at a registry (--manifests) is taken as it is', () => {
    const own = { version: 'v3.28.1', operatorImage: 'registry.example.internal/mirror/op:v1.34.3' };
    expect(planOperatorImage({ image: 'registry.example.internal/calico-operator:v1.32.10', version: 'v3.27.4' }, own)).toEqual({ image: own.operatorImage });
  });

  it("the applied tigera-operator.yaml carries the plan's image; another operator release in a plan is refused", () => {
    const objs = withPlannedOperatorImage(target.operatorObjects, 'registry.example.internal/tigera/operator:v1.34.3', released);
    const dep = objs.find((o) => o.kind === 'Deployment')!;
    expect(dep.spec.template.spec.containers[0].image).toBe('registry.example.internal/tigera/operator:v1.34.3');
    expect(target.operatorObjects.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0].image).toBe(released); // input untouched
    expect(withPlannedOperatorImage(target.operatorObjects, released, released)).toBe(target.operatorObjects);
    expect(refusal(() => withPlannedOperatorImage(target.operatorObjects, 'registry.example.internal/tigera/operator:v1.36.16', released)).message).toMatch(
      /not the target release's operator v1\.34\.3/,
    );
  });
});

describe("the Installation's registry, imagePath and imagePrefix through the plan's Installation transforms", async () => {
  const from = await loadRelease('3.28.1');
  const to = await loadRelease('3.27.4');
  const mirror = { registry: 'registry.example.internal/', imagePath: 'calico-mirror', imagePrefix: 'mirrored-' };

  it('a downgrade that removes fields the target lacks keeps them, also after pruning to the target CRD', () => {
    // As the 3.28 operator (v1.34) leaves it: its defaults name, allowedUses and linuxPolicySetupTimeoutSeconds, which 3.27 lacks.
    const pool = { name: 'default-ipv4-ippool', cidr: '192.168.0.0/16', blockSize: 26, nodeSelector: 'all()', allowedUses: ['Workload', 'Tunnel'] };
    const inst: KubeObject = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default' },
      spec: { calicoNetwork: { ipPools: [pool], linuxPolicySetupTimeoutSeconds: 0 }, variant: 'Calico', ...mirror },
    };
    const r = computeFindings({ crds: from.crds, objects: new Map([['installations.operator.tigera.io', [inst]]]) }, to, { version: 'v3.28.1' }, new Set());
    expect(r.installation.removeFields.length).toBeGreaterThan(0); // the transform does remove fields here
    const crd = to.crds.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
    const out = pruneUnknownFields(transformInstallation(inst, r.installation), crd);
    expect(out.spec).toMatchObject(mirror);
  });
});
