/**
 * GitOps owners and a managed add-on on the real control plane (issue 31, item 4). The real upstream CRDs of Argo CD's
 * Application and Flux's Kustomization are installed (test/fixtures/gitops, vendored with their source), the operator
 * Deployment and the Installation carry the marks Argo CD and Flux put on what they apply (Argo CD's tracking-id
 * annotation with its default instance label, Flux's kustomize.toolkit.fluxcd.io labels), and the owners are real
 * objects of those CRDs. No Argo CD or Flux controller runs: what is tested is what cni-rewind reads and decides.
 * The apply runs stop before any change: refused (exit 5) before the journal, or let through the owner check and
 * stopped at the confirmation (no --yes, no terminal), which comes after apply's own checks and before the lock.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { journalPathFor } from '../../src/apply/journal.js';
import { resourceTypeOf } from '../../src/calico/gitops.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { applyManifests, parseManifests, waitCrdsEstablished } from '../../src/kube/manifests.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { packageRoot } from '../../src/core/package-root.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { releasesDir } from '../support/releases.js';
import { deleteNodes, operatorType, resetCalico, runCli, testClient } from './helpers.js';
import { installCalico328 } from './plan-support.js';

const CRD_FILES = ['argocd-application-crd.yaml', 'flux-kustomization-crd.yaml'];
const CRD_NAMES = ['applications.argoproj.io', 'kustomizations.kustomize.toolkit.fluxcd.io'];
const NAMESPACES = ['argocd', 'flux-system'];
const APP = resourceTypeOf('Application');
const KS = resourceTypeOf('Kustomization');
const ARGO_SUSPEND = 'argocd app set calico --sync-policy none';
const FLUX_SUSPEND = 'flux suspend kustomization calico-infra -n flux-system';
const NOT_CONFIRMED = 'not confirmed: nothing was changed';

const application: KubeObject = {
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: { name: 'calico', namespace: 'argocd' },
  spec: {
    project: 'default',
    source: { repoURL: 'https://git.example.invalid/platform.git', path: 'calico', targetRevision: 'main' },
    destination: { server: 'https://kubernetes.default.svc', namespace: 'tigera-operator' },
    syncPolicy: { automated: { prune: true, selfHeal: true } },
  },
};
const kustomization: KubeObject = {
  apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
  kind: 'Kustomization',
  metadata: { name: 'calico-infra', namespace: 'flux-system' },
  spec: { interval: '10m', path: './calico', prune: true, sourceRef: { kind: 'GitRepository', name: 'flux-system' } },
};

/** Read, change, write back (the objects here have no controller racing the write). */
async function edit(client: KubeClient, r: ResourceType, ns: string | undefined, name: string, change: (o: KubeObject) => void): Promise<void> {
  const o = await client.get(r, ns, name);
  change(o);
  await client.replace(r, o);
}

describe('GitOps owners and managed add-ons: doctor and plan say who reconciles, apply refuses while one self-heals', () => {
  let client: KubeClient;
  let dir: string;
  let plan: string;
  let bundle: string;

  beforeAll(async () => {
    client = await testClient();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-gitops-'));
    await resetCalico(client);
    await deleteNodes(client, 'gto-');
    await createFakeNodes(client, [{ name: 'gto-1' }, { name: 'gto-2' }]);
    await installCalico328(client);
    const crds = CRD_FILES.flatMap((f) => {
      const file = path.join(packageRoot(), 'test', 'fixtures', 'gitops', f);
      return parseManifests(fs.readFileSync(file, 'utf8'), file);
    });
    await applyManifests(client, crds, { fieldManager: 'cni-rewind-e2e' });
    await waitCrdsEstablished(client, CRD_NAMES);
    for (const name of NAMESPACES) await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    // Argo CD's annotation+label tracking and Flux's kustomize-controller labels, as they write them.
    await edit(client, K.deployment, 'tigera-operator', 'tigera-operator', (o) => {
      o.metadata.labels = { ...o.metadata.labels, 'app.kubernetes.io/instance': 'calico' };
      o.metadata.annotations = { ...o.metadata.annotations, 'argocd.argoproj.io/tracking-id': 'calico:apps/Deployment:tigera-operator/tigera-operator' };
    });
    await edit(client, operatorType('installations', 'Installation'), undefined, 'default', (o) => {
      o.metadata.labels = { ...o.metadata.labels, 'kustomize.toolkit.fluxcd.io/name': 'calico-infra', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' };
    });
    await client.create(APP, application);
    await client.create(KS, kustomization);
    bundle = path.join(dir, 'bundle');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    plan = path.join(dir, 'plan.yaml');
  });

  afterAll(async () => {
    if (client) {
      await client.delete(APP, 'argocd', 'calico').catch(() => undefined);
      await client.delete(KS, 'flux-system', 'calico-infra').catch(() => undefined);
      for (const name of CRD_NAMES) await client.delete(K.crd, undefined, name).catch(() => undefined);
      for (const name of NAMESPACES) await client.delete(K.namespace, undefined, name).catch(() => undefined);
      await deleteNodes(client, 'gto-').catch(() => undefined);
      client.close();
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('doctor names each owner, what it does and the command that suspends it', async () => {
    const r = await runCli(['doctor', '-o', 'json']);
    const owners = JSON.parse(r.stdout).findings.filter((f: any) => f.id === 'gitops-owner');
    expect(owners.map((f: any) => f.title).sort()).toEqual([
      'Argo CD Application argocd/calico (on Deployment/tigera-operator/tigera-operator): automated sync with selfHeal: it reverts live changes within seconds',
      'Flux Kustomization flux-system/calico-infra (on Installation/default): reconciles every 10m and corrects drift by server-side apply (spec.suspend not set)',
    ]);
    expect(owners.map((f: any) => f.severity)).toEqual(['warning', 'warning']);
    expect(owners.map((f: any) => f.fix).join('\n')).toContain(ARGO_SUSPEND);
    expect(owners.map((f: any) => f.fix).join('\n')).toContain(FLUX_SUSPEND);
  });

  it('plan says who reconciles; apply refuses with exit 5 and the suspend commands before its journal exists', async () => {
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const out = JSON.parse(p.stdout);
    expect(out.reconcilers.map((r: any) => `${r.kind} ${r.namespace}/${r.name} ${r.state}`).sort()).toEqual([
      'Application argocd/calico self-healing',
      'Kustomization flux-system/calico-infra self-healing',
    ]);
    expect(out.findings.filter((f: any) => f.id === 'gitops-owner')).toHaveLength(2);

    const a = await runCli(['apply', plan, '--yes']);
    expect(a.code, a.stderr + a.stdout).toBe(5);
    expect(a.stderr).toContain(ARGO_SUSPEND);
    expect(a.stderr).toContain(FLUX_SUSPEND);
    expect(a.stderr).toContain('--owner-suspended');
    expect(fs.existsSync(journalPathFor(bundle, out.id))).toBe(false);
  });

  it('--owner-suspended lets apply go on with a warning (it stops at the confirmation here)', async () => {
    const a = await runCli(['apply', plan, '--owner-suspended']);
    expect(a.code, a.stderr + a.stdout).toBe(5);
    expect(a.stderr).toContain(NOT_CONFIRMED);
    expect(a.stderr.match(/going ahead with --owner-suspended/g)).toHaveLength(2);
  });

  it('once each owner is suspended apply goes on; one left self-healing is still refused by name', async () => {
    await edit(client, KS, 'flux-system', 'calico-infra', (o) => (o.spec.suspend = true));
    const half = await runCli(['apply', plan]);
    expect(half.code).toBe(5);
    expect(half.stderr).toContain(ARGO_SUSPEND);
    expect(half.stderr).not.toContain(FLUX_SUSPEND);
    expect(half.stderr).not.toContain(NOT_CONFIRMED);

    await edit(client, APP, 'argocd', 'calico', (o) => delete o.spec.syncPolicy.automated);
    const a = await runCli(['apply', plan]);
    expect(a.code, a.stderr + a.stdout).toBe(5);
    expect(a.stderr).toContain(NOT_CONFIRMED);
    expect(a.stderr).not.toMatch(/suspend (it|them) first/);
  });

  it('a managed add-on: plan refuses with the provider procedure, export still works', async () => {
    await edit(client, K.deployment, 'tigera-operator', 'tigera-operator', (o) => {
      o.metadata.labels = { ...o.metadata.labels, 'addonmanager.kubernetes.io/mode': 'Reconcile', 'kubernetes.azure.com/managedby': 'aks' };
    });
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots']);
    expect(p.code, p.stderr + p.stdout).toBe(5);
    expect(p.stderr).toContain('managed by AKS');
    expect(p.stderr).toContain('az aks upgrade --kubernetes-version');
    const e = await runCli(['export', '--out', path.join(dir, 'managed-bundle')]);
    expect(e.code, e.stderr).toBe(0);
    const s = await runCli(['status']);
    expect(s.stdout).toContain('managed add-on (managed by AKS)');
  });
});
