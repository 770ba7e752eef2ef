import type { KubeClient } from './client.js';
import { KubeApiError } from './client.js';
import type { KubeObject, ResourceType } from './types.js';

/**
 * Maps apiVersion + kind to a ResourceType through discovery, caching each group-version.
 * Call `forget()` after CRDs change (a group-version that was missing may now be served).
 */
export class ResourceResolver {
  private readonly cache = new Map<string, ResourceType[] | null>();
  private readonly inflight = new Map<string, Promise<ResourceType[] | null>>();
  /** `cacheMissing`: remember group-versions that are not served too (for callers that create no CRDs meanwhile). */
  constructor(
    private readonly client: KubeClient,
    private readonly opts: { cacheMissing?: boolean } = {},
  ) {}

  forget(apiVersion?: string): void {
    if (apiVersion) this.cache.delete(apiVersion);
    else this.cache.clear();
    this.inflight.clear();
  }

  async typesOf(apiVersion: string): Promise<ResourceType[] | null> {
    if (this.cache.has(apiVersion)) return this.cache.get(apiVersion)!;
    // Many objects of one kind are planned and written concurrently: one discovery request serves them all.
    let p = this.inflight.get(apiVersion);
    if (!p) {
      const q: Promise<ResourceType[] | null> = this.discover(apiVersion).finally(() => {
        if (this.inflight.get(apiVersion) === q) this.inflight.delete(apiVersion);
      });
      this.inflight.set(apiVersion, (p = q));
    }
    return p;
  }

  private async discover(apiVersion: string): Promise<ResourceType[] | null> {
    const [group, version] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    const path = group ? `/apis/${group}/${version}` : `/api/${version}`;
    try {
      const list: { resources: { name: string; kind: string; namespaced: boolean; verbs: string[] }[] } = await this.client.request('GET', path);
      const types = list.resources
        .filter((r) => !r.name.includes('/'))
        .map((r) => ({ group, version, plural: r.name, kind: r.kind, namespaced: r.namespaced, verbs: r.verbs }));
      this.cache.set(apiVersion, types);
      return types;
    } catch (err) {
      if (err instanceof KubeApiError && err.notFound) {
        // Not cached unless asked: a CRD being created right now may make it appear.
        if (this.opts.cacheMissing) this.cache.set(apiVersion, null);
        return null;
      }
      throw err;
    }
  }

  /** The ResourceType for an object, or undefined when the cluster does not serve its kind. */
  async resolve(apiVersion: string, kind: string): Promise<ResourceType | undefined> {
    const types = await this.typesOf(apiVersion);
    return types?.find((t) => t.kind === kind);
  }

  async forObject(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): Promise<ResourceType | undefined> {
    return this.resolve(obj.apiVersion, obj.kind);
  }
}
