/** Reads of the cluster the path matrix judges by (path-matrix-support.ts). */
import { policyTier } from '../../src/calico/policy-names.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoType } from './helpers.js';

/** Whether the Calico API server gives Profile kns.default the UID of Namespace default (Calico up to 3.27.4). */
export async function profileSharesNamespaceUid(client: KubeClient): Promise<boolean> {
  const ns = await client.get<KubeObject>(K.namespace, undefined, 'default');
  const profile = await client.request<KubeObject>('GET', '/apis/projectcalico.org/v3/profiles/kns.default');
  return profile.metadata.uid === ns.metadata.uid;
}

/** The stored (crd.projectcalico.org) names of the default-tier policies, `namespace/name` for namespaced ones. */
export async function storedPolicyNames(client: KubeClient): Promise<string[]> {
  const defaultTier = (o: KubeObject) => policyTier(o) === 'default';
  const gnps = await client.listAll<KubeObject>(calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy'));
  const nps = await client.listAll<KubeObject>(calicoType('networkpolicies', 'NetworkPolicy', true));
  return [...gnps.filter(defaultTier).map((o) => o.metadata.name!), ...nps.filter(defaultTier).map((o) => `${o.metadata.namespace}/${o.metadata.name}`)];
}

/**
 * Error lines of a settled operator that say nothing is wrong, each with its reason. Any other error line fails.
 * - An optimistic-concurrency conflict: the test's own touch of the Installation raced the operator's write of it;
 *   controller-runtime requeues and the next reconcile reads the new version.
 * - The operator's cached client lagging behind the Calico API server it replaced: its informers of
 *   projectcalico.org kinds re-list with backoff ("Failed to watch": the kind not served yet; 503 while the
 *   aggregated API server starts), and meanwhile a Get from the cache misses an object the operator made before,
 *   whose Create then answers AlreadyExists (v1.42 after 3.30.7 -> 3.32.1 in a fresh-clone run on 2 cores, over a
 *   minute; on a fresh `up --calico 3.32.1` too: TigeraStatus whisker Degraded with "calico-system.whisker already
 *   exists"). The objects exist; every TigeraStatus must still be Available and the policy readable below.
 */
const EXPLAINED = [
  /Operation cannot be fulfilled on .*: the object has been modified; please apply your changes to the latest version/,
  /projectcalico\.org "[^"]+" already exists/,
  /the server could not find the requested resource/,
  /the server is currently unable to handle the request/,
];
/** The operator's error lines (JSON log) counted by logger and message. */
export function errorMessages(log: string, fromMs = 0): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!line.includes('"level":"error"')) continue;
    try {
      const j = JSON.parse(line) as { logger?: string; msg?: string; ts?: string; error?: string };
      // ts has whole seconds: a line of the second the window opens counts as before it.
      if (fromMs && (!(Date.parse(j.ts ?? '') >= fromMs) || EXPLAINED.some((e) => e.test(j.error ?? '')))) continue;
      const k = `${j.logger ?? '-'}: ${j.msg ?? '?'}${fromMs ? `: ${(j.error ?? '').slice(0, 200)}` : ''}`;
      out.set(k, (out.get(k) ?? 0) + 1);
    } catch {
      out.set('(not JSON)', (out.get('(not JSON)') ?? 0) + 1);
    }
  }
  return out;
}
