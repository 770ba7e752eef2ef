import yaml from 'js-yaml';
import { BadInputError } from '../core/errors.js';
import type { KubeClient } from './client.js';
import { K } from './builtin.js';
import { crdEstablished } from './discovery.js';
import { ResourceResolver } from './resolver.js';
import type { KubeObject } from './types.js';
import { pool } from '../util/pool.js';

/** Split a multi-document YAML text into objects, dropping empty documents and `List` wrappers. */
export function parseManifests(text: string, source = 'manifest'): KubeObject[] {
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text);
  } catch (err) {
    throw new BadInputError(`${source} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const out: KubeObject[] = [];
  for (const d of docs) {
    if (!d || typeof d !== 'object') continue;
    const o = d as KubeObject;
    if (o.kind?.endsWith('List') && Array.isArray(o.items)) {
      out.push(...(o.items as KubeObject[]));
      continue;
    }
    if (!o.apiVersion || !o.kind || !o.metadata?.name) {
      throw new BadInputError(`${source} has a document without apiVersion, kind or metadata.name`);
    }
    out.push(o);
  }
  return out;
}

export interface ApplyManifestsOptions {
  fieldManager?: string;
  force?: boolean;
  /** Wait for applied CRDs to be Established before applying the rest (default true). */
  waitForCrds?: boolean;
  onObject?: (obj: KubeObject, index: number, total: number) => void;
}

/**
 * Server-side apply a set of objects: CRDs first (waiting until Established), then namespaces, then the rest.
 * Server-side, because Calico's Installation CRD is larger than client-side apply's annotation limit.
 */
export async function applyManifests(client: KubeClient, objects: KubeObject[], opts: ApplyManifestsOptions = {}): Promise<void> {
  const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
  const namespaces = objects.filter((o) => o.kind === 'Namespace');
  const rest = objects.filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace');
  const total = objects.length;
  let i = 0;
  const applyOpts = { fieldManager: opts.fieldManager ?? 'cni-rewind', force: opts.force ?? true };
  await pool(crds, 4, async (crd) => {
    await client.apply(K.crd, crd, applyOpts);
    opts.onObject?.(crd, ++i, total);
  });
  if (opts.waitForCrds !== false)
    await waitCrdsEstablished(
      client,
      crds.map((c) => c.metadata.name),
    );
  const resolver = new ResourceResolver(client);
  for (const ns of namespaces) {
    await client.apply(K.namespace, ns, applyOpts);
    opts.onObject?.(ns, ++i, total);
  }
  for (const obj of rest) {
    const type = await resolver.forObject(obj);
    if (!type) throw new BadInputError(`the cluster does not serve ${obj.apiVersion} ${obj.kind} (object ${obj.metadata.name})`);
    await client.apply(type, obj, applyOpts);
    opts.onObject?.(obj, ++i, total);
  }
}

export async function waitCrdsEstablished(client: KubeClient, names: string[], timeoutMs = 60_000): Promise<void> {
  for (const name of names) {
    await client.waitFor(
      `CRD ${name} to be Established`,
      async () => (crdEstablished(await client.getOrUndefined(K.crd, undefined, name)) ? true : undefined),
      { timeoutMs, intervalMs: 200 },
    );
  }
}
