import { describe, expect, it } from 'vitest';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { apiServerMoveFindings } from './apiserver-findings.js';

const apiServer: KubeObject = { apiVersion: 'operator.tigera.io/v1', kind: 'APIServer', metadata: { name: 'default' } };
const live = (objs: KubeObject[]) => ({ crds: [], objects: new Map([['apiservers.operator.tigera.io', objs]]) });
const release = (version: string) => ({ version }) as Release;

describe('apiServerMoveFindings: the API server v1.40+ runs in calico-system, left by a downgrade below 3.31', () => {
  it('is said, with the command that removes it, only from 3.31+ to below 3.31 with an APIServer', () => {
    const [f] = apiServerMoveFindings(live([apiServer]), release('v3.30.7'), { version: 'v3.31.7' });
    expect(f).toMatchObject({ id: 'api-server-left-in-calico-system', severity: 'warning', action: 'keep' });
    expect(f!.objects).toEqual(['APIServer/default', 'Deployment/calico-system/calico-apiserver']);
    expect(f!.details.join('\n')).toMatch(/kubectl -n calico-system delete deployment\/calico-apiserver service\/calico-api /);
    expect(apiServerMoveFindings(live([apiServer]), release('v3.28.5'), { version: 'v3.32.1' })).toHaveLength(1);
  });

  it('is not said between releases on the same side, upwards, or without an APIServer', () => {
    expect(apiServerMoveFindings(live([apiServer]), release('v3.31.7'), { version: 'v3.32.1' })).toEqual([]);
    expect(apiServerMoveFindings(live([apiServer]), release('v3.29.7'), { version: 'v3.30.7' })).toEqual([]);
    expect(apiServerMoveFindings(live([apiServer]), release('v3.31.7'), { version: 'v3.30.7' })).toEqual([]);
    expect(apiServerMoveFindings(live([]), release('v3.30.7'), { version: 'v3.31.7' })).toEqual([]);
  });
});
