/**
 * `wrap` around a tigera-operator installed by Helm. When the wrapped command made a new revision of the release
 * (`helm upgrade`, `helm rollback`, a script running them) and Calico then needs restoring, the release goes back
 * first, with `helm rollback` to the revision deployed before the command: resources restored under a release whose
 * newest revision says otherwise leave `helm history` naming a chart the cluster no longer runs, and the next
 * `helm upgrade` three-way-merges against objects Helm no longer describes. Helm's records themselves are Helm's:
 * read here by their labels and names only, never written (restore leaves them to Helm too, helm-records.ts).
 */
import { detectCalico } from '../calico/detect.js';
import { helmRecordName, HELM_OWNER_LABEL, HELM_OWNER_VALUE } from '../calico/helm-release.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { runHelm, type HelmTarget } from '../plan/helm-cli.js';
import { resolveHelmBinary } from '../plan/helm-strategy.js';
import { conflictArgs, helmKubeArgs, type HelmGiven } from './helm-steps.js';

/** The release as the command found it. */
export interface HelmBefore {
  release: string;
  namespace: string;
  storage: 'secret' | 'configmap';
  /** The revision deployed before the command; undefined when none was (nothing to go back to). */
  deployed?: number;
  /** The newest revision in Helm's history before the command. */
  newest: number;
}

interface Revision {
  revision: number;
  status?: string;
}

/** Helm's records of `release` in `namespace` (Secrets, else ConfigMaps), as revision and status. */
async function revisions(client: KubeClient, release: string, namespace: string): Promise<{ storage: HelmBefore['storage']; list: Revision[] }> {
  for (const [storage, type] of [
    ['secret', K.secret],
    ['configmap', K.configMap],
  ] as const) {
    const records = await client.listAll<KubeObject>(type, { namespace, labelSelector: `${HELM_OWNER_LABEL}=${HELM_OWNER_VALUE},name=${release}` });
    const list = records.flatMap((r) => {
      const named = helmRecordName(r.metadata.name ?? '');
      return named && named.release === release ? [{ revision: named.revision, status: r.metadata.labels?.status }] : [];
    });
    if (list.length) return { storage, list };
  }
  return { storage: 'secret', list: [] };
}

/** The Helm release of the tigera-operator before the command; undefined when it is not installed by Helm (RKE2's chart is its controller's). */
export async function helmBefore(client: KubeClient): Promise<HelmBefore | undefined> {
  const method = (await detectCalico(client)).method;
  if (method.method !== 'operator-helm' || !method.helm) return undefined;
  const { release, namespace } = method.helm;
  const { storage, list } = await revisions(client, release, namespace);
  if (!list.length) return undefined;
  const deployed = list.filter((r) => r.status === 'deployed').map((r) => r.revision);
  return { release, namespace, storage, deployed: deployed.length ? Math.max(...deployed) : undefined, newest: Math.max(...list.map((r) => r.revision)) };
}

/** What changed in the release since `before`: the newest revision now, when the command made one. */
export async function helmRevisionsAdded(client: KubeClient, before: HelmBefore): Promise<number | undefined> {
  const { list } = await revisions(client, before.release, before.namespace);
  const newest = Math.max(0, ...list.map((r) => r.revision));
  return newest > before.newest ? newest : undefined;
}

/** The command that takes the release back to the revision deployed before; undefined when none was. */
export function helmRollbackCommand(before: HelmBefore): string | undefined {
  return before.deployed === undefined ? undefined : `helm rollback ${before.release} ${before.deployed} -n ${before.namespace}`;
}

/** Runs that rollback with the helm of this command line (or PATH); throws one line when helm is missing or fails. */
export async function rollBackHelm(before: HelmBefore, given: HelmGiven): Promise<string> {
  if (before.deployed === undefined) throw new Error(`Helm release ${before.namespace}/${before.release} had no deployed revision to go back to`);
  const target: HelmTarget = { bin: resolveHelmBinary(given.helm, 'nothing was restored'), kubeArgs: helmKubeArgs(given), storage: before.storage };
  await runHelm(
    target,
    ['rollback', before.release, String(before.deployed), '-n', before.namespace, ...(await conflictArgs(target))],
    `helm rollback ${before.release}`,
  );
  return `Helm release ${before.namespace}/${before.release} rolled back to revision ${before.deployed}`;
}
