import { describe, expect, it } from 'vitest';
import { applyPlan } from './apply.js';
import { isErrorKind } from '../core/errors.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { Plan } from '../plan/types.js';
import { fluxOwnedOperatorInstall, INSTALL_PATHS, recordingApi } from '../../test/support/recording-api.js';

/*
 * apply's checks before the journal (v3-CRD mode, etcd, Calico Enterprise, a GitOps owner) judge one read of the
 * objects they look at. A self-healing Flux Kustomization owns the operator, so apply refuses at the last of those
 * checks, after every read they make; the fake API server fails any request that is not a read.
 */
describe("apply's start-of-apply checks", () => {
  it('read the Installation, calico-node, calico-config, canal and the operator once, and still refuse a self-healing owner', async () => {
    const api = recordingApi(fluxOwnedOperatorInstall());
    const err = await applyPlan(api.client, {} as Plan, {}, new Reporter(new RecordingIoHost())).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
    expect((err as Error).message).toContain('Flux Kustomization flux-system/calico (on Deployment/tigera-operator/tigera-operator)');
    for (const p of Object.values(INSTALL_PATHS)) expect(api.count(p), p).toBe(1);
    expect(api.repeated()).toEqual([]);
  });
});
