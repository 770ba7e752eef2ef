import { readShippedFile } from '../../calico/shipped.js';
import type { KubeClient } from '../../kube/client.js';
import { K } from '../../kube/builtin.js';
import { applyManifests, parseManifests } from '../../kube/manifests.js';
import { pool } from '../../util/pool.js';
import type { KubeObject, ResourceType } from '../../kube/types.js';
import { OPERATOR_MANAGED_LABEL, OPERATOR_MANAGED_VALUE } from '../../calico/knowledge.js';
import { CALICO_TYPES, createDemoPopulation } from './population.js';

/** Cluster-side actions of the demo (the parts a user would do with kubectl, or that the operator would do). */

function fixture(version: string, file: string): KubeObject[] {
  const got = readShippedFile(version, file);
  if (!got) throw new Error(`Calico ${version} ships no ${file}`);
  return parseManifests(got.text, got.path);
}

const INSTALLATION: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };

export async function installCalico(client: KubeClient, version: string, nodes: string[]): Promise<Record<string, number>> {
  await applyManifests(client, fixture(version, 'tigera-operator.yaml'), { fieldManager: 'kubectl' });
  await applyManifests(client, fixture(version, 'custom-resources.yaml'), { fieldManager: 'kubectl' });
  return createDemoPopulation(client, { calicoVersion: `v${version}`, nodes });
}

/**
 * The upgrade as users did it (server-side apply of the 3.28.1 manifests), then the effects operator v1.34
 * has on the pools, applied by the demo because the operator does not run on kwok: it writes `name` and
 * `allowedUses` into the Installation's pool entry, adopts the matching pool (label) and rewrites it from its
 * Installation entry, which has no `disabled` field (docs/calico-differences.md, "Operator-managed IP pools").
 */
export async function upgradeByHand(client: KubeClient): Promise<void> {
  await applyManifests(client, fixture('3.28.1', 'tigera-operator.yaml'), { fieldManager: 'kubectl' });
  await client.mergePatch(INSTALLATION, undefined, 'default', {
    spec: {
      calicoNetwork: {
        ipPools: [
          {
            name: 'default-ipv4-ippool',
            blockSize: 26,
            cidr: '192.168.0.0/16',
            encapsulation: 'VXLANCrossSubnet',
            natOutgoing: 'Enabled',
            nodeSelector: 'all()',
            allowedUses: ['Workload', 'Tunnel'],
          },
        ],
      },
    },
  });
  await client.mergePatch(CALICO_TYPES.ippool, undefined, 'default-ipv4-ippool', {
    metadata: { labels: { [OPERATOR_MANAGED_LABEL]: OPERATOR_MANAGED_VALUE } },
    spec: { disabled: false },
  });
  await client.mergePatch(CALICO_TYPES.clusterInfo, undefined, 'default', { spec: { calicoVersion: 'v3.28.1' } });
}

/** What `kubectl delete -f tigera-operator.yaml` does on 3.27/3.28: every Calico CRD, and all objects in them, gone. */
export async function deleteCalicoCrds(client: KubeClient): Promise<number> {
  const crds = (await client.listAll(K.crd)).filter((c) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(c.spec.group));
  await pool(crds, 8, async (c) => {
    await client.delete(K.crd, undefined, c.metadata.name);
  });
  await client.waitFor(
    'Calico CRDs to be gone',
    async () => ((await client.listAll(K.crd)).some((c) => c.spec.group === 'crd.projectcalico.org') ? undefined : true),
    { timeoutMs: 120_000 },
  );
  return crds.length;
}

export async function countPools(client: KubeClient): Promise<{ name: string; disabled: boolean }[]> {
  try {
    const pools = await client.listAll(CALICO_TYPES.ippool);
    return pools.map((p) => ({ name: p.metadata.name, disabled: !!p.spec?.disabled }));
  } catch {
    return [];
  }
}
