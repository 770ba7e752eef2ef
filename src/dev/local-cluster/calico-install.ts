import { loadRelease } from '../../calico/release.js';
import type { KubeClient } from '../../kube/client.js';
import { applyManifests } from '../../kube/manifests.js';
import { ResourceResolver } from '../../kube/resolver.js';
import { createFakeNodes } from './nodes.js';

/** `helm`: the tigera-operator chart (calico-helm.ts); to the operator and `up`'s wait, an operator install. */
export type CalicoInstallMode = 'operator' | 'manifest' | 'helm';

/** The kwok nodes a Calico install gets for the rendered pods to land on. */
export const LOCAL_CALICO_NODES = [{ name: 'local-node-1' }, { name: 'local-node-2' }];

/**
 * Install a shipped Calico release on the local cluster as a user would: `tigera-operator.yaml` (+ its
 * operator-crds.yaml) and `custom-resources.yaml` for an operator install, `calico.yaml` for a manifest
 * install; plus two kwok nodes for the rendered pods to land on. The Calico supervisor then runs the programs.
 */
export async function installCalicoRelease(
  client: KubeClient,
  version: string,
  mode: Exclude<CalicoInstallMode, 'helm'>,
  log: (l: string) => void = () => {},
): Promise<void> {
  const release = await loadRelease(version, { offline: true, need: mode });
  await createFakeNodes(client, LOCAL_CALICO_NODES);
  const objs = mode === 'operator' ? [...release.crds, ...release.operatorObjects] : release.calicoManifest!;
  log(`installing Calico ${release.version} (${mode}): ${objs.length} objects`);
  await applyManifests(client, objs, { fieldManager: 'cni-rewind-local-cluster' });
  if (mode === 'operator' && release.customResources.length > 0) {
    // An Established CRD is served a moment later (the API server's discovery syncs on its own): the Installation
    // applied in between failed `up --calico 3.27.4` with "does not serve operator.tigera.io/v1 Installation".
    for (const o of release.customResources)
      await client.waitFor(`${o.apiVersion} ${o.kind} to be served`, async () => ((await new ResourceResolver(client).forObject(o)) ? true : undefined), {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
    await applyManifests(client, release.customResources, { fieldManager: 'cni-rewind-local-cluster' });
  }
}
