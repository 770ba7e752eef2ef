/**
 * apply's wait-rollout step: the target version is running, judged by what the target itself did (its operator
 * Deployment, the workloads it renders, its TigeraStatus), never by state the old version left behind.
 */
import { OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import { TIGERA_STATUS } from '../calico/detect.js';
import { EnvironmentError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { applyManifestEdits } from '../plan/manifest-custom.js';
import type { ManifestTransform } from '../plan/types.js';
import { CALICO_POD_NAMESPACES, MANIFEST_POD_SELECTOR } from '../plan/rules.js';
import type { Plan } from '../plan/types.js';

/** The tigera operator's status manager recomputes its TigeraStatus every 5 s (pkg/controller/status/status.go). */
const STATUS_TICK_MS = 6_000;

export { TIGERA_STATUS };

/**
 * Does this calico-node DaemonSet run Calico `version` (e.g. v3.28.1)? Its calico-node container's image tag names
 * the version whatever registry or image path the Installation sets. An image pinned by digest (an ImageSet) names
 * no version: then the DaemonSet's generation having been observed is all that can be checked here.
 */
export function rendersVersion(ds: KubeObject, version: string): boolean {
  const containers: any[] = ds.spec?.template?.spec?.containers ?? [];
  const image: string = (containers.find((c) => c.name === 'calico-node') ?? containers[0])?.image ?? '';
  const [ref = '', digest] = image.split('@');
  const name = ref.slice(ref.lastIndexOf('/') + 1); // a registry's :port is not a tag
  const tag = name.includes(':') ? name.slice(name.indexOf(':') + 1) : undefined;
  if (tag) return tag === version;
  return !!digest && (ds.status?.observedGeneration ?? 0) >= (ds.metadata.generation ?? 0);
}

/**
 * What the wait checks: the operator Deployment has the target image, observed its generation and has all
 * replicas updated and available; the calico-node DaemonSet the operator renders (when the old version had one)
 * carries the target version; TigeraStatus `calico` is Available and neither Progressing nor Degraded; calico-node
 * finished its rollout; every pod in the Calico namespaces is Ready. On the test cluster without Calico's real
 * programs (a kwok-faked operator) no TigeraStatus or calico-node DaemonSet appears and those checks pass vacuously;
 * with the real operators (test/e2e/calico-*.test.ts) they are what the step waits for.
 */
export async function waitRollout(client: KubeClient, plan: Plan, target: Release, timeoutMs: number): Promise<string> {
  const checked: string[] = [];
  if (plan.current.installType === 'operator') {
    await client.waitFor(
      'the operator Deployment to roll out',
      async () => {
        const d = await client.get(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
        const want = d.spec?.replicas ?? 1;
        const image = d.spec?.template?.spec?.containers?.[0]?.image;
        const s = d.status ?? {};
        return image === plan.target.operatorImage &&
          (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
          (s.updatedReplicas ?? 0) >= want &&
          (s.availableReplicas ?? 0) >= want &&
          (s.replicas ?? 0) === want
          ? true
          : undefined;
      },
      { timeoutMs, intervalMs: 1000 },
    );
    checked.push(`operator ${plan.target.operatorImage} available`);
    // The operator renders calico-node. Until the target operator has rewritten the DaemonSet it shows the old
    // version's images fully rolled out, and TigeraStatus still says what the old operator last wrote: judged on
    // those alone the wait passed in 1 s, before the target operator had even started. So first the DaemonSet must
    // carry the target version, then roll out, and only then does TigeraStatus count.
    const node = await client.getOrUndefined(K.daemonSet, 'calico-system', 'calico-node');
    if (node) {
      const version = plan.target.version;
      await client.waitFor(
        `the target operator to render calico-node ${version}`,
        async () => {
          const d = await client.getOrUndefined(K.daemonSet, 'calico-system', 'calico-node');
          return d && rendersVersion(d, version) ? true : undefined;
        },
        { timeoutMs, intervalMs: 1000 },
      );
      checked.push(`calico-node rendered at ${version}`);
      // Rolled out to the target's pods, checked here from the DaemonSet itself ...
      await waitDaemonSetRolledOut(client, 'calico-system', 'calico-node', timeoutMs);
      checked.push('calico-node rolled out');
      // ... and reported by the target operator: resume-operator deleted the old TigeraStatus, so one that exists
      // was written by the target operator; its status manager recomputes every 5 s, so a report older than the
      // rollout is replaced within that time.
      const rolledOutAt = Date.now();
      await client.waitFor(
        'the target operator to report TigeraStatus calico Available (not Progressing, not Degraded)',
        async () => {
          const t = await client.getOrUndefined(TIGERA_STATUS, undefined, 'calico');
          const cond = (type: string) => t?.status?.conditions?.find((c: any) => c.type === type)?.status;
          const fresh = Date.now() - rolledOutAt >= STATUS_TICK_MS;
          return fresh && cond('Available') === 'True' && cond('Progressing') !== 'True' && cond('Degraded') !== 'True' ? true : undefined;
        },
        { timeoutMs, intervalMs: 1000 },
      );
      checked.push('TigeraStatus calico Available');
    } else checked.push('no calico-node DaemonSet (operator-rendered pods not checked)');
  }
  const namespaces = CALICO_POD_NAMESPACES[plan.current.installType === 'operator' ? 'operator' : 'manifest'];
  if (plan.current.installType === 'manifest') {
    // calico.yaml's workloads are ours to check: they must carry the target's images (a rollout status alone
    // also says "complete" for a DaemonSet nobody changed) and finish rolling out, kube-controllers included.
    for (const w of manifestWorkloads(target, plan.transforms.manifest)) {
      await waitWorkloadRollout(client, w, timeoutMs);
      checked.push(`${w.kind} ${w.name} ${w.images.join(', ')} rolled out`);
    }
  }
  let pods = 0;
  // kube-system holds more than Calico: for a manifest install only Calico's pods (by their k8s-app label) count.
  const labelSelector = plan.current.installType === 'manifest' ? MANIFEST_POD_SELECTOR : undefined;
  await client.waitFor(
    'the Calico pods to be Ready',
    async () => {
      pods = 0;
      for (const ns of namespaces) {
        for (const p of await client.listAll(K.pod, { namespace: ns, labelSelector })) {
          if (p.metadata.deletionTimestamp || p.status?.phase === 'Succeeded') continue;
          if (!p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')) return undefined;
          pods++;
        }
      }
      return true;
    },
    { timeoutMs, intervalMs: 1000 },
  );
  checked.push(`${pods} pods Ready in ${namespaces.join(', ')}`);
  return checked.join('; ');
}

interface ManifestWorkload {
  kind: 'DaemonSet' | 'Deployment';
  namespace: string;
  name: string;
  /** Every container image of the release's pod template, in order. */
  images: string[];
}

/** The DaemonSets and Deployments of the target calico.yaml (calico-node, calico-kube-controllers, ...). */
function manifestWorkloads(target: Release, edits: ManifestTransform | undefined): ManifestWorkload[] {
  return applyManifestEdits(target.calicoManifest ?? [], edits)
    .filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment')
    .map((o) => ({ kind: o.kind as ManifestWorkload['kind'], namespace: o.metadata.namespace ?? 'kube-system', name: o.metadata.name, images: podImages(o) }));
}

function podImages(o: KubeObject | undefined): string[] {
  const spec = o?.spec?.template?.spec ?? {};
  return [...(spec.initContainers ?? []), ...(spec.containers ?? [])].map((c: any) => c.image);
}

/** Wait until a DaemonSet/Deployment runs the given images everywhere: generation observed, every pod updated and available, no old pod left. */
async function waitWorkloadRollout(client: KubeClient, w: ManifestWorkload, timeoutMs: number): Promise<void> {
  const type = w.kind === 'DaemonSet' ? K.daemonSet : K.deployment;
  await client.waitFor(
    `${w.kind} ${w.namespace}/${w.name} to roll out ${w.images[w.images.length - 1]}`,
    async () => {
      const live = await client.getOrUndefined(type, w.namespace, w.name);
      if (!live) throw new EnvironmentError(`${w.kind} ${w.namespace}/${w.name} of calico.yaml is missing after the manifest was applied`);
      const images = podImages(live);
      if (images.join(' ') !== w.images.join(' '))
        throw new EnvironmentError(
          `${w.kind} ${w.namespace}/${w.name} runs ${images.join(', ')}, not the target's ${w.images.join(', ')}: something else changed it`,
        );
      const s = live.status ?? {};
      if ((s.observedGeneration ?? 0) < (live.metadata.generation ?? 0)) return undefined;
      if (w.kind === 'DaemonSet') {
        const want = s.desiredNumberScheduled ?? 0;
        return (s.updatedNumberScheduled ?? 0) === want && (s.numberAvailable ?? 0) === want && (s.currentNumberScheduled ?? 0) === want ? true : undefined;
      }
      const want = live.spec?.replicas ?? 1;
      return (s.updatedReplicas ?? 0) >= want && (s.availableReplicas ?? 0) >= want && (s.replicas ?? 0) === want ? true : undefined;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

/** A DaemonSet's rollout as `kubectl rollout status` judges it: generation observed, every pod updated and available. */
async function waitDaemonSetRolledOut(client: KubeClient, namespace: string, name: string, timeoutMs: number): Promise<void> {
  await client.waitFor(
    `the ${name} DaemonSet to roll out`,
    async () => {
      const d = await client.getOrUndefined(K.daemonSet, namespace, name);
      const s = d?.status ?? {};
      return d &&
        (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
        s.updatedNumberScheduled === s.desiredNumberScheduled &&
        s.numberAvailable === s.desiredNumberScheduled
        ? true
        : undefined;
    },
    { timeoutMs, intervalMs: 2000 },
  );
}
