/** Minimal shapes of Kubernetes objects as cni-rewind handles them (untyped beyond metadata). */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: unknown[];
  selfLink?: string;
  [key: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: any;
  status?: any;
  data?: Record<string, string>;
  [key: string]: any;
}

export interface KubeList<T = KubeObject> {
  apiVersion: string;
  kind: string;
  metadata: { continue?: string; resourceVersion?: string; remainingItemCount?: number };
  items: T[];
}

/** A resource type as discovery describes it. */
export interface ResourceType {
  group: string; // '' for core
  version: string;
  /** plural resource name, e.g. `ippools` */
  plural: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

/** `<plural>.<group>` (or just `<plural>` for the core group): the key used for counts in bundles. */
export function resourceKey(r: Pick<ResourceType, 'plural' | 'group'>): string {
  return r.group ? `${r.plural}.${r.group}` : r.plural;
}

export function apiVersionOf(r: Pick<ResourceType, 'group' | 'version'>): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

export function groupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/** REST path of a collection or an object. */
export function resourcePath(r: Pick<ResourceType, 'group' | 'version' | 'plural' | 'namespaced'>, namespace?: string, name?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const obj = name ? `/${encodeURIComponent(name)}` : '';
  return `${base}${ns}/${r.plural}${obj}`;
}

/** `Kind/namespace/name` (`Kind/name` for cluster-scoped objects): how plans and restores name an object to a user. */
export const objRef = (o: KubeObject): string => [o.kind, o.metadata.namespace, o.metadata.name].filter(Boolean).join('/');
