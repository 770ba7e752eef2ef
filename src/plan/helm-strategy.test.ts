import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import { helmStepIds, installationCleanup } from './plan.js';
import { isLocalChart, planHelmStrategy, resolveHelmBinary, type HelmRevision } from './helm-strategy.js';
import type { InstallationTransform } from './types.js';

const none: InstallationTransform = { removeFields: [], trimPoolsPerFamily: false };
const release = {
  release: 'calico',
  namespace: 'tigera-operator',
  record: 'sh.helm.release.v1.calico.v3',
  chart: { name: 'tigera-operator', version: 'v3.29.7' },
  revision: 3,
  status: 'deployed',
};
const history: HelmRevision[] = [
  { revision: 1, status: 'superseded', chartVersion: 'v3.28.1' },
  { revision: 2, status: 'superseded', chartVersion: 'v3.28.1' },
  { revision: 3, status: 'deployed', chartVersion: 'v3.29.7' },
];
const input = (over: Partial<Parameters<typeof planHelmStrategy>[0]> = {}) => ({
  release,
  history,
  storage: 'secret' as const,
  target: 'v3.30.7',
  direction: 'upgrade' as const,
  chart: 'projectcalico/tigera-operator',
  installation: none,
  ...over,
});

describe('planHelmStrategy', () => {
  it('upgrades with the chart given, from the deployed revision', () => {
    expect(planHelmStrategy(input())).toEqual({
      release: 'calico',
      namespace: 'tigera-operator',
      storage: 'secret',
      currentRevision: 3,
      currentChart: 'v3.29.7',
      action: 'upgrade',
      chart: 'projectcalico/tigera-operator',
    });
  });

  it('a downgrade to a chart version the history has rolls back to its newest superseded revision', () => {
    const s = planHelmStrategy(input({ target: 'v3.28.1', direction: 'downgrade' }));
    expect(s).toMatchObject({ action: 'rollback', rollbackRevision: 2 });
    expect(s.chart).toBeUndefined();
    // The chart version compares without its v, as upstream and packaged charts differ there.
    expect(planHelmStrategy(input({ target: '3.28.1', direction: 'downgrade' }))).toMatchObject({ action: 'rollback', rollbackRevision: 2 });
  });

  it('a downgrade the history has no revision of, or only a failed one, is a helm upgrade with the older chart', () => {
    const failed = [...history, { revision: 4, status: 'failed', chartVersion: 'v3.27.4' }];
    expect(planHelmStrategy(input({ target: 'v3.27.4', direction: 'downgrade', history: failed }))).toMatchObject({ action: 'upgrade' });
  });

  it('an upgrade to a chart version the history once had still upgrades (the values as they are now)', () => {
    const s = planHelmStrategy(input({ release: { ...release, revision: 4, chart: { version: 'v3.28.1' } }, target: 'v3.29.7' }));
    expect(s.action).toBe('upgrade');
  });

  it('refuses a release with no deployed revision and an unread record', () => {
    expect(() => planHelmStrategy(input({ release: { ...release, status: 'failed' } }))).toThrow(
      /^Helm release tigera-operator\/calico has no deployed revision \(newest: 3 failed\)/,
    );
    expect(() => planHelmStrategy(input({ release: { release: 'calico', namespace: 'tigera-operator', unreadable: 'listing Secrets is forbidden' } }))).toThrow(
      /listing Secrets is forbidden; the plan upgrades a Helm install with Helm/,
    );
    // Fields the target CRD lacks are no values of Helm's: removed after helm, no values edit.
    const removed = planHelmStrategy(input({ installation: { ...none, removeFields: ['spec.calicoNetwork.ipPools[0].disableNewAllocations'] } }));
    expect(removed.action).toBe('upgrade');
    expect(removed.valuesEdits).toBeUndefined();
  });

  it('pool edits of the Installation (calico#9100 on a Helm install) become edits of the values helm upgrade is given', () => {
    const stop = { cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' };
    expect(planHelmStrategy(input({ target: 'v3.28.1', installation: { ...none, stopAllocations: stop } }))).toMatchObject({
      action: 'upgrade',
      chart: 'projectcalico/tigera-operator',
      valuesEdits: ['installation.calicoNetwork.ipPools[cidr 192.168.0.0/16].nodeSelector: "!all()"'],
    });
    expect(planHelmStrategy(input({ installation: { ...none, trimPoolsPerFamily: true } })).valuesEdits).toEqual([
      'installation.calicoNetwork.ipPools: the first pool per IP family kept',
    ]);
    // helm rollback would restore revision 2's values verbatim, without the stop: an upgrade to the target chart instead.
    const back = planHelmStrategy(input({ target: 'v3.28.1', direction: 'downgrade', installation: { ...none, stopAllocations: stop } }));
    expect(back).toMatchObject({ action: 'upgrade', chart: 'projectcalico/tigera-operator' });
    expect(back.rollbackRevision).toBeUndefined();
  });
});

describe('helm steps', () => {
  it('upgrade: CRDs first, then helm upgrade; rollback: helm rollback, then the CRDs; no operator pause', () => {
    expect(helmStepIds('in-place', { action: 'upgrade', cleanup: false }, false)).toEqual([
      'preflight',
      'apply-crds',
      'helm-upgrade',
      'wait-rollout',
      'verify-data',
    ]);
    expect(helmStepIds('in-place', { action: 'rollback', cleanup: true }, true)).toEqual([
      'preflight',
      'restore-drift',
      'helm-rollback',
      'apply-crds',
      'transform-installation',
      'wait-rollout',
      'verify-data',
    ]);
    expect(() => helmStepIds('reinstall', { action: 'upgrade', cleanup: false }, false)).toThrow(/reinstall is not implemented for a Helm install/);
  });

  it('fields the target lacks and the newer operator’s finalizers and TigeraStatuses are the Installation edits kept', () => {
    expect(installationCleanup(none)).toBe(false);
    expect(installationCleanup({ ...none, removeFields: ['spec.calicoNetwork.ipPools[0].disableNewAllocations'] })).toBe(true);
    expect(installationCleanup({ ...none, removeFinalizers: ['tigera.io/operator-cleanup'] })).toBe(true);
  });
});

describe('resolveHelmBinary and isLocalChart', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-bin-'));
  const bin = path.join(dir, 'helm');
  fs.writeFileSync(bin, '#!/bin/sh\n', { mode: 0o755 });
  const plain = path.join(dir, 'plain');
  fs.writeFileSync(plain, '', { mode: 0o644 });

  it('takes --helm when executable, else helm on PATH, else refuses by name', () => {
    expect(resolveHelmBinary(bin, 'x')).toBe(bin);
    expect(resolveHelmBinary(undefined, 'x', { PATH: `/nonexistent${path.delimiter}${dir}` })).toBe(bin);
    expect(() => resolveHelmBinary(plain, 'no plan was made')).toThrow(`helm not found: --helm ${plain} is not an executable file; no plan was made`);
    expect(() => resolveHelmBinary(undefined, 'no plan was made', { PATH: '/nonexistent' })).toThrow(/^helm not found on PATH .*; no plan was made$/);
    let thrown: unknown;
    try {
      resolveHelmBinary(undefined, 'x', { PATH: '' });
    } catch (err) {
      thrown = err;
    }
    // Exit 5 (refused), as the README's exit-code table has it for a missing prerequisite of a change.
    expect(isErrorKind(thrown, 'refused')).toBe(true);
  });

  it('a path or a .tgz is a local chart; repo/name is not', () => {
    expect(isLocalChart('/tmp/tigera-operator-v3.29.7.tgz')).toBe(true);
    expect(isLocalChart('./charts/tigera-operator')).toBe(true);
    expect(isLocalChart('projectcalico/tigera-operator')).toBe(false);
  });
});
