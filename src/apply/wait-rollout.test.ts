import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { rendersVersion } from './wait-rollout.js';

const ds = (image: string, generation = 2, observed = 2): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name: 'calico-node', namespace: 'calico-system', generation },
  spec: { template: { spec: { containers: [{ name: 'calico-node', image }] } } },
  status: { observedGeneration: observed },
});

describe('rendersVersion: does the operator-rendered calico-node run the target version?', () => {
  it('reads the tag whatever the registry, image path or registry port', () => {
    expect(rendersVersion(ds('quay.io/calico/node:v3.28.1'), 'v3.28.1')).toBe(true);
    expect(rendersVersion(ds('docker.io/calico/node:v3.27.4'), 'v3.28.1')).toBe(false);
    expect(rendersVersion(ds('registry.local:5000/mirror/calico/node:v3.28.1'), 'v3.28.1')).toBe(true);
    expect(rendersVersion(ds('registry.local:5000/mirror/calico/node:v3.28.10'), 'v3.28.1')).toBe(false);
    expect(rendersVersion(ds('quay.io/calico/node:v3.28.1@sha256:abc'), 'v3.28.1')).toBe(true);
  });
  it('an image pinned by digest names no version: only an observed generation counts', () => {
    expect(rendersVersion(ds('registry.local:5000/calico/node@sha256:abc', 3, 3), 'v3.28.1')).toBe(true);
    expect(rendersVersion(ds('registry.local:5000/calico/node@sha256:abc', 3, 2), 'v3.28.1')).toBe(false);
    expect(rendersVersion(ds(''), 'v3.28.1')).toBe(false);
  });
});
