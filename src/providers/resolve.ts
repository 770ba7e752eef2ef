/**
 * Node -> provider -> machine resolution for backup and restore.
 *
 * Which provider handles a node:
 *   1. `--provider NAME` (anything but `auto`) forces one provider for every node;
 *   2. otherwise the node's mapping-file entry `provider:` (overrides the providerID);
 *   3. otherwise the provider implied by spec.providerID (aws:///..., gce://...);
 *   4. otherwise the mapping file's `defaults.provider`.
 * The chosen provider's resolve(node, entry) then finds the machine. Nodes nothing resolves are returned as
 * `unresolved` with the reason, so the backup can list them and refuse to call itself complete.
 */
import type { NodeMapping } from '../config/mapping.js';
import { mappingEntryFor } from '../config/mapping.js';
import { errorMessage } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { parseProviderId } from '../provider-kit/provider-id.js';
import type { ProviderSet } from './registry.js';
import type { NodeInfo, NodeMappingEntry, NodeTarget } from '../provider-kit/types.js';
import { pool } from '../util/pool.js';

export interface UnresolvedNode {
  node: string;
  reason: string;
}

export interface NodeResolution {
  targets: NodeTarget[];
  unresolved: UnresolvedNode[];
}

export function nodeInfo(n: KubeObject): NodeInfo {
  return { name: n.metadata.name, providerID: n.spec?.providerID, labels: n.metadata.labels ?? {}, annotations: n.metadata.annotations ?? {} };
}

/** Which provider name should handle this node (undefined: none can). */
export function chooseProvider(node: NodeInfo, mapping: NodeMapping, forced?: string): { provider?: string; entry?: NodeMappingEntry; why: string } {
  if (forced && forced !== 'auto') return { provider: forced, entry: mappingEntryFor(mapping, node.name, forced), why: '--provider' };
  const own = mapping.nodes[node.name];
  if (own?.provider) return { provider: own.provider, entry: mappingEntryFor(mapping, node.name), why: 'mapping file' };
  const fromId = parseProviderId(node.providerID);
  if (fromId.provider !== 'unknown') return { provider: fromId.provider, entry: mappingEntryFor(mapping, node.name, fromId.provider), why: 'spec.providerID' };
  if (mapping.defaults?.provider) return { provider: mapping.defaults.provider, entry: mappingEntryFor(mapping, node.name), why: 'mapping defaults' };
  return {
    why: node.providerID
      ? `providerID ${node.providerID} names no known provider and the mapping file has no entry`
      : 'no spec.providerID and no mapping file entry',
  };
}

/** Resolve every node to a target through its provider; failures become `unresolved`, never exceptions per node. */
export async function resolveNodes(
  nodes: NodeInfo[],
  providers: ProviderSet,
  opts: { mapping: NodeMapping; provider?: string; concurrency?: number },
): Promise<NodeResolution> {
  const targets: (NodeTarget | undefined)[] = new Array(nodes.length);
  const unresolved: UnresolvedNode[] = [];
  await pool(nodes, Math.max(1, opts.concurrency ?? 8), async (node, i) => {
    const choice = chooseProvider(node, opts.mapping, opts.provider);
    if (!choice.provider) {
      unresolved.push({ node: node.name, reason: choice.why });
      return;
    }
    if (!providers.has(choice.provider)) {
      unresolved.push({
        node: node.name,
        reason: `provider '${choice.provider}' (from ${choice.why}) is not built in and was not given with --provider-module`,
      });
      return;
    }
    const provider = await providers.get(choice.provider);
    try {
      const t = await provider.resolve(node, choice.entry);
      if (t) targets[i] = t;
      else unresolved.push({ node: node.name, reason: `provider ${choice.provider} (from ${choice.why}) could not find its machine` });
    } catch (err) {
      unresolved.push({ node: node.name, reason: `provider ${choice.provider}: ${errorMessage(err)}` });
    }
  });
  unresolved.sort((a, b) => a.node.localeCompare(b.node));
  return { targets: targets.filter((t): t is NodeTarget => !!t), unresolved };
}
