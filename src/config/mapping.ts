/**
 * The node mapping file (examples/node-mapping.yaml): which provider and machine back a node when its
 * spec.providerID does not say (libvirt, Proxmox, vSphere, bare metal) or says it wrongly.
 *
 *   defaults: { provider: libvirt, uri: qemu:///system }     # merged under every entry of the same provider
 *   nodes:
 *     worker-1: { provider: libvirt, domain: k8s-worker-1 }
 *     worker-2: { provider: proxmox, node: pve1, vmid: 102 }
 */
import { readInputText } from '../io/safe-file.js';
import yaml from 'js-yaml';
import { BadInputError, errorMessage } from '../core/errors.js';
import type { NodeMappingEntry } from '../provider-kit/types.js';

export interface NodeMapping {
  defaults?: NodeMappingEntry;
  nodes: Record<string, NodeMappingEntry>;
}

export const emptyMapping = (): NodeMapping => ({ nodes: {} });

/** Validate parsed YAML as a mapping; `source` names the file in errors. */
export function parseNodeMapping(doc: unknown, source: string): NodeMapping {
  if (doc === null || doc === undefined) return emptyMapping();
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new BadInputError(`${source}: a node mapping must be a YAML map with 'nodes' (and optional 'defaults')`);
  const d = doc as Record<string, unknown>;
  const known = new Set(['apiVersion', 'kind', 'defaults', 'nodes']);
  const unknown = Object.keys(d).filter((k) => !known.has(k));
  if (unknown.length) throw new BadInputError(`${source}: unknown top-level key(s) ${unknown.join(', ')} (expected defaults, nodes)`);
  const entry = (v: unknown, where: string): NodeMappingEntry => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new BadInputError(`${source}: ${where} must be a map of provider keys`);
    const e = v as NodeMappingEntry;
    if (e.provider !== undefined && (typeof e.provider !== 'string' || !e.provider))
      throw new BadInputError(`${source}: ${where}.provider must be a provider name`);
    return { ...e };
  };
  const out: NodeMapping = { nodes: {} };
  if (d.defaults !== undefined) out.defaults = entry(d.defaults, 'defaults');
  if (d.nodes !== undefined) {
    if (d.nodes === null || typeof d.nodes !== 'object' || Array.isArray(d.nodes)) throw new BadInputError(`${source}: 'nodes' must map node names to entries`);
    for (const [name, v] of Object.entries(d.nodes as Record<string, unknown>)) out.nodes[name] = entry(v, `nodes.${name}`);
  }
  return out;
}

export async function loadNodeMapping(path: string): Promise<NodeMapping> {
  // Not readFile: a FIFO named as the mapping file (a config's `mapping:` too) would hang the command.
  const text = readInputText(path, 'node mapping file');
  let doc: unknown;
  try {
    doc = yaml.load(text);
  } catch (err) {
    throw new BadInputError(`node mapping file ${path} is not valid YAML: ${errorMessage(err).split('\n')[0]}`);
  }
  return parseNodeMapping(doc, path);
}

/** The entry for a node with `defaults` merged under it (defaults apply when they name no provider or the same one). */
export function mappingEntryFor(mapping: NodeMapping, node: string, provider?: string): NodeMappingEntry | undefined {
  const own = mapping.nodes[node];
  const chosen = provider ?? own?.provider ?? mapping.defaults?.provider;
  const defaults = mapping.defaults && (!mapping.defaults.provider || mapping.defaults.provider === chosen) ? mapping.defaults : undefined;
  if (!own && !defaults) return undefined;
  return { ...(defaults ?? {}), ...(own ?? {}), ...(chosen ? { provider: chosen } : {}) };
}
