/**
 * Waiting for and looking at Calico's real programs on the local cluster, shared by the demo and the e2e tests:
 * the operator the supervisor runs, the projectcalico.org/v3 APIService, and the real calicoctl.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { KubeClient } from '../../kube/client.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from './calico-programs.js';
import type { SupervisorStatus } from './calico-supervisor.js';
import type { CalicoEtcd } from './calico-etcd.js';
import type { LocalCluster } from './cluster.js';

/** The real calicoctl (kubernetes datastore) against `kubeconfig`; the one 3.28.1 build serves every Calico version unless `tree` names another. */
export async function runCalicoctl(kubeconfig: string, args: string[], input?: string, tree = CALICO_PROGRAMS_VERSION): Promise<string> {
  return calicoctlWith({ KUBECONFIG: kubeconfig, DATASTORE_TYPE: 'kubernetes' }, args, input, tree);
}

/**
 * The real calicoctl on the etcd datastore: against the cluster's Calico etcd (LocalCluster.calicoEtcd(), the
 * datastore of `up --datastore etcd`) with its client certificate, as calico-etcd.yaml's users configure it.
 */
export async function runCalicoctlEtcd(etcd: CalicoEtcd, args: string[], input?: string, tree = CALICO_PROGRAMS_VERSION): Promise<string> {
  return calicoctlWith(
    { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoint, ETCD_CA_CERT_FILE: etcd.caFile, ETCD_CERT_FILE: etcd.certFile, ETCD_KEY_FILE: etcd.keyFile },
    args,
    input,
    tree,
  );
}

async function calicoctlWith(datastore: Record<string, string>, args: string[], input: string | undefined, tree: string): Promise<string> {
  const dir = await ensureCalicoProgram('calico', tree);
  const bin = path.join(dir, 'calicoctl');
  const all = [...args, '--allow-version-mismatch'];
  return new Promise((resolve, reject) => {
    const child = execFile(bin, all, { env: { ...process.env, ...datastore }, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`calicoctl ${all.join(' ')} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A `calicoctl get ... -o wide` table as rows keyed by NAME (column header -> value). */
export function parseWideTable(text: string): Record<string, Record<string, string>> {
  const lines = text.trim().split('\n');
  const header = lines.shift()!.trim().split(/\s+/);
  const rows: Record<string, Record<string, string>> = {};
  for (const l of lines) {
    const cells = l.trim().split(/\s+/);
    const row = Object.fromEntries(header.map((h, i) => [h, cells[i] ?? '']));
    rows[row.NAME!] = row;
  }
  return rows;
}

/** Wait until the supervisor runs the operator binary of `tag` (it follows the tigera-operator Deployment). */
export async function waitOperator(cluster: LocalCluster, tag: string, timeoutMs = 300_000): Promise<SupervisorStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: SupervisorStatus | undefined;
  while (Date.now() < deadline) {
    last = cluster.calicoStatus();
    if (last?.operator?.tag === tag && last.operator.pid) return last;
    if (last?.operator?.error) throw new Error(`the supervisor cannot run operator ${tag}: ${last.operator.error}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`operator ${tag} not running after ${timeoutMs / 1000}s; supervisor status: ${JSON.stringify(last)}`);
}

/** Wait until the aggregation layer reports the projectcalico.org/v3 APIService Available. */
export async function waitApiServiceAvailable(client: KubeClient, timeoutMs: number): Promise<void> {
  let last = '';
  try {
    await client.waitFor(
      'APIService v3.projectcalico.org to be Available',
      async () => {
        const svc = await client.request<any>('GET', '/apis/apiregistration.k8s.io/v1/apiservices/v3.projectcalico.org').catch(() => undefined);
        const cond = svc?.status?.conditions?.find((c: any) => c.type === 'Available');
        last = cond ? `${cond.status} ${cond.reason ?? ''} ${cond.message ?? ''}` : 'no APIService';
        return cond?.status === 'True' ? true : undefined;
      },
      { timeoutMs, intervalMs: 500 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last: ${last}`, { cause: err });
  }
}
