/**
 * deploy/ on the real control plane: the CronJob passes a server-side dry run; the RBAC of
 * deploy/rbac.yaml grants exactly what `backup` (which includes `export`) uses: every verb it grants is used by a
 * real run as the ServiceAccount, that run succeeds (so every verb it uses is granted), and `kubectl auth can-i
 * --as system:serviceaccount:...` agrees for each rule. The run goes through the in-cluster code path (token and CA
 * laid out as a Pod sees them) and through HTTPS_PROXY, where a recording proxy keeps the requests.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/connection.js';
import { packageRoot } from '../../src/core/package-root.js';
import { findKubectl } from '../../bench/lib.js';
import { EC2Client } from '@aws-sdk/client-ec2';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { apiForwarder, apiServerAccess, startConnectProxy } from '../support/kube-proxies.js';
import { runMotoInstances, startMoto, type Moto } from '../support/moto.js';
import { applyFixture, deleteNodes, kubeconfig, runCli, testClient } from './helpers.js';

const SA = 'system:serviceaccount:cni-rewind:cni-rewind';
const deployFile = (f: string) => path.join(packageRoot(), 'deploy', f);
const docs = (f: string) => yaml.loadAll(readFileSync(deployFile(f), 'utf8')) as any[];

interface Grant {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
}

/** The (verb, group, resource, namespace, name) of a logged request, as RBAC sees it. */
function grantOf(line: string): Grant | undefined {
  const [method, url] = line.split(' ');
  const p = url!.split('?')[0]!.split('/').filter(Boolean);
  if (p[0] !== 'api' && p[0] !== 'apis') return undefined; // /version and the like: non-resource URLs
  let rest = p[0] === 'api' ? p.slice(2) : p.slice(3);
  const group = p[0] === 'api' ? '' : p[1]!;
  if (rest.length === 0) return undefined; // discovery
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length > 2) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const verbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
  return { verb: verbs[method!] ?? (rest.length === 1 ? 'list' : 'get'), group, resource: rest[0]!, namespace, name: rest[1] };
}

function allows(rule: any, g: Grant): boolean {
  return (
    rule.verbs.includes(g.verb) &&
    rule.apiGroups.includes(g.group) &&
    (rule.resources.includes('*') || rule.resources.includes(g.resource)) &&
    (!rule.resourceNames || rule.resourceNames.includes(g.name))
  );
}

describe('deploy/: CronJob and least-privilege RBAC', () => {
  let client: KubeClient;
  const kubectl = findKubectl();
  const k = (args: string[]) =>
    promisify(execFile)(kubectl, ['--kubeconfig', kubeconfig(), ...args]).then(
      (r) => r,
      (e) => ({ stdout: String(e.stdout), stderr: String(e.stderr), code: e.code }),
    );

  beforeAll(async () => {
    client = await testClient();
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    // The operator (not running here) would create these namespaces.
    for (const ns of ['calico-system', 'calico-apiserver']) await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const applied = await k(['apply', '--server-side', '--field-manager', 'cni-rewind-e2e', '-f', deployFile('rbac.yaml')]);
    expect((applied as any).code ?? 0, (applied as any).stderr).toBe(0);
  }, 300_000);
  afterAll(() => client?.close());

  it('the CronJob manifest passes a server-side dry run', async () => {
    const r: any = await k(['apply', '--dry-run=server', '-f', deployFile('cronjob.yaml')]);
    expect(r.code ?? 0, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/cronjob\.batch\/cni-rewind-backup (created|configured|unchanged) \(server dry run\)/);
  });

  it('kubectl auth can-i agrees with every rule, and the service account can do nothing else asked here', async () => {
    for (const d of docs('rbac.yaml').filter((x) => x.kind === 'ClusterRole' || x.kind === 'Role')) {
      for (const rule of d.rules) {
        for (const verb of rule.verbs) {
          for (const res of rule.resources) {
            // kubectl resolves the resource through discovery: ask for a real kind of a wildcard group.
            const target = `${res === '*' ? ({ 'crd.projectcalico.org': 'ippools', 'operator.tigera.io': 'installations' } as Record<string, string>)[rule.apiGroups[0]] : res}${rule.apiGroups[0] ? `.${rule.apiGroups[0]}` : ''}${rule.resourceNames ? `/${rule.resourceNames[0]}` : ''}`;
            const r: any = await k(['auth', 'can-i', verb, target, ...(d.metadata.namespace ? ['-n', d.metadata.namespace] : []), '--as', SA]);
            expect(r.stdout.trim(), `${verb} ${target} in ${d.metadata.namespace ?? 'the cluster'}`).toBe('yes');
          }
        }
      }
    }
    for (const [verb, target, ns] of [
      ['delete', 'ippools.crd.projectcalico.org'],
      ['list', 'secrets', 'default'],
      ['get', 'configmaps/other', 'kube-system'],
      ['create', 'installations.operator.tigera.io'],
      ['list', 'pods'],
    ] as const) {
      const r: any = await k(['auth', 'can-i', verb, target, ...(ns ? ['-n', ns] : []), '--as', SA]);
      expect(r.stdout.trim(), `${verb} ${target}`).toBe('no');
    }
  });

  it('backup as the service account (in-cluster config) succeeds, and uses every verb the RBAC grants', async () => {
    // One node on an EC2 instance (moto): the AWS provider chooses its disks, so the backup also reads the
    // PersistentVolumes (the disk policy), the one rule a provider-less backup would not use.
    const moto: Moto = await startMoto();
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    const [instance] = await runMotoInstances(ec2, 1);
    ec2.destroy();
    await deleteNodes(client, 'cnr-deploy-');
    await createFakeNodes(client, [{ name: 'cnr-deploy-1', providerID: `aws:///us-east-1a/${instance}`, labels: { 'cnr-test': 'deploy' }, ipIndex: 71 }], {
      waitReady: false,
    });
    const tr = await client.request('POST', '/api/v1/namespaces/cni-rewind/serviceaccounts/cni-rewind/token', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    });
    const a = apiServerAccess(kubeconfig());
    const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-deploy-'));
    const sa = path.join(work, 'pod') + SERVICE_ACCOUNT_DIR;
    mkdirSync(sa, { recursive: true });
    writeFileSync(path.join(sa, 'token'), tr.status.token);
    writeFileSync(path.join(sa, 'ca.crt'), a.ca);
    writeFileSync(path.join(sa, 'namespace'), 'cni-rewind');
    const proxy = await startConnectProxy({ cert: a.servingCert, key: a.servingKey, handler: apiForwarder(a, { asCaller: true }) });
    try {
      const env = {
        KUBECONFIG: '',
        HOME: work,
        KUBERNETES_SERVICE_HOST: '127.0.0.1',
        KUBERNETES_SERVICE_PORT: a.server.port,
        CNI_REWIND_POD_ROOT: path.join(work, 'pod'),
        HTTPS_PROXY: proxy.url,
        NO_PROXY: '',
        ...moto.env,
      };
      const r = await runCli(['backup', '--selector', 'cnr-test=deploy', '--out', path.join(work, 'bundle'), '-o', 'json'], { env });
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out.complete && out.snapshots.length > 0, "the node's disks were snapshotted through moto").toBe(true);
      expect(proxy.requests).toBeGreaterThan(10);
      const used = proxy.log.map(grantOf).filter((g): g is Grant => !!g);
      const roles = docs('rbac.yaml').filter((x) => x.kind === 'ClusterRole' || x.kind === 'Role');
      // Every request was allowed by some rule of ours (else the run would have failed; this names the rule).
      for (const g of used)
        expect(
          roles.some((d) => (!d.metadata.namespace || d.metadata.namespace === g.namespace) && d.rules.some((rule: any) => allows(rule, g))),
          JSON.stringify(g),
        ).toBe(true);
      // Every verb of every rule was used at least once.
      for (const d of roles) {
        for (const rule of d.rules) {
          for (const verb of rule.verbs) {
            const hit = used.some(
              (g) => g.verb === verb && (!d.metadata.namespace || d.metadata.namespace === g.namespace) && allows({ ...rule, verbs: [verb] }, g),
            );
            expect(
              hit,
              `${d.kind} ${d.metadata.namespace ?? ''}/${d.metadata.name}: ${verb} ${rule.apiGroups[0] || 'core'}/${rule.resources.join(',')} ${rule.resourceNames ?? ''} is granted but never used`,
            ).toBe(true);
          }
        }
      }
    } finally {
      await proxy.close();
      await deleteNodes(client, 'cnr-deploy-');
      await moto.stop();
    }
  });
});
