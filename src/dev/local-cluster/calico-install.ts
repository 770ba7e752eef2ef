import { loadRelease } from '../../calico/release.js';
import type { KubeClient } from '../../kube/client.js';
import { applyManifests } from '../../kube/manifests.js';
import { createFakeNodes } from './nodes.js';

export type CalicoInstallMode = 'operator' | 'manifest';

/**
 * Install a shipped Calico release on the local cluster as a user would: `tigera-operator.yaml` (+ its
 * operator-crds.yaml) and `custom-resources.yaml` for an operator install, `calico.yaml` for a manifest
 * install; plus two kwok nodes for the rendered pods to land on. The Calico supervisor then runs the programs.
 */
export async function installCalicoRelease(client: KubeClient, version: string, mode: CalicoInstallMode, log: (l: string) => void = () => {}): Promise<void> {
  const release = await loadRelease(version, { offline: true, need: mode });
  await createFakeNodes(client, [{ name: 'local-node-1' }, { name: 'local-node-2' }]);
  const objs = mode === 'operator' ? [...release.crds, ...release.operatorObjects] : release.calicoManifest!;
  log(`installing Calico ${release.version} (${mode}): ${objs.length} objects`);
  await applyManifests(client, objs, { fieldManager: 'cni-rewind-local-cluster' });
  if (mode === 'operator' && release.customResources.length > 0) {
    await applyManifests(client, release.customResources, { fieldManager: 'cni-rewind-local-cluster' });
  }
}
