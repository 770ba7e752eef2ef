/**
 * The Calico installs cni-rewind can export, back up, plan for and apply to: Calico's data in the crd.projectcalico.org
 * CRDs, read and written through the Kubernetes API. Two installs keep it elsewhere and are refused by name (exit 5)
 * by every command that would write a bundle or roll out manifests: 3.32's v3-CRD mode (v3-crds.ts) and, for the
 * apply of a Kubernetes-datastore plan, the etcd datastore (install-method.ts); export, backup, restore and plan handle
 * etcd themselves (`etcdHandled`). Commands that run detectCalico judge what it read (a CalicoInstall fits `install`),
 * so each object is read once.
 */
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { datastoreOfObjects, type CalicoObjects } from './calico-objects.js';
import { readDatastore, refuseEtcdDatastore, type DatastoreInfo } from './install-method.js';
import { v3CrdModeOf, v3CrdModeRefusal, type V3CrdMode } from './v3-crds.js';

/**
 * Throws a RefusedError when `install` keeps its data where cni-rewind does not look. `command` names the command
 * (`export`), `outcome` what did not happen (`nothing was exported`).
 */
export function refuseUnsupportedCalico(
  install: { v3CrdMode?: V3CrdMode; method: { datastore: DatastoreInfo } },
  command: string,
  outcome: string,
  /** export, backup and restore read and write the etcd datastore themselves (src/export/etcd-export.ts, src/restore/etcd-restore.ts). */
  opts: { etcdHandled?: boolean } = {},
): void {
  if (install.v3CrdMode) throw v3CrdModeRefusal(install.v3CrdMode, outcome);
  if (!opts.etcdHandled) refuseEtcdDatastore(install.method.datastore, command);
}

/**
 * The same refusal for restore, which does not run detectCalico: the CRD names and the datastore objects only, read
 * side by side.
 */
export async function assertSupportedCalico(
  client: KubeClient,
  command: string,
  outcome: string,
  opts: { etcdHandled?: boolean } = {},
): Promise<DatastoreInfo> {
  const [crds, datastore] = await Promise.all([client.listMetadata(K.crd), readDatastore(client)]);
  const v3CrdMode = v3CrdModeOf(crds.map((c) => c.metadata.name));
  refuseUnsupportedCalico({ ...(v3CrdMode ? { v3CrdMode } : {}), method: { datastore } }, command, outcome, opts);
  return datastore;
}

/** apply's refusal, judged from the objects its start-of-apply checks read once (calico-objects.ts), as assertSupportedCalico judges. */
export function refuseUnsupportedObjects(objs: CalicoObjects, command: string, outcome: string, opts: { etcdHandled?: boolean } = {}): void {
  const v3CrdMode = v3CrdModeOf(objs.crdNames);
  refuseUnsupportedCalico({ ...(v3CrdMode ? { v3CrdMode } : {}), method: { datastore: datastoreOfObjects(objs) } }, command, outcome, opts);
}
