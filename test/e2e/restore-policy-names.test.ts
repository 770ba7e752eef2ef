/**
 * Restore across Calico 3.32's policy naming (src/restore/policy-naming.ts), with each release's real calicoctl
 * writing and reading the policies and 3.32.1's real kube-controllers (run by the supervisor for the
 * calico-kube-controllers Deployment) migrating them:
 * - a bundle taken on 3.32.1, restored after going back to 3.31.7: 3.31.7's calicoctl reads every policy by name;
 * - a bundle taken on 3.31.7, restored on 3.32.1 after a policy changed there: the bundle's content is what stays.
 *   The second case first shows, with the real migrator, what writing the bundle's `default.<name>` as it is does:
 *   the migrator keeps the live `<name>` and deletes the restored copy.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calicoProgramsFor } from '../../src/dev/local-cluster/calico-programs.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { until } from '../support/until.js';
import { calicoctl, withRealCalico } from './calico-support.js';
import { applyFixture, calicoType, explain, runCli } from './helpers.js';
import { exportTo } from './restore-support.js';

const GNP = calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy');
const NP = calicoType('networkpolicies', 'NetworkPolicy', true);
const CLUSTER_INFO = calicoType('clusterinformations', 'ClusterInformation');
const OLD = 'v3.31.7';
const NEW = 'v3.32.1';
const tree = (release: string) => calicoProgramsFor(release)!;

const deny = (selector: string) => `apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: deny
spec:
  selector: '${selector}'
  types: [Egress]
  egress: [{action: Deny}]
`;
const ALLOW_DNS = `apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: allow-dns, namespace: web}
spec: {selector: all(), types: [Egress], egress: [{action: Allow, protocol: UDP, destination: {ports: [53]}}]}
`;

describe('restore writes default-tier policies under the names the live release stores them by (3.32 naming)', () => {
  const real = withRealCalico('rpn', { operators: [], calico: [OLD, NEW] });
  let work: string;
  const client = () => real.client();
  const stored = async () => [
    ...(await client().listAll<KubeObject>(GNP)).map((o) => o.metadata.name!),
    ...(await client().listAll<KubeObject>(NP)).map((o) => `${o.metadata.namespace}/${o.metadata.name}`),
  ];
  const selectorOf = async (name: string) => (await client().getOrUndefined<KubeObject>(GNP, undefined, name))?.spec?.selector;

  /** The cluster as release `release` runs it: its CRDs, ClusterInformation and calico-kube-controllers. */
  async function runRelease(release: string): Promise<void> {
    await applyFixture(client(), release.slice(1), 'operator-crds.yaml');
    const info = await client().getOrUndefined<KubeObject>(CLUSTER_INFO, undefined, 'default');
    const spec = { calicoVersion: release, clusterType: 'k8s', datastoreReady: true };
    if (info) await client().replace(CLUSTER_INFO, { ...info, spec: { ...info.spec, ...spec } });
    else await client().create(CLUSTER_INFO, { apiVersion: 'crd.projectcalico.org/v1', kind: 'ClusterInformation', metadata: { name: 'default' }, spec });
    await client().apply(K.deployment, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'calico-kube-controllers', namespace: 'calico-system' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { 'k8s-app': 'calico-kube-controllers' } },
        template: {
          metadata: { labels: { 'k8s-app': 'calico-kube-controllers' } },
          spec: { containers: [{ name: 'calico-kube-controllers', image: `quay.io/calico/kube-controllers:${release}` }] },
        },
      },
    });
  }

  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'cnr-rpn-'));
    for (const name of ['calico-system', 'web']) await client().create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    // 3.32's migrator waits for the calico-node DaemonSet of its namespace to be rolled out: one on no node is.
    await client().create(K.daemonSet, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'calico-node', namespace: 'calico-system' },
      spec: {
        selector: { matchLabels: { 'k8s-app': 'calico-node' } },
        template: {
          metadata: { labels: { 'k8s-app': 'calico-node' } },
          spec: { nodeSelector: { 'cni-rewind.test/no-such-node': 'true' }, containers: [{ name: 'calico-node', image: `quay.io/calico/node:${NEW}` }] },
        },
      },
    });
  }, 300_000);

  // calico-system goes with the real-Calico clean-up; the policies' namespace is this file's.
  afterAll(async () => {
    await client()
      .delete(K.namespace, undefined, 'web')
      .catch(() => undefined);
  });

  it('a 3.32.1 bundle restored on 3.31.7: every policy is stored as 3.31.7 reads it, and its calicoctl reads each by name', async () => {
    await runRelease(NEW);
    await calicoctl(['apply', '-f', '-'], deny('app == "a"'), tree(NEW));
    await calicoctl(['apply', '-f', '-'], ALLOW_DNS, tree(NEW));
    expect((await stored()).sort()).toEqual(['deny', 'web/allow-dns']);
    const bundle = await exportTo(work, 'on-3.32.1');

    // Back to 3.31.7, and the policies lost.
    await runRelease(OLD);
    await client().delete(GNP, undefined, 'deny');
    await client().delete(NP, 'web', 'allow-dns');

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 600_000 });
    expect(r.code, explain(r)).toBe(0);
    expect(r.stderr).toContain(`2 default-tier policy(ies) written under the names Calico ${OLD} stores them by (the bundle is of ${NEW})`);
    expect((await stored()).sort()).toEqual(['default.deny', 'web/default.allow-dns']);
    expect(await calicoctl(['get', 'globalnetworkpolicy', 'deny', '-o', 'yaml'], undefined, tree(OLD))).toContain('app == "a"');
    expect(await calicoctl(['get', 'networkpolicy', 'allow-dns', '-n', 'web', '-o', 'yaml'], undefined, tree(OLD))).toContain('allow-dns');
    await client().delete(GNP, undefined, 'default.deny');
    await client().delete(NP, 'web', 'default.allow-dns');
  }, 600_000);

  it('a 3.31.7 bundle restored on 3.32.1 after a change there: the bundle’s content stays, where written as it is the migrator drops it', async () => {
    await runRelease(OLD);
    await calicoctl(['apply', '-f', '-'], deny('app == "a"'), tree(OLD));
    expect(await stored()).toEqual(['default.deny']);
    const bundle = await exportTo(work, 'on-3.31.7');

    // Up to 3.32.1: its real kube-controllers migrates the policy to its v3 name; then the change to undo.
    await runRelease(NEW);
    const state = async () => `stored: ${(await stored()).join(', ')}`;
    await until('3.32.1’s migrator to rename default.deny', async () => (await stored()).join() === 'deny', { timeoutMs: 180_000, intervalMs: 500, state });
    await calicoctl(['apply', '-f', '-'], deny('app == "b"'), tree(NEW));
    expect(await selectorOf('deny')).toBe('app == "b"');

    // Upstream behaviour, shown with the real migrator: the bundle's object written under its own name is dropped.
    const asInBundle = (await client().get<KubeObject>(GNP, undefined, 'deny')).metadata;
    await client().create(GNP, {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'GlobalNetworkPolicy',
      metadata: { name: 'default.deny', annotations: asInBundle.annotations ?? {}, labels: asInBundle.labels ?? {} },
      spec: { selector: 'app == "a"', types: ['Egress'], egress: [{ action: 'Deny' }] },
    });
    await until('the migrator to delete default.deny', async () => (await stored()).join() === 'deny', { timeoutMs: 120_000, intervalMs: 500, state });
    expect(await selectorOf('deny')).toBe('app == "b"');

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 600_000 });
    expect(r.code, explain(r)).toBe(0);
    expect(r.stderr).toContain(
      `1 default-tier policy(ies) written under the names Calico ${NEW} stores them by (the bundle is of ${OLD}): GlobalNetworkPolicy/default.deny -> deny`,
    );
    expect(await selectorOf('deny')).toBe('app == "a"');
    // The migrator has nothing to rename: given time, it is still so.
    await new Promise((res) => setTimeout(res, 15_000));
    expect(await stored()).toEqual(['deny']);
    expect(await calicoctl(['get', 'globalnetworkpolicy', 'deny', '-o', 'yaml'], undefined, tree(NEW))).toContain('app == "a"');
  }, 600_000);
});
