/**
 * The catalogue of every message code the tool emits: its level and the type of its payload. The Reporter's
 * methods are typed by it, so a code that is not listed here, a code sent at another level, or a payload of the
 * wrong shape is a compile error. Hosts and scripts rely on these codes: docs/messages.md documents each one (a
 * unit test holds the two together). Payloads are written structurally here, not as imports of engine types, so
 * that this module stays at the bottom of the import graph.
 *
 * Third-party provider modules cannot add to this list: they use codes with the prefix `CNR_EXT_` (any level, any
 * payload), which no built-in code uses.
 */
export type Level = 'debug' | 'info' | 'warn' | 'error' | 'result';

/** `P` is the payload type; `never` = the message carries no payload. */
export interface MessageDef<L extends Level, P> {
  readonly level: L;
  /** Type-only: never set at run time. */
  readonly payload?: P;
}

const debug = <P = never>(): MessageDef<'debug', NoInfer<P>> => ({ level: 'debug' });
const info = <P = never>(): MessageDef<'info', NoInfer<P>> => ({ level: 'info' });
const warn = <P = never>(): MessageDef<'warn', NoInfer<P>> => ({ level: 'warn' });
const error = <P = never>(): MessageDef<'error', NoInfer<P>> => ({ level: 'error' });

type StepRef = { step: string; index: number };
type NodeRef = { node: string };
type DiskRef = { device: string; disk: string; reason: string };

export const MESSAGES = {
  // cluster access and files
  CNR_KUBE_RETRY: debug(),
  CNR_KEY_FILE_MODE: warn(),
  CNR_LIST_SKIP: debug(),
  CNR_VERIFY_NO_KEY: info(),
  CNR_DIFF_KIND_GONE: warn(),

  // export
  CNR_EXPORT_START: info(),
  CNR_EXPORT_DONE: info(),
  CNR_EXPORT_SKIPPED: warn(),
  CNR_EXPORT_V3_SKIPPED: info(),
  CNR_EXPORT_ETCD: info(),
  CNR_EXPORT_V3_KIND: warn(),
  CNR_EXPORT_NO_SECRETS: info(),

  // backup and snapshots
  CNR_PROVIDER_MODULE: info(),
  CNR_BACKUP_UNPROTECTED: warn<{ node: string; reason: string }>(),
  CNR_BACKUP_SNAPSHOTS: info<{ bundleId: string; clusterId: string }>(),
  CNR_BACKUP_INTERRUPTED: warn(),
  CNR_BACKUP_CLEANUP: info(),
  CNR_BACKUP_CLEANUP_FAILED: error(),
  CNR_BACKUP_DONE: info<{ path: string; complete: boolean }>(),
  CNR_BACKUP_DISK_SKIPPED: info<DiskRef>(),
  CNR_SNAPSHOT_STARTED: info<{ node: string; snapshots: string[] }>(),
  CNR_SNAPSHOT_FAILED: error<NodeRef>(),
  CNR_SNAPSHOTS_PROVIDER_FAILED: warn(),
  CNR_SNAPSHOTS_LISTED: debug(),
  CNR_SNAPSHOTS_DELETED: info(),
  CNR_PRUNE_SKIP: debug(),
  CNR_PRUNE_SNAPSHOTS: info(),
  CNR_PRUNE_FAILED: warn(),
  CNR_PRUNE_UPLOADS: warn(),
  CNR_PRUNE_UNVERIFIED: warn(),
  CNR_PRUNE_NOT_CONFIRMED: warn(),

  // plan and apply
  CNR_PLAN_CURRENT: info(),
  CNR_PLAN_TARGET: info(),
  CNR_PLAN_PROVIDER_UNUSED: warn(),
  CNR_PLAN_HELM_UNUSED: warn(),
  CNR_PLAN_CALICOCTL_UNUSED: warn(),
  CNR_APPLY_ALREADY_DONE: info(),
  CNR_APPLY_LOCK_TAKEN: warn(),
  CNR_APPLY_OWNER_SUSPENDED: warn(),
  CNR_APPLY_ROLLBACK: warn(),
  CNR_APPLY_MIGRATE_ROLLBACK: info(),
  CNR_APPLY_STOPPED: error<StepRef>(),
  CNR_APPLY_FINALIZERS: warn(),
  CNR_APPLY_RESTORE_DRIFT: warn(),
  CNR_STEP_SKIP: info<StepRef>(),
  CNR_STEP_START: info<StepRef & { rerun: boolean }>(),
  CNR_STEP_DONE: info<StepRef & { ms?: number }>(),
  CNR_STEP_FAILED: error<StepRef>(),

  // wrap
  CNR_WRAP_EXPORT_ONLY: warn(),
  CNR_WRAP_RUN: info(),
  CNR_WRAP_EXIT: info(),
  CNR_WRAP_UNHEALTHY: warn(),
  CNR_WRAP_RESTORE: warn(),
  CNR_WRAP_HELM_UNREAD: warn(),
  CNR_WRAP_HELM_ROLLBACK: warn(),
  CNR_WRAP_HELM_ROLLED_BACK: info(),

  // drain and rolling reboot
  CNR_DRAIN_START: info<{ node: string; pods: string[] }>(),
  CNR_DRAIN_BLOCKED: warn<{ node: string; pod: string }>(),
  CNR_DRAIN_PREFLIGHT: error(),
  CNR_REBOOT_NODE_SKIP: info<NodeRef>(),
  CNR_REBOOT_PODS_CAME_BACK: warn<NodeRef>(),
  CNR_REBOOT_NODE_ALREADY: info<NodeRef>(),
  CNR_REBOOT_NODE: info<{ node: string; provider: string; machine: string }>(),
  CNR_REBOOT_NODE_DONE: info<NodeRef>(),
  CNR_REBOOT_NO_BOOT_ID: warn<NodeRef>(),

  // restore --resources
  CNR_RESTORE_OTHER_CLUSTER: warn(),
  CNR_RESTORE_READ: info(),
  CNR_RESTORE_REFUSED_OBJECT: warn(),
  CNR_RESTORE_HELM_RECORDS: info<{ records: number }>(),
  CNR_RESTORE_POLICY_NAMES: info(),
  CNR_RESTORE_IPAM_LIVE: info(),
  CNR_RESTORE_IPAM_UNUSED: info<{ kind: string; count: number }>(),
  CNR_RESTORE_IPAM_UNJUDGED: warn<{ kind: string; count: number }>(),
  CNR_RESTORE_OWNER_DROPPED: warn(),
  CNR_RESTORE_OWNER_RELEASED: info<{ id: string }>(),
  CNR_RESTORE_OWNER_LINKED: info<{ id: string; uid?: string }>(),
  CNR_RESTORE_OWNER_LINK_FAILED: warn(),
  CNR_RESTORE_INTERRUPTED: warn(),
  CNR_RESTORE_CRDS: info(),
  CNR_RESTORE_PHASE: info<{ phase: string; count: number }>(),
  CNR_RESTORE_OBJECT: info<{ id: string; action: string }>(),
  CNR_RESTORE_OBJECT_FAILED: error<{ id: string; action: string }>(),
  CNR_RESTORE_DRIFT: warn(),
  CNR_RESTORE_OPERATOR_PAUSED: info<{ prior: number }>(),
  CNR_RESTORE_OPERATOR_RESUMED: info<{ replicas: number }>(),
  CNR_RESTORE_NO_DATASTORE_LOCK: warn(),
  CNR_RESTORE_ETCD_ALREADY_LOCKED: warn(),
  CNR_RESTORE_ETCD_DONE: info(),
  CNR_RESTORE_ETCD_DUPLICATE_IP: warn(),
  CNR_RESTORE_DATASTORE_LOCKED: info<{ prior: boolean | undefined }>(),
  CNR_RESTORE_DATASTORE_RELEASED: info<{ datastoreReady: boolean }>(),
  CNR_RESTORE_RELEASE_FAILED: error(),
  CNR_RESTORE_WAIT_DELETION: warn<{ deleting: string[]; awaitingCollection: string[] }>(),
  CNR_RESTORE_COLLECT_NAMESPACE: warn<{ namespace: string }>(),
  CNR_RESTORE_STALE_API_SERVICE: warn<{ apiService: string; namespace: string }>(),
  CNR_RESTORE_TEARDOWN_NEEDS: info<{ written: string[] }>(),
  CNR_RESTORE_OPERATOR_READY: info<{ checked: string[] }>(),
  CNR_RESTORE_OPERATOR_NOT_READY: error(),

  // restore --disks
  CNR_RESTORE_DISK_UNTOUCHED: info<DiskRef>(),
  CNR_RESTORE_DISKS_NODE: info<{ restored: { device: string; snapshotId: string; newDisk?: string }[] }>(),
  CNR_RESTORE_DISKS_FAILED: error(),

  // built-in providers
  CNR_AWS_RETRY: debug(),
  CNR_AWS_UNWANTED_SNAPSHOT: debug(),
  CNR_GCP_RETRY: debug(),
  CNR_LIBVIRT_LIMIT: warn<{ uri: string; version: string; domain: string }>(),
  CNR_LIBVIRT_SNAPSHOT: debug(),
  CNR_LIBVIRT_REVERT: info<{ uri: string; domain: string; snapshot: string }>(),
  CNR_LIBVIRT_DELETE: debug(),
  CNR_PROXMOX_INSECURE: warn(),
  CNR_PROXMOX_SNAPSHOT: debug(),
  CNR_PROXMOX_ROLLBACK: info(),
  CNR_PROXMOX_DELETE: debug(),
  CNR_VSPHERE_RELOGIN: debug(),
  CNR_VSPHERE_INSECURE: warn(),
  CNR_VSPHERE_SNAPSHOT: debug(),
  CNR_VSPHERE_REVERT: info(),
  CNR_VSPHERE_DELETE: debug(),
} as const satisfies Record<`CNR_${string}`, MessageDef<Level, unknown>>;

type Catalogue = typeof MESSAGES;
export type MessageCode = keyof Catalogue;

/** The prefix left to third-party provider modules, whose codes cannot be listed here. */
export const EXTERNAL_PREFIX = 'CNR_EXT_';
export type ExternalCode = `${typeof EXTERNAL_PREFIX}${string}`;

/** The catalogue's codes of one level, and the codes third parties may send at any level. */
export type CodeOf<L extends Level> = { [C in MessageCode]: Catalogue[C]['level'] extends L ? C : never }[MessageCode] | ExternalCode;

/** What a message with code `C` may carry as `data`. */
export type PayloadOf<C extends string> = C extends MessageCode ? Exclude<Catalogue[C]['payload'], undefined> : unknown;

export function isMessageCode(code: string): code is MessageCode {
  return Object.hasOwn(MESSAGES, code);
}
