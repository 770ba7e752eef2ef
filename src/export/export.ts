/**
 * Export: every Calico object, discovered from the live cluster, into a bundle. Discovery-driven (every CRD
 * of the Calico groups, so a kind a future Calico adds is exported too), paged and streamed to disk (memory
 * stays flat in the number of objects: one page in flight while the previous one is written).
 */
import path from 'node:path';
import { BundleWriter, isArchivePath, type PackedFileWriter } from '../bundle/writer.js';
import { configPathFor, crdPathFor, nodePathFor, packedResourcePath, packedV3Path, resourcePathFor, v3PathFor } from '../bundle/paths.js';
import type { BundleManifest, ResourceTypeEntry } from '../bundle/types.js';
import { detectCalico, type CalicoInstall } from '../calico/detect.js';
import { refuseUnsupportedCalico } from '../calico/supported.js';
import { CALICO_GROUPS, CALICO_V3_GROUP, EXPORT_CONFIG, SHARED_POLICY_GROUP, SHARED_POLICY_KINDS } from '../calico/knowledge.js';
import { errorMessage } from '../core/errors.js';
import { HelmRecordsLeftOut } from './helm-records.js';
import { exportEtcd } from './etcd-export.js';
import type { EtcdAccessFlags, OpenedCalicoEtcd } from '../calico/etcd-connection.js';
import { InterruptedError, whenAborted } from '../io/abort.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { clusterUid } from '../kube/cluster-uid.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType, discoverGroup, listCrds } from '../kube/discovery.js';
import { pool } from '../util/pool.js';
import { apiVersionOf, resourceKey, type KubeObject, type ResourceType } from '../kube/types.js';

export interface ExportOptions {
  excludeSecrets?: boolean;
  /** Objects per list request (default 500). */
  pageSize?: number;
  /** What detectCalico found when the command started, judged supported then (refuseUnsupportedCalico): not read again. */
  install?: CalicoInstall;
  /** Calico's etcd, when the flags name it instead of calico-config and calico-etcd-secrets. */
  etcd?: EtcdAccessFlags;
  /** Calico's etcd as the caller already opened it (backup, before its snapshots): not opened again. */
  etcdOpened?: OpenedCalicoEtcd;
}

/** Is this CRD one whose objects are Calico state? (Calico groups, plus the Calico-shipped shared policy kinds.) */
export function isCalicoCrd(crd: KubeObject): boolean {
  const g = crd.spec?.group;
  if ((CALICO_GROUPS as readonly string[]).includes(g)) return true;
  return g === SHARED_POLICY_GROUP && (SHARED_POLICY_KINDS as readonly string[]).includes(crd.spec?.names?.kind);
}

/** managedFields are large (often most of an object) and meaningless in another cluster or after a restore. */
function forBundle(obj: KubeObject): KubeObject {
  if (obj.metadata?.managedFields) delete obj.metadata.managedFields;
  return obj;
}

/** Fill `writer` with the cluster's Calico state. The caller commits or aborts the writer. */
export async function exportCalico(client: KubeClient, writer: BundleWriter, opts: ExportOptions, reporter: Reporter): Promise<void> {
  const m = writer.manifest;
  const pageSize = opts.pageSize ?? 500;
  const [uid, version, calico] = await Promise.all([clusterUid(client), client.serverVersion(), opts.install ?? detectCalico(client)]);
  // v3-CRD mode's data is not in the CRDs this exports: a bundle would look complete and hold none of it.
  refuseUnsupportedCalico(calico, 'export', 'nothing was exported', { etcdHandled: true });
  m.cluster = { uid, name: client.connection.clusterName, server: client.connection.server, kubernetesVersion: version.gitVersion };
  m.calico = {
    installType: calico.installType,
    ...(calico.version ? { version: calico.version } : {}),
    ...(calico.operatorImage ? { operatorImage: calico.operatorImage } : {}),
    ...(calico.calicoNodeImage ? { calicoNodeImage: calico.calicoNodeImage } : {}),
  };
  m.secretsExcluded = !!opts.excludeSecrets;
  reporter.info(
    'CNR_EXPORT_START',
    `exporting Calico state of cluster ${m.cluster.name} (${m.cluster.uid}), Calico ${calico.version ?? 'unknown version'} (${calico.installType} install)`,
  );

  if (calico.method.datastore.type === 'etcd') {
    // 1-2. Calico's data is in etcd: read there (no Calico CRDs and no API server on such an install).
    await exportEtcd(
      client,
      writer,
      { pageSize, ...(opts.etcd ? { access: opts.etcd } : {}), ...(opts.etcdOpened ? { opened: opts.etcdOpened } : {}) },
      reporter,
    );
  } else await exportFromApi(client, writer, pageSize, reporter);

  // 3. ConfigMaps/Secrets, the operator Deployment, calico-node DaemonSet.
  await exportConfig(client, writer, opts, reporter);

  // 4. Calico's node annotations.
  await exportNodeAnnotations(client, writer, pageSize);
  reporter.info('CNR_EXPORT_DONE', `exported ${Object.keys(m.files).length} files (${calicoObjectCount(m)} Calico objects)`);
}

/** Objects counted in the manifest, CRDs and Nodes aside. */
function calicoObjectCount(m: BundleManifest): number {
  if (!m.datastore) return m.resources.reduce((s, r) => s + r.count, 0);
  return Object.entries(m.counts)
    .filter(([k]) => k.endsWith('.projectcalico.org') || k.endsWith('.ipam.etcd'))
    .reduce((s, [, n]) => s + n, 0);
}

/** The Kubernetes datastore: the Calico CRDs and their objects, then the v3 view when the Calico API server serves it. */
async function exportFromApi(client: KubeClient, writer: BundleWriter, pageSize: number, reporter: Reporter): Promise<void> {
  const m = writer.manifest;
  // 1. The CRDs in force, then every object of each.
  const crds = (await listCrds(client)).filter(isCalicoCrd).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const crd of crds) await writer.writeObject(crdPathFor(crd), forBundle(crd));
  m.counts[resourceKey(K.crd)] = crds.length;
  if (crds.length === 0) m.notes.push('no Calico CRDs are installed: nothing but config was exported');
  const served = crds.filter((crd) => {
    if (crdResourceType(crd).version) return true;
    m.notes.push(`${crd.metadata.name}: CRD has no served version; its objects were not exported`);
    return false;
  });
  // Kinds in parallel: most are a single small list, so one large kind (IPAM handles) no longer waits behind the rest.
  await pool(served, KIND_CONCURRENCY, async (crd) => {
    const type = crdResourceType(crd);
    await exportType(
      client,
      writer,
      type,
      { object: resourcePathFor, packed: () => packedResourcePath(type.group, type.kind) },
      pageSize,
      reporter,
      m.resources,
    );
  });
  m.resources.sort((a, b) => a.key.localeCompare(b.key));

  // 2. The projectcalico.org/v3 view, when the Calico API server serves it.
  await exportV3(client, writer, pageSize, reporter);
}

async function exportNodeAnnotations(client: KubeClient, writer: BundleWriter, pageSize: number): Promise<void> {
  const m = writer.manifest;
  let nodes = 0;
  for await (const page of client.listPages(K.node, { limit: pageSize })) {
    await Promise.all(
      page.items.map((n) => {
        const annotations = Object.fromEntries(Object.entries(n.metadata.annotations ?? {}).filter(([k]) => k.startsWith(EXPORT_CONFIG.nodeAnnotationPrefix)));
        const rec: KubeObject = {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: n.metadata.name, annotations },
          ...(n.spec?.providerID ? { spec: { providerID: n.spec.providerID } } : {}),
        };
        nodes++;
        return writer.writeObject(nodePathFor(n.metadata.name), rec);
      }),
    );
  }
  m.counts[resourceKey(K.node)] = nodes;
}

/** Kinds exported at once (each one list request in flight at a time). */
const KIND_CONCURRENCY = 4;

/** Pages of a list with apiVersion/kind put back on each item (lists omit them); `more`: another page follows. */
async function* itemPages(client: KubeClient, type: ResourceType, limit: number): AsyncGenerator<{ items: KubeObject[]; more: boolean }> {
  const apiVersion = apiVersionOf(type);
  for await (const page of client.listPages(type, { limit })) {
    for (const o of page.items) {
      o.apiVersion ??= apiVersion;
      o.kind ??= type.kind;
    }
    yield { items: page.items, more: !!page.metadata?.continue };
  }
}

/** Where a kind's objects go: one file per object, or (a kind larger than one page) one packed file. */
interface KindPaths {
  object: (o: KubeObject) => string;
  packed: () => string;
}

/**
 * List one resource type page by page, writing each object as it arrives; records its count. A kind whose list
 * spans more than one page goes into one packed file (format 2): one open file and one checksum entry however
 * many objects it has, so neither the time per object nor the manifest grows with thousands of IPAM objects.
 */
async function exportType(
  client: KubeClient,
  writer: BundleWriter,
  type: ResourceType,
  paths: KindPaths,
  pageSize: number,
  reporter: Reporter,
  entries: ResourceTypeEntry[],
): Promise<number | undefined> {
  const key = resourceKey(type);
  const m = writer.manifest;
  let count = 0;
  const pages = itemPages(client, type, pageSize);
  let pack: PackedFileWriter | undefined;
  let next: Promise<IteratorResult<{ items: KubeObject[]; more: boolean }>> | undefined;
  try {
    // Ask for the next page while this one is written: the network and the disk overlap.
    next = pages.next();
    for (;;) {
      const r = await next;
      if (r.done) break;
      next = pages.next();
      if (!pack && count === 0 && r.value.more) pack = await writer.openPacked(paths.packed());
      if (pack) for (const o of r.value.items) await pack.write(forBundle(o));
      else await Promise.all(r.value.items.map((o) => writer.writeObject(paths.object(o), forBundle(o))));
      count += r.value.items.length;
      // Intermediate progress only for kinds that span pages (large IPAM tables); every kind gets a final line.
      if (count >= pageSize) reporter.progress({ id: key, label: `export ${key}`, current: count });
    }
    if (pack) await pack.close();
  } catch (err) {
    // Let the page in flight settle (never an unhandled rejection) and the generator end; a half-written packed
    // file goes with the aborted bundle.
    await next?.catch(() => undefined);
    await pages.return(undefined).catch(() => undefined);
    if (pack) await pack.close().catch(() => undefined);
    if (err instanceof KubeApiError && (err.statusCode === 404 || err.statusCode === 405)) {
      m.notes.push(`${key}: not served by the API server (${err.statusCode}); not exported`);
      reporter.warn('CNR_EXPORT_SKIPPED', `${key}: not served by the API server; not exported`);
      return undefined;
    }
    throw err;
  }
  reporter.progress({ id: key, label: `export ${key}`, current: count, done: true });
  entries.push({ key, group: type.group, version: type.version, kind: type.kind, plural: type.plural, namespaced: type.namespaced, count });
  m.counts[key] = count;
  return count;
}

async function exportV3(client: KubeClient, writer: BundleWriter, pageSize: number, reporter: Reporter): Promise<void> {
  const m = writer.manifest;
  let types: ResourceType[];
  try {
    types = await discoverGroup(client, CALICO_V3_GROUP);
  } catch (err) {
    m.notes.push(`${CALICO_V3_GROUP}/v3 view skipped: discovery failed (${errorMessage(err)})`);
    return;
  }
  if (types.length === 0) {
    m.notes.push(`${CALICO_V3_GROUP}/v3 view skipped: the Calico API server is not available`);
    reporter.info('CNR_EXPORT_V3_SKIPPED', `${CALICO_V3_GROUP}/v3 view skipped: the Calico API server is not available`);
    return;
  }
  const ignored: ResourceTypeEntry[] = [];
  for (const t of types.filter((t) => t.verbs?.includes('list') ?? true)) {
    try {
      const n = await exportType(client, writer, t, { object: v3PathFor, packed: () => packedV3Path(t.kind) }, pageSize, reporter, ignored);
      if (n !== undefined) m.counts[resourceKey(t)] = n;
    } catch (err) {
      // An aggregated API that is up but failing for one kind must not sink the whole export.
      m.notes.push(`${resourceKey(t)}: v3 view not exported (${errorMessage(err)})`);
      reporter.warn('CNR_EXPORT_V3_KIND', `${resourceKey(t)}: v3 view not exported (${errorMessage(err)})`);
    }
  }
}

async function exportConfig(client: KubeClient, writer: BundleWriter, opts: ExportOptions, reporter: Reporter): Promise<void> {
  const m = writer.manifest;
  const count = (t: ResourceType) => (m.counts[resourceKey(t)] = (m.counts[resourceKey(t)] ?? 0) + 1);
  m.counts[resourceKey(K.configMap)] = 0;
  if (!opts.excludeSecrets) m.counts[resourceKey(K.secret)] = 0;
  const helmRecords = new HelmRecordsLeftOut();
  for (const ns of EXPORT_CONFIG.namespaces) {
    for await (const cm of client.listItems(K.configMap, { namespace: ns })) {
      if ((EXPORT_CONFIG.skipConfigMaps as readonly string[]).includes(cm.metadata.name) || helmRecords.take(cm)) continue;
      await writer.writeObject(configPathFor(cm), forBundle(cm));
      count(K.configMap);
    }
    if (opts.excludeSecrets) continue;
    for await (const s of client.listItems(K.secret, { namespace: ns })) {
      if ((EXPORT_CONFIG.skipSecretTypes as readonly string[]).includes(s.type) || helmRecords.take(s)) continue;
      await writer.writeObject(configPathFor(s), forBundle(s), { secret: true });
      count(K.secret);
    }
  }
  m.notes.push(...helmRecords.notes());
  if (opts.excludeSecrets) {
    m.notes.push('Secrets were left out (--exclude-secrets)');
    reporter.info('CNR_EXPORT_NO_SECRETS', 'Secrets left out (--exclude-secrets)');
  }
  const byKind: Record<string, ResourceType> = { ConfigMap: K.configMap, Deployment: K.deployment, DaemonSet: K.daemonSet };
  for (const o of EXPORT_CONFIG.objects) {
    const t = byKind[o.kind]!;
    const obj = await client.getOrUndefined(t, o.namespace, o.name);
    if (!obj) continue;
    obj.apiVersion ??= apiVersionOf(t);
    obj.kind ??= t.kind;
    await writer.writeObject(configPathFor(obj), forBundle(obj));
    count(t);
  }
}

/** `<cluster-name>-<UTC timestamp>`, safe as a directory name. */
export function defaultBundleName(clusterName: string, now = new Date()): string {
  const ts = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const name = (clusterName || 'cluster').replace(/[^A-Za-z0-9._-]+/g, '-');
  return `${name}-${ts}`;
}

export const DEFAULT_BACKUP_DIR = 'cni-rewind-backups';

/** Export into a new bundle (default `./cni-rewind-backups/<cluster-name>-<UTC timestamp>/`), atomically. */
export async function exportBundle(
  client: KubeClient,
  opts: {
    out?: string;
    excludeSecrets?: boolean;
    pageSize?: number;
    encryptionKey?: Buffer;
    encryption?: BundleManifest['encryption'];
    /** Aborted = the bundle being written is removed and the export rejects with InterruptedError. */
    signal?: AbortSignal;
    etcd?: EtcdAccessFlags;
  },
  reporter: Reporter,
): Promise<{ path: string; manifest: BundleManifest }> {
  // v3-CRD mode would give a bundle without pools, IPAM or policies: refused before anything is written.
  const install = await detectCalico(client);
  refuseUnsupportedCalico(install, 'export', 'nothing was exported', { etcdHandled: true });
  const out = opts.out ?? path.join(DEFAULT_BACKUP_DIR, defaultBundleName(client.connection.clusterName));
  const writer = await BundleWriter.open(out, { secretsExcluded: opts.excludeSecrets, encryptionKey: opts.encryptionKey, encryption: opts.encryption });
  if (!opts.out) writer.manifest.id = path.basename(out);
  else if (isArchivePath(out)) writer.manifest.id = path.basename(out).replace(/\.(tar\.gz|tgz)$/i, '');
  // Aborted: the export removes its temporary directory and stops at once (InterruptedError); its caller ends the
  // process. (Even a SIGKILL leaves only a hidden directory without manifest.json, which no reader accepts.)
  let stopListening = () => undefined as void;
  const interrupted = new Promise<never>((_, reject) => {
    stopListening = whenAborted(opts.signal, (why) => void writer.abort().finally(() => reject(new InterruptedError(why))));
  });
  const work = exportCalico(client, writer, { ...opts, install }, reporter).then(() => writer.commit());
  work.catch(() => undefined); // once interrupted, what the export in flight does next no longer matters
  try {
    const final = await Promise.race([work, interrupted]);
    return { path: final, manifest: writer.manifest };
  } catch (err) {
    // Aborted: the export in flight fails on the writer being aborted under it; what counts is the interruption.
    if (opts.signal?.aborted) await interrupted;
    await writer.abort();
    throw err;
  } finally {
    stopListening();
  }
}
