/**
 * The step rename-policies-back (src/apply/policy-rename.ts) against the real API server with the released 3.31.7
 * CRDs, in the cases a matrix path does not reach: a copy a stopped run left behind (kept, the original deleted), a
 * copy with other content (both kept, refused by name after every other policy was renamed), policies of another tier
 * or with a dotted name (left alone for 3.29-3.31, prefixed for 3.28), and a 3.32 kube-controllers still running
 * (refused before anything is written). path-matrix-d runs the step inside apply on the real programs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renamePoliciesBack } from '../../src/apply/policy-rename.js';
import { RefusedError } from '../../src/core/errors.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { applyFixture, calicoType, resetCalico, testClient } from './helpers.js';

const GNP = calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy');
const NP = calicoType('networkpolicies', 'NetworkPolicy', true);
const gnp = (name: string, selector = 'all()', tier?: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkPolicy',
  metadata: {
    name,
    labels: { team: 'net', ...(tier ? { 'projectcalico.org/tier': tier } : {}) },
    annotations: { 'projectcalico.org/metadata': JSON.stringify({ name }) },
  },
  spec: { selector, types: ['Egress'], ...(tier ? { tier } : {}) },
});
const np = (name: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace: 'default' },
  spec: { selector: 'all()', types: ['Ingress'] },
});

describe('rename-policies-back on the real API server (3.31.7 CRDs)', () => {
  let client: KubeClient;
  const names = async () => [
    ...(await client.listAll<KubeObject>(GNP)).map((o) => o.metadata.name!),
    ...(await client.listAll<KubeObject>(NP)).map((o) => `default/${o.metadata.name}`),
  ];
  const kubeControllers = (tag: string): KubeObject => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'calico-kube-controllers', namespace: 'calico-system' },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: 'kc' } },
      template: { metadata: { labels: { app: 'kc' } }, spec: { containers: [{ name: 'kc', image: `quay.io/calico/kube-controllers:${tag}` }] } },
    },
  });

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await applyFixture(client, '3.31.7', 'operator-crds.yaml');
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'calico-system' } });
  }, 300_000);
  afterAll(async () => {
    if (client) await resetCalico(client);
    client?.close();
  }, 300_000);

  it('waits for 3.32 kube-controllers to go, then renames, finishes a stopped run, refuses a differing copy and leaves other tiers alone', async () => {
    const deny = await client.create<KubeObject>(GNP, gnp('deny'));
    await client.create(GNP, gnp('clash'));
    await client.create(GNP, gnp('default.clash', 'app == "x"'));
    await client.create(GNP, gnp('calico-system.whisker', 'all()', 'calico-system'));
    await client.create(GNP, gnp('team.audit'));
    await client.create(NP, np('resume'));
    const leftCopy = await client.create<KubeObject>(NP, np('default.resume'));
    const before = await names();

    await client.create(K.deployment, kubeControllers('v3.32.1'));
    await expect(renamePoliciesBack(client, 'v3.31.7')).rejects.toThrow(/still runs .*v3\.32\.1.*--resume/);
    expect(await names()).toEqual(before);

    await client.replace(K.deployment, kubeControllers('v3.31.7'));
    const refused = await renamePoliciesBack(client, 'v3.31.7').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RefusedError);
    expect(String((refused as Error).message)).toMatch(
      /1 default-tier policy\(ies\) not renamed back \(2 renamed\): GlobalNetworkPolicy\/clash: default\.clash exists too/,
    );
    expect((await names()).sort()).toEqual(['calico-system.whisker', 'clash', 'default.clash', 'default.deny', 'team.audit', 'default/default.resume'].sort());
    const renamed = await client.get<KubeObject>(GNP, undefined, 'default.deny');
    expect({ labels: renamed.metadata.labels, annotations: renamed.metadata.annotations, spec: renamed.spec }).toEqual({
      labels: deny.metadata.labels,
      annotations: deny.metadata.annotations,
      spec: deny.spec,
    });
    expect((await client.get<KubeObject>(NP, 'default', 'default.resume')).metadata.uid).toBe(leftCopy.metadata.uid);

    // 3.28 and before prefix dotted default-tier names too (clientv3 convertPolicyNameForStorage); other tiers stay.
    await client.delete(GNP, undefined, 'default.clash');
    expect(await renamePoliciesBack(client, 'v3.28.5')).toMatch(/^2 default-tier policy\(ies\) renamed back/);
    expect((await names()).sort()).toEqual(['calico-system.whisker', 'default.clash', 'default.deny', 'default.team.audit', 'default/default.resume'].sort());
    expect(await renamePoliciesBack(client, 'v3.28.5')).toBe('no policy stored under 3.32 names');
  }, 120_000);
});
