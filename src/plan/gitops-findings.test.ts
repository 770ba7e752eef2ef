import { describe, expect, it } from 'vitest';
import { argoOwner as owner } from '../../test/support/gitops-owner.js';
import { reconcilerFindings } from './gitops-findings.js';

describe('gitops-owner in a plan', () => {
  it('plan: one finding per owner that never blocks the plan itself (apply decides, at its start)', () => {
    const [blocking, git] = reconcilerFindings([owner('self-healing', true), owner('syncs-on-git-change', false)]);
    expect(blocking).toMatchObject({
      id: 'gitops-owner',
      severity: 'warning',
      action: 'none',
      details: ['suspend it with: argocd app set calico --sync-policy none'],
    });
    expect(blocking!.plan).toContain('--owner-suspended');
    expect(git).toMatchObject({ severity: 'info', action: 'none' });
    expect(git!.plan).toContain('a commit to its Git source');
  });
});
