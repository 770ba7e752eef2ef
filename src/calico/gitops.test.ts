import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { argoState, fluxState, judgeOwners, refuseReconcilers, type Reconciler } from './gitops.js';
import { gitOpsOwners } from './install-method.js';

const app = (syncPolicy: unknown, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: { name: 'calico', namespace: 'argocd', ...extra },
  spec: { syncPolicy },
});
const flux = (kind: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: kind === 'Kustomization' ? 'kustomize.toolkit.fluxcd.io/v1' : 'helm.toolkit.fluxcd.io/v2',
  kind,
  metadata: { name: 'calico', namespace: 'flux-system' },
  spec,
});

describe('argoState: what the Application sync policy does to a live change (argo-cd docs/user-guide/auto_sync.md)', () => {
  it('selfHeal reverts, automated without selfHeal waits for Git, no automated or enabled: false is manual', () => {
    expect(argoState(app({ automated: { prune: true, selfHeal: true } })).state).toBe('self-healing');
    expect(argoState(app({ automated: { prune: true } })).state).toBe('syncs-on-git-change');
    expect(argoState(app({ automated: { selfHeal: false } })).state).toBe('syncs-on-git-change');
    expect(argoState(app({ automated: { enabled: false, selfHeal: true } })).state).toBe('manual');
    expect(argoState(app({ syncOptions: ['ServerSideApply=true'] })).state).toBe('manual');
    expect(argoState(app(undefined)).state).toBe('manual');
  });
});

describe('fluxState: spec.suspend decides', () => {
  it('a Kustomization or HelmRelease reconciles unless suspended', () => {
    expect(fluxState(flux('Kustomization', { interval: '10m' }), 'Kustomization')).toMatchObject({ state: 'self-healing' });
    expect(fluxState(flux('Kustomization', { interval: '10m' }), 'Kustomization').reason).toContain('every 10m');
    expect(fluxState(flux('Kustomization', { suspend: true }), 'Kustomization').state).toBe('suspended');
    expect(fluxState(flux('HelmRelease', { suspend: false }), 'HelmRelease').state).toBe('self-healing');
    expect(fluxState(flux('HelmRelease', { driftDetection: { mode: 'enabled' } }), 'HelmRelease').reason).toContain('corrects drift');
    expect(fluxState(flux('HelmRelease', { suspend: true }), 'HelmRelease').state).toBe('suspended');
  });
});

/** A client that has the given objects and CRD names; `forbidden` kinds answer 403. */
function client(objects: KubeObject[], crds: string[], forbidden: string[] = []): { client: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const c = {
    async getOrUndefined(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.group}/${r.version} ${r.kind} ${ns ?? ''}/${name}`);
      if (forbidden.includes(r.kind)) throw new KubeApiError(403, 'Forbidden', 'forbidden', 'GET', `/${r.plural}/${name}`);
      if (r.kind === 'CustomResourceDefinition') return crds.includes(name) ? { metadata: { name } } : undefined;
      return objects.find((o) => o.kind === r.kind && o.apiVersion === `${r.group}/${r.version}` && o.metadata.namespace === ns && o.metadata.name === name);
    },
  };
  return { client: c as unknown as KubeClient, calls };
}

const operator = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'tigera-operator', namespace: 'tigera-operator', labels, annotations },
});

describe('judgeOwners: the marks read for real', () => {
  it('an Argo CD tracking id names the application; selfHeal blocks apply with the exact suspend command', async () => {
    const op = operator({}, { 'argocd.argoproj.io/tracking-id': 'calico:apps/Deployment:tigera-operator/tigera-operator' });
    const { client: c } = client([app({ automated: { selfHeal: true } })], ['applications.argoproj.io']);
    const [r] = await judgeOwners(c, gitOpsOwners(op));
    expect(r).toMatchObject({ tool: 'Argo CD', kind: 'Application', namespace: 'argocd', name: 'calico', state: 'self-healing', blocksApply: true });
    expect(r!.suspendCommand).toBe('argocd app set calico --sync-policy none');
    expect(r!.objects).toEqual(['Deployment/tigera-operator/tigera-operator']);
  });

  it('an application in another namespace (`ns_name`) is read there and named ns/name to the argocd CLI', async () => {
    const op = operator({ 'argocd.argoproj.io/instance': 'platform_calico' });
    const other = { ...app({ automated: {} }), metadata: { name: 'calico', namespace: 'platform' } };
    const [r] = await judgeOwners(client([other], ['applications.argoproj.io']).client, gitOpsOwners(op));
    expect(r).toMatchObject({ namespace: 'platform', state: 'syncs-on-git-change', blocksApply: false });
    expect(r!.suspendCommand).toBe('argocd app set platform/calico --sync-policy none');
  });

  it('an ApplicationSet-made application is suspended through the ApplicationSet', async () => {
    const op = operator({ 'argocd.argoproj.io/instance': 'calico' });
    const owned = app(
      { automated: { selfHeal: true } },
      { ownerReferences: [{ kind: 'ApplicationSet', name: 'cni', apiVersion: 'argoproj.io/v1alpha1', uid: 'u' }] as any },
    );
    const [r] = await judgeOwners(client([owned], []).client, gitOpsOwners(op));
    expect(r!.suspendCommand).toContain('ApplicationSet argocd/cni');
  });

  it('the default app.kubernetes.io/instance label counts only when such an Application exists (Helm charts set it too)', async () => {
    const op = operator({ 'app.kubernetes.io/instance': 'calico' });
    expect(await judgeOwners(client([], ['applications.argoproj.io']).client, [], [op])).toEqual([]);
    expect(await judgeOwners(client([], [], ['Application']).client, [], [op])).toEqual([]);
    const [r] = await judgeOwners(client([app({ automated: { selfHeal: true } })], []).client, [], [op]);
    expect(r).toMatchObject({ name: 'calico', state: 'self-healing' });
  });

  it('Flux labels: Kustomization at v1, HelmRelease found at an older served version; suspend command per kind', async () => {
    const op = operator({ 'kustomize.toolkit.fluxcd.io/name': 'infra', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' });
    const ks = { ...flux('Kustomization', { interval: '5m' }), metadata: { name: 'infra', namespace: 'flux-system' } };
    const [k] = await judgeOwners(client([ks], []).client, gitOpsOwners(op));
    expect(k).toMatchObject({ state: 'self-healing', suspendCommand: 'flux suspend kustomization infra -n flux-system' });
    const inst: KubeObject = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default', labels: { 'helm.toolkit.fluxcd.io/name': 'calico' } },
    };
    const hr = { ...flux('HelmRelease', { suspend: true }), apiVersion: 'helm.toolkit.fluxcd.io/v2beta1' };
    const { client: c, calls } = client([hr], []);
    const [h] = await judgeOwners(c, gitOpsOwners(inst));
    expect(h).toMatchObject({
      namespace: 'flux-system',
      state: 'suspended',
      blocksApply: false,
      suspendCommand: 'flux suspend helmrelease calico -n flux-system',
    });
    expect(calls.filter((x) => x.includes('HelmRelease'))).toHaveLength(3);
  });

  it('no CRD, no object, forbidden: unknown in one line, never a crash, and apply is blocked', async () => {
    const op = operator({ 'kustomize.toolkit.fluxcd.io/name': 'infra' });
    const [noCrd] = await judgeOwners(client([], []).client, gitOpsOwners(op));
    expect(noCrd).toMatchObject({ state: 'unknown', blocksApply: true });
    expect(noCrd!.reason).toMatch(/^no Kustomization CRD in this cluster/);
    const [missing] = await judgeOwners(client([], ['kustomizations.kustomize.toolkit.fluxcd.io']).client, gitOpsOwners(op));
    expect(missing!.reason).toBe('Kustomization flux-system/infra not found');
    const [denied] = await judgeOwners(client([], [], ['Kustomization']).client, gitOpsOwners(op));
    expect(denied!.reason).toContain('not allowed to read Kustomization flux-system/infra');
  });

  it('one owner marking several objects is read once and lists them all', async () => {
    const marks = { 'argocd.argoproj.io/instance': 'calico' };
    const inst: KubeObject = { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', labels: marks } };
    const { client: c, calls } = client([app({ automated: { selfHeal: true } })], []);
    const rs = await judgeOwners(c, [...gitOpsOwners(operator(marks)), ...gitOpsOwners(inst)]);
    expect(rs).toHaveLength(1);
    expect(rs[0]!.objects).toEqual(['Deployment/tigera-operator/tigera-operator', 'Installation/default']);
    expect(calls.filter((x) => x.includes('Application'))).toHaveLength(1);
  });
});

describe('refuseReconcilers', () => {
  const r = (state: Reconciler['state'], blocksApply: boolean): Reconciler => ({
    tool: 'Flux',
    kind: 'Kustomization',
    namespace: 'flux-system',
    name: 'infra',
    objects: ['Deployment/tigera-operator/tigera-operator'],
    state,
    reason: 'x',
    suspendCommand: 'flux suspend kustomization infra -n flux-system',
    blocksApply,
  });
  it('refuses (exit 5) naming the suspend command, unless --owner-suspended; non-blocking owners pass', () => {
    let err: unknown;
    try {
      refuseReconcilers([r('self-healing', true)], false);
    } catch (e) {
      err = e;
    }
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect((err as { hint?: string }).hint).toContain('flux suspend kustomization infra -n flux-system');
    expect((err as { hint?: string }).hint).toContain('--owner-suspended');
    expect(refuseReconcilers([r('self-healing', true)], true)).toHaveLength(1);
    expect(refuseReconcilers([r('suspended', false)], false)).toEqual([]);
  });
});
