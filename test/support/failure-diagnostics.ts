/**
 * What a failed end-to-end test's message carries besides its assertion: the state that holds a wait up, read when
 * the test fails. A timeout alone ("timed out waiting for X") said nothing about why, and the cluster of a parallel
 * slot is reset before anyone can look at it, so the failure message is the only record. Nothing here throws: a
 * diagnostic that cannot be read says so in its line.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';

const LOG_LINES = 8;
const LINE_CHARS = 240;

/** The end of every log in the cluster's run directory written since `sinceMs`, newest first. */
export function recentLogTails(runDir: string, sinceMs: number, lines = LOG_LINES): string[] {
  let names: string[];
  try {
    names = readdirSync(runDir).filter((n) => n.endsWith('.log'));
  } catch {
    return [];
  }
  const written = names
    .map((n) => ({ n, mtime: statSync(path.join(runDir, n), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .filter((f) => f.mtime >= sinceMs)
    .sort((a, b) => b.mtime - a.mtime);
  const out: string[] = [];
  for (const { n } of written) {
    const text = readFileSync(path.join(runDir, n), 'utf8').trimEnd();
    if (!text) continue;
    out.push(
      `${n} (end):`,
      ...text
        .split('\n')
        .slice(-lines)
        .map((l) => `  ${l.length > LINE_CHARS ? `${l.slice(0, LINE_CHARS)}...` : l}`),
    );
  }
  return out;
}

/** Objects whose state most often holds a wait up: namespaces that do not finish terminating, aggregated APIs that
 * are not Available (both stall namespace deletion and discovery), and the operator's view in TigeraStatus. */
async function clusterObjectState(kubeconfig: string): Promise<string[]> {
  const client = await KubeClient.connect({ kubeconfig });
  const lines: string[] = [];
  try {
    const namespaces = await client.request<any>('GET', '/api/v1/namespaces');
    for (const ns of namespaces.items ?? []) {
      if (ns.status?.phase !== 'Terminating') continue;
      const holding = (ns.status?.conditions ?? []).filter((c: any) => c.status === 'True').map((c: any) => `${c.type}: ${c.message}`);
      lines.push(`namespace ${ns.metadata.name} Terminating since ${ns.metadata.deletionTimestamp}; ${holding.join('; ') || 'no condition'}`);
    }
    const services = await client.request<any>('GET', '/apis/apiregistration.k8s.io/v1/apiservices');
    for (const s of services.items ?? []) {
      const available = (s.status?.conditions ?? []).find((c: any) => c.type === 'Available');
      if (available?.status !== 'True') lines.push(`APIService ${s.metadata.name} not Available: ${available?.message ?? 'no condition'}`);
    }
    const statuses = await client.request<any>('GET', '/apis/operator.tigera.io/v1/tigerastatuses').catch(() => undefined);
    for (const t of statuses?.items ?? []) {
      const conds = (t.status?.conditions ?? []).filter((c: any) => c.status === 'True').map((c: any) => `${c.type}${c.message ? ` (${c.message})` : ''}`);
      lines.push(`TigeraStatus ${t.metadata.name}: ${conds.join(', ') || 'no condition true'}`);
    }
  } finally {
    client.close();
  }
  return lines;
}

/** Everything above for one slot's cluster, as the text appended to a failed test's message. */
export async function clusterDiagnostics(cluster: LocalCluster, kubeconfig: string, sinceMs: number): Promise<string> {
  const lines = [`--- cluster ${cluster.name} when the test failed ---`];
  const calico = cluster.calicoStatus();
  lines.push(
    calico
      ? `Calico supervisor: ${JSON.stringify({ operator: calico.operator, apiserver: calico.apiserver, kubeControllers: calico.kubeControllers })}`
      : 'Calico supervisor: not running',
  );
  try {
    lines.push(...(await clusterObjectState(kubeconfig)));
  } catch (e) {
    lines.push(`cluster objects unreadable: ${(e as Error).message}`);
  }
  lines.push(...recentLogTails(path.join(cluster.dir, 'run'), sinceMs));
  return lines.join('\n');
}
