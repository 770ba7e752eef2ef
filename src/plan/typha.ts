/**
 * calico.yaml installs that run Typha. Calico ships two manifests for the Kubernetes datastore: calico.yaml (no
 * Typha) and calico-typha.yaml, the same plus the Deployment and Service `calico-typha` in kube-system, with
 * calico-config `typha_service_name: calico-typha` so every calico-node talks to Felix's fan-out proxy instead of the
 * API server (Calico's docs recommend it above 50 nodes). A plan whose target manifest has no Typha would move
 * calico-node to the target release and leave calico-typha at the current one: the user's typha_service_name is
 * carried into the target's calico-config (manifest-custom.ts), so the new calico-node keeps talking to the old Typha,
 * a version pair Calico upgrades together and never runs for long (Typha first, then calico-node). Refused by name,
 * with the target's calico-typha.yaml as the way out.
 */
import { RefusedError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';

/** Where calico-typha.yaml puts Typha (the operator runs its own in calico-system and upgrades it itself). */
export const MANIFEST_TYPHA = { namespace: 'kube-system', name: 'calico-typha' } as const;

const isTypha = (o: KubeObject) => o.kind === 'Deployment' && o.metadata.name === MANIFEST_TYPHA.name;

/**
 * Refuses a plan that would leave a running manifest Typha behind: `liveTypha` is the Deployment kube-system/calico-typha
 * (undefined: none), `targetManifest` the objects the plan rolls out (calico.yaml, or a --manifests copy of
 * calico-typha.yaml saved as calico.yaml).
 */
export function refuseTyphaLeftBehind(liveTypha: KubeObject | undefined, targetManifest: KubeObject[] | undefined, targetVersion: string): void {
  if (!liveTypha || (targetManifest ?? []).some(isTypha)) return;
  const image: string | undefined = liveTypha.spec?.template?.spec?.containers?.[0]?.image;
  throw new RefusedError(
    `this calico.yaml install runs Typha (Deployment ${MANIFEST_TYPHA.namespace}/${MANIFEST_TYPHA.name}${image ? `, ${image}` : ''}, from calico-typha.yaml) and the target ${targetVersion} manifest has none: the plan would move calico-node to ${targetVersion} and leave Typha behind, still serving it`,
    {
      hint: `save the target's calico-typha.yaml (https://raw.githubusercontent.com/projectcalico/calico/${targetVersion}/manifests/calico-typha.yaml) as calico.yaml in a folder and plan with --manifests <folder>`,
    },
  );
}

/** The manifest install's Typha Deployment, if it runs one. */
export async function liveManifestTypha(client: KubeClient): Promise<KubeObject | undefined> {
  return client.getOrUndefined(K.deployment, MANIFEST_TYPHA.namespace, MANIFEST_TYPHA.name);
}
