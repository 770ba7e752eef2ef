/**
 * What tigera/operator v1.34.3's ippool controller does, read in its source: ippool/defaults.go defaults a missing
 * Installation ipPools to [] when pools exist (so owned pools are deleted), and pool_controller.go rewrites or
 * deletes existing pools only while APIServer `default` reports state Ready (otherwise it only goes Degraded).
 */
import { describe, expect, it } from 'vitest';
import { loadRelease } from '../../calico/release.js';
import type { KubeObject } from '../../kube/types.js';
import { entry, installationWith, makeState, operatorWorkload, pool } from '../../../test/support/doctor-state.js';
import { targetPoolsCheck } from '../../plan/preflight.js';
import { runChecks } from '../doctor.js';

const MANAGED = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
const apiServer = (state?: string): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'APIServer',
  metadata: { name: 'default' },
  ...(state ? { status: { state } } : {}),
});

describe('operator v1.34+: ipPools defaulting and the API-server gate', () => {
  it('an Installation without ipPools is read as ipPools: [] while pools exist: the owned pool will be deleted', () => {
    const st = makeState({ workloads: [operatorWorkload('v1.34.3')], objects: [installationWith(undefined), pool('a', '10.50.0.0/16', {}, MANAGED)] });
    const f = runChecks(st).find((x) => x.id === 'installation-ippools-empty')!;
    expect(f.severity).toBe('error');
    expect(f.title).toContain('no ipPools (the operator defaults it to [])');
    // No pools at all: the operator fills in its default pool instead; nothing is deleted.
    const none = makeState({ workloads: [operatorWorkload('v1.34.3')], objects: [installationWith(undefined)] });
    expect(runChecks(none).map((x) => x.id)).not.toContain('installation-ippools-empty');
  });

  it('a plan that writes an Installation without ipPools while owned pools exist is refused by the target-operator-pools preflight', async () => {
    const v328 = await loadRelease('3.28.1');
    const st = makeState({ workloads: [operatorWorkload('v1.34.3')], objects: [installationWith(undefined), pool('a', '10.50.0.0/16', {}, MANAGED)] });
    const check = targetPoolsCheck(st, v328, { removeFields: [], trimPoolsPerFamily: false });
    expect(check).toMatchObject({ ok: false, blocking: true });
    expect(check.detail).toContain('will delete a');
  });

  it('while the APIServer is not Ready the re-enable is predicted for when it becomes Ready, not now', () => {
    const objects = [
      installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]),
      pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true }, MANAGED),
    ];
    const withApi = (state?: string) => {
      const st = makeState({ workloads: [operatorWorkload('v1.34.3')], objects });
      st.objects['apiservers.operator.tigera.io'] = [apiServer(state)];
      return runChecks(st).find((x) => x.id === 'pool-disabled-will-be-reenabled')!;
    };
    const ready = withApi('Ready');
    expect(ready.title).toMatch(/will re-enable it$/);
    expect(ready.why).toContain('at once');
    const degraded = withApi('Degraded');
    expect(degraded.severity).toBe('error');
    expect(degraded.title).toContain('will re-enable it once the Calico API server is Ready');
    expect(degraded.why).toContain('APIServer default is not Ready (state: Degraded)');
    expect(degraded.why).not.toContain('at once');
    expect(withApi(undefined).why).toContain('(state: none)');
  });
});
