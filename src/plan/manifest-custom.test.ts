import { describe, expect, it } from 'vitest';
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { readShippedFile } from '../calico/shipped.js';
import { isErrorKind } from '../core/errors.js';
import { applyManifestEdits, findManifestEdits } from './manifest-custom.js';

const calicoYaml = (v: string) => parseManifests(readShippedFile(v, 'calico.yaml')!.text, v);
const get = (objs: KubeObject[], kind: string, name: string) => structuredClone(objs.find((o) => o.kind === kind && o.metadata.name === name)!);
const nodeEnv = (ds: KubeObject) => ds.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').env as any[];
const images = (o: KubeObject) => [...(o.spec.template.spec.initContainers ?? []), ...o.spec.template.spec.containers].map((c: any) => c.image);
/** Where the release pulls its images from (`<registry>/`), read from the manifest itself. */
const REL = images(get(calicoYaml('3.28.1'), 'Deployment', 'calico-kube-controllers'))[0]!.replace(/calico\/kube-controllers:.*$/, '');

/** The live objects as the API server returns an unedited 3.28.1 install (fieldRef.apiVersion defaulted). */
function live328() {
  const rel = calicoYaml('3.28.1');
  const ds = get(rel, 'DaemonSet', 'calico-node');
  for (const e of nodeEnv(ds)) if (e.valueFrom?.fieldRef) e.valueFrom.fieldRef.apiVersion = 'v1';
  return { ds, config: get(rel, 'ConfigMap', 'calico-config'), kc: get(rel, 'Deployment', 'calico-kube-controllers') };
}

describe('calico.yaml edits carried from the current release to the target', () => {
  it('an unedited install has no edits (API server defaults are not edits)', () => {
    const l = live328();
    const r = findManifestEdits({ ds: l.ds, config: l.config, workloads: [l.ds, l.kc] }, { version: 'v3.28.1', objects: calicoYaml('3.28.1') });
    expect(r.finding).toBeUndefined();
    expect(r.transform).toEqual({ from: 'v3.28.1', calicoNodeEnv: { set: [], remove: [] }, calicoConfig: {}, repositories: {}, containerFields: [] });
  });

  it('env, calico-config and registry edits of 3.28.1 are found and written into 3.27.4, the rest as released', () => {
    const l = live328();
    const env = nodeEnv(l.ds);
    env.find((e) => e.name === 'CALICO_IPV4POOL_IPIP')!.value = 'Never';
    env.push({ name: 'IP_AUTODETECTION_METHOD', value: 'interface=eth1' }, { name: 'CALICO_IPV4POOL_CIDR', value: '10.244.0.0/16' });
    env.splice(
      env.findIndex((e) => e.name === 'FELIX_WIREGUARDMTU'),
      1,
    );
    l.config.data!.veth_mtu = '1440';
    // VXLAN without BGP: Calico's docs say to drop the bird checks from the probes.
    const node = l.ds.spec.template.spec.containers.find((c: any) => c.name === 'calico-node');
    node.livenessProbe.exec.command = ['/bin/calico-node', '-felix-live'];
    node.readinessProbe.exec.command = ['/bin/calico-node', '-felix-ready'];
    for (const c of [...l.ds.spec.template.spec.initContainers, ...l.ds.spec.template.spec.containers, ...l.kc.spec.template.spec.containers])
      c.image = c.image.replace(REL, 'registry.local:5000/');
    const r = findManifestEdits({ ds: l.ds, config: l.config, workloads: [l.ds, l.kc] }, { version: 'v3.28.1', objects: calicoYaml('3.28.1') });
    expect(r.finding).toMatchObject({
      id: 'calico-manifest-edits',
      action: 'transform',
      objects: ['DaemonSet/kube-system/calico-node', 'ConfigMap/kube-system/calico-config', 'Deployment/kube-system/calico-kube-controllers'],
    });
    expect(r.finding!.details).toContain('calico-node env IP_AUTODETECTION_METHOD=interface=eth1 (v3.28.1 calico.yaml: not set)');
    expect(r.finding!.details).toContain('calico-node env CALICO_IPV4POOL_IPIP=Never (v3.28.1 calico.yaml: Always)');
    expect(r.finding!.details).toContain('calico-config veth_mtu=1440 (v3.28.1 calico.yaml: 0)');
    expect(r.transform.calicoNodeEnv.remove).toEqual(['FELIX_WIREGUARDMTU']);
    expect(r.transform.repositories).toEqual({
      [`${REL}calico/cni`]: 'registry.local:5000/calico/cni',
      [`${REL}calico/node`]: 'registry.local:5000/calico/node',
      [`${REL}calico/kube-controllers`]: 'registry.local:5000/calico/kube-controllers',
    });

    const target = applyManifestEdits(calicoYaml('3.27.4'), r.transform);
    const ds = get(target, 'DaemonSet', 'calico-node');
    const byName = new Map(nodeEnv(ds).map((e) => [e.name, e]));
    expect(byName.get('IP_AUTODETECTION_METHOD')).toEqual({ name: 'IP_AUTODETECTION_METHOD', value: 'interface=eth1' });
    expect(byName.get('CALICO_IPV4POOL_CIDR')?.value).toBe('10.244.0.0/16');
    expect(byName.get('CALICO_IPV4POOL_IPIP')?.value).toBe('Never');
    expect(byName.has('FELIX_WIREGUARDMTU')).toBe(false);
    const node327 = ds.spec.template.spec.containers.find((c: any) => c.name === 'calico-node');
    expect(node327.livenessProbe.exec.command).toEqual(['/bin/calico-node', '-felix-live']);
    expect(node327.readinessProbe.exec.command).toEqual(['/bin/calico-node', '-felix-ready']);
    expect(node327.livenessProbe.periodSeconds).toBe(
      get(calicoYaml('3.27.4'), 'DaemonSet', 'calico-node').spec.template.spec.containers[0].livenessProbe.periodSeconds,
    );
    expect(r.finding!.details.filter((d) => d.includes('Probe.exec.command'))).toHaveLength(2);
    expect(byName.get('NODENAME')).toEqual({ name: 'NODENAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }); // the release's, not an edit
    expect(images(ds)).toEqual([
      'registry.local:5000/calico/cni:v3.27.4',
      'registry.local:5000/calico/cni:v3.27.4',
      'registry.local:5000/calico/node:v3.27.4',
      'registry.local:5000/calico/node:v3.27.4',
    ]);
    expect(images(get(target, 'Deployment', 'calico-kube-controllers'))).toEqual(['registry.local:5000/calico/kube-controllers:v3.27.4']);
    const cm = get(target, 'ConfigMap', 'calico-config');
    expect(cm.data!.veth_mtu).toBe('1440');
    expect(cm.data!.cni_network_config).toBe(get(calicoYaml('3.27.4'), 'ConfigMap', 'calico-config').data!.cni_network_config);
    // Every other object is the release's, untouched.
    const rel = calicoYaml('3.27.4');
    expect(target.filter((o) => !['DaemonSet', 'Deployment', 'ConfigMap'].includes(o.kind))).toEqual(
      rel.filter((o) => !['DaemonSet', 'Deployment', 'ConfigMap'].includes(o.kind)),
    );
    expect(applyManifestEdits(rel, undefined)).toBe(rel);
  });

  const mirrored = (image: (repo: string, tag: string) => string) => {
    const l = live328();
    for (const c of [...l.ds.spec.template.spec.initContainers, ...l.ds.spec.template.spec.containers, ...l.kc.spec.template.spec.containers]) {
      const [, repo, tag] = /^(.*):([^:/]+)$/.exec(c.image.replace(REL, 'registry.local:5000/'))!;
      c.image = image(repo!, tag!);
    }
    return l;
  };

  it('images pinned by digest alone in a mirror: the target comes from the same mirror, named by its tag, and the plan says so', () => {
    const digest = `sha256:${'d'.repeat(64)}`;
    const l = mirrored((repo) => `${repo}@${digest}`);
    const r = findManifestEdits({ ds: l.ds, config: l.config, workloads: [l.ds, l.kc] }, { version: 'v3.28.1', objects: calicoYaml('3.28.1') });
    expect(r.transform.repositories[`${REL}calico/node`]).toBe('registry.local:5000/calico/node');
    expect(r.finding!.details).toContain(
      `image registry.local:5000/calico/node instead of ${REL}calico/node (pinned by digest ${digest}; the target's is named by its tag)`,
    );
    const target = applyManifestEdits(calicoYaml('3.27.4'), r.transform);
    expect(images(get(target, 'Deployment', 'calico-kube-controllers'))).toEqual(['registry.local:5000/calico/kube-controllers:v3.27.4']);
  });

  it("a mirror that retags the release's images is refused by name: the target's tag there cannot be derived", () => {
    const l = mirrored((repo, tag) => `${repo}:${tag}-mirror.1`);
    let err: any;
    try {
      findManifestEdits({ ds: l.ds, config: l.config, workloads: [l.ds, l.kc] }, { version: 'v3.28.1', objects: calicoYaml('3.28.1') });
    } catch (e) {
      err = e;
    }
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(err.message).toMatch(/registry\.local:5000\/calico\/cni:v3\.28\.1-mirror\.1 is a retagged v3\.28\.1/);
    expect(err.hint).toMatch(/--manifests/);
  });
});
