import { describe, expect, it } from 'vitest';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { apiServerMoveFindings, distinctV3Uids, v3UidFindings } from './apiserver-findings.js';

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

describe('v3UidFindings: the UIDs projectcalico.org/v3 objects get change between 3.27.4 and 3.27.5 (calico #9191)', () => {
  const said = (from: string, to: string, served = true) => v3UidFindings(release(to), { version: from }, served).map((f) => f.id);

  it('is said across the change, either way, and through 3.28.0 (not in the mirror)', () => {
    expect(said('v3.26.5', 'v3.27.5')).toEqual(['v3-uids-change']);
    expect(said('v3.27.4', 'v3.28.1')).toEqual(['v3-uids-change']);
    expect(said('v3.28.5', 'v3.27.4')).toEqual(['v3-uids-change']);
    expect(said('v3.27.4', 'v3.28.0')).toEqual(['v3-uids-change']);
    const [f] = v3UidFindings(release('v3.27.5'), { version: 'v3.26.5' }, true);
    expect(f!.title).toMatch(/restart kube-controller-manager/);
  });

  it('is not said on one side of it, or without the Calico API server', () => {
    expect(said('v3.26.5', 'v3.27.4')).toEqual([]);
    expect(said('v3.27.5', 'v3.28.5')).toEqual([]);
    expect(said('v3.28.5', 'v3.32.1')).toEqual([]);
    expect(said('v3.26.5', 'v3.27.5', false)).toEqual([]);
  });

  it('knows which releases derive their own UIDs', () => {
    expect([distinctV3Uids('v3.26.5'), distinctV3Uids('v3.27.4'), distinctV3Uids('v3.27.5'), distinctV3Uids('v3.28.0'), distinctV3Uids('v3.28.1')]).toEqual([
      false,
      false,
      true,
      undefined,
      true,
    ]);
  });
});
