import { describe, expect, it } from 'vitest';
import { argoOwner as owner } from '../../../test/support/gitops-owner.js';
import { makeState } from '../../../test/support/doctor-state.js';
import { runChecks } from '../doctor.js';

describe('gitops-owner: doctor says who reconciles Calico', () => {
  it('doctor: a warning with the suspend command while it would revert a change, info otherwise', () => {
    const warn = runChecks({ ...makeState({}), reconcilers: [owner('self-healing', true)] }).filter((f) => f.id === 'gitops-owner');
    expect(warn).toHaveLength(1);
    expect(warn[0]).toMatchObject({ severity: 'warning', objects: ['Deployment/tigera-operator/tigera-operator'] });
    expect(warn[0]!.fix).toContain('argocd app set calico --sync-policy none; then cni-rewind apply <plan> --owner-suspended');
    const unknown = runChecks({ ...makeState({}), reconcilers: [owner('unknown', true)] }).find((f) => f.id === 'gitops-owner')!;
    expect(unknown.title).toContain('unknown, no Application CRD in this cluster');
    const info = runChecks({ ...makeState({}), reconcilers: [owner('manual', false)] }).find((f) => f.id === 'gitops-owner')!;
    expect(info.severity).toBe('info');
    expect(runChecks(makeState({})).map((f) => f.id)).not.toContain('gitops-owner');
  });
});
