import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { etcdSettingsDiffer, etcdTargetObjects } from './etcd-plan.js';
import { findManifestEdits } from './manifest-custom.js';
import { etcdFieldsTheTargetLacks } from './etcd-compare.js';
import type { Bundle } from '../bundle/reader.js';

/*
 * The shipped calico-etcd.yaml of 3.28.1 (the install) and 3.29.7 (the target), filled in as its comments ask a user
 * with a TLS etcd to: what a plan for an etcd install must carry over, or every program loses etcd.
 */
const ENDPOINT = 'https://10.0.0.5:2379';
function asInstalled(objs: KubeObject[]): KubeObject[] {
  return objs.map((o) => {
    if (o.kind === 'ConfigMap' && o.metadata.name === 'calico-config')
      return {
        ...o,
        data: {
          ...o.data,
          etcd_endpoints: ENDPOINT,
          etcd_ca: '/calico-secrets/etcd-ca',
          etcd_cert: '/calico-secrets/etcd-cert',
          etcd_key: '/calico-secrets/etcd-key',
        },
      };
    if (o.kind === 'Secret') return { ...o, data: { 'etcd-ca': 'Y2E=', 'etcd-cert': 'Y2VydA==', 'etcd-key': 'a2V5' } };
    return o;
  });
}
const find = (objs: KubeObject[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);

describe("a plan for an etcd install carries calico-etcd.yaml's etcd settings into the target's", async () => {
  const current = await loadRelease('3.28.1', { need: 'etcd', offline: true });
  const target = await loadRelease('3.29.7', { need: 'etcd', offline: true });
  const live = asInstalled(current.calicoEtcdManifest!);
  const workloads = live.filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment');
  const found = findManifestEdits(
    { ds: find(live, 'DaemonSet', 'calico-node'), config: find(live, 'ConfigMap', 'calico-config'), workloads },
    { version: current.version, objects: current.calicoEtcdManifest!, file: 'calico-etcd.yaml' },
  );
  const liveRefs = { config: find(live, 'ConfigMap', 'calico-config'), ds: find(live, 'DaemonSet', 'calico-node') };

  it('with the edits found, the target points at the same etcd with the same certificate files', () => {
    const objs = etcdTargetObjects(target, found.transform);
    expect(etcdSettingsDiffer(liveRefs, objs)).toEqual([]);
    expect(find(objs, 'ConfigMap', 'calico-config')?.data?.etcd_endpoints).toBe(ENDPOINT);
    // The target's own images (its release), not the current ones.
    const image = find(objs, 'DaemonSet', 'calico-node')?.spec.template.spec.containers[0].image as string;
    expect(image).toMatch(/:v3\.29\.7$/);
  });

  it('as released, the target would point at its placeholder: every etcd setting that differs is named', () => {
    const differ = etcdSettingsDiffer(liveRefs, etcdTargetObjects(target, undefined));
    expect(differ.join('\n')).toContain('calico-config etcd_endpoints: live "https://10.0.0.5:2379"');
    expect(differ.some((d) => d.startsWith('calico-config etcd_ca'))).toBe(true);
  });

  it("never writes the release's Secret, which would empty the user's certificates", () => {
    const objs = etcdTargetObjects(target, found.transform);
    expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
    expect(target.calicoEtcdManifest!.some((o) => o.kind === 'Secret' && o.metadata.name === 'calico-etcd-secrets')).toBe(true);
  });

  it('an ETCD_* env of calico-node changed since the plan is caught', () => {
    const moved = structuredClone(liveRefs);
    moved.ds!.spec.template.spec.containers[0].env.push({ name: 'ETCD_DISCOVERY_SRV', value: 'example.internal' });
    expect(etcdSettingsDiffer(moved, etcdTargetObjects(target, found.transform))).toEqual([
      'calico-node env ETCD_DISCOVERY_SRV: live "example.internal", target not set',
    ]);
  });
});

describe('a downgrade of an etcd install names what the target release does not know (its crd.projectcalico.org schemas)', async () => {
  const bundleOf = (objects: KubeObject[]) =>
    ({
      v3Objects: async function* () {
        for (const object of objects) yield { object };
      },
    }) as unknown as Bundle;
  const pool = (spec: Record<string, unknown>): KubeObject => ({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: 'manual-pool' }, spec });
  const node: KubeObject = { apiVersion: 'projectcalico.org/v3', kind: 'Node', metadata: { name: 'n1' }, spec: { someNewField: 1 } };

  it("3.30's IPPool assignmentMode is a field 3.28.1 lacks; Calico's own Node records are not judged", async () => {
    const target = await loadRelease('3.28.1', { need: 'etcd', offline: true });
    const f = await etcdFieldsTheTargetLacks(bundleOf([pool({ cidr: '10.9.0.0/24', assignmentMode: 'Manual' }), node]), target);
    expect(f?.id).toBe('etcd-fields-target-lacks');
    expect(f?.details).toEqual(['IPPool/manual-pool: spec.assignmentMode']);
    expect(f?.action).toBe('keep');
  });

  it('3.30.7 knows it: no finding', async () => {
    const target = await loadRelease('3.30.7', { need: 'etcd', offline: true });
    expect(await etcdFieldsTheTargetLacks(bundleOf([pool({ cidr: '10.9.0.0/24', assignmentMode: 'Manual' })]), target)).toBeUndefined();
  });
});
