/**
 * How a tigera operator decides that an existing IP pool without its managed-by label is its own: it converts the
 * crd.projectcalico.org IPPool to its Installation pool type and compares that with each Installation entry, after
 * filling the entry's defaults, with Go's reflect.DeepEqual (pkg/controller/ippool/pool_controller.go Reconcile,
 * `FromProjectCalicoV1` in api/v1/installation_types.go, `fillDefaults` in pkg/controller/ippool/defaults.go).
 * Read in tigera/operator v1.34.3, v1.36.16, v1.38.13, v1.40.15 and v1.42.3 (v1.42 moved the conversion to
 * pool_controller.go `FromProjectCalico`, same rules). Exact equality has consequences an approximate one misses:
 * - a pool without encapsulation (ipipMode and vxlanMode Never) converts to encapsulation "", which no entry has
 *   once defaulted (IPIP or None), so such a pool is never adopted by equality;
 * - `natOutgoing: false` converts to "" on v1.34 (never equal to an entry's defaulted "Disabled"), to "Disabled" from v1.36;
 * - `allowedUses` is compared in order (the entry's default is [Workload, Tunnel]);
 * - `disableNewAllocations` (from the pool's `disabled`) exists from v1.36, `assignmentMode` from v1.38: an older
 *   operator decodes the Installation without them, so they take no part in its comparison.
 */
import { compareVersions } from './knowledge.js';

export interface PoolConversionRow {
  /** Calico minor (`v3.N`) whose operator this row describes; a version uses the last row not newer than it. */
  since: string;
  operator: string;
  /** What `natOutgoing: false` converts to. */
  natOutgoingFalse: '' | 'Disabled';
  /** The operator's pool type has `disableNewAllocations` (the pool's `disabled`), defaulted to false on entries. */
  disableNewAllocations: boolean;
  /** The operator's pool type has `assignmentMode`, defaulted to Automatic on entries. */
  assignmentMode: boolean;
}

export const POOL_CONVERSION: PoolConversionRow[] = [
  { since: 'v3.28', operator: 'v1.34', natOutgoingFalse: '', disableNewAllocations: false, assignmentMode: false },
  { since: 'v3.29', operator: 'v1.36', natOutgoingFalse: 'Disabled', disableNewAllocations: true, assignmentMode: false },
  { since: 'v3.30', operator: 'v1.38+', natOutgoingFalse: 'Disabled', disableNewAllocations: true, assignmentMode: true },
];

export function poolConversion(calicoVersion: string): PoolConversionRow {
  let row = POOL_CONVERSION[0]!;
  for (const r of POOL_CONVERSION) if (compareVersions(calicoVersion, `${r.since}.0`) >= 0) row = r;
  return row;
}

/** The operator's Installation pool type, as plain JSON (a Go zero value is left out, as Go's omitempty does). */
export type OperatorPool = Record<string, unknown>;

const ENCAPSULATION_OF_IPIP: Record<string, string> = { Always: 'IPIP', CrossSubnet: 'IPIPCrossSubnet' };
const ENCAPSULATION_OF_VXLAN: Record<string, string> = { Always: 'VXLAN', CrossSubnet: 'VXLANCrossSubnet' };

/** `FromProjectCalicoV1`: a crd.projectcalico.org IPPool as the operator's pool type. */
export function poolAsOperatorEntry(pool: { metadata: { name: string }; spec?: any }, row: PoolConversionRow): OperatorPool {
  const s = pool.spec ?? {};
  const out: OperatorPool = {
    name: pool.metadata.name,
    cidr: s.cidr,
    // VXLAN is read after IPIP and wins, as in the Go switch order.
    encapsulation: ENCAPSULATION_OF_VXLAN[s.vxlanMode] ?? ENCAPSULATION_OF_IPIP[s.ipipMode] ?? '',
    natOutgoing: s.natOutgoing === true ? 'Enabled' : row.natOutgoingFalse,
    blockSize: Number(s.blockSize ?? 0),
    nodeSelector: s.nodeSelector ?? '',
    disableBGPExport: s.disableBGPExport === true,
    allowedUses: Array.isArray(s.allowedUses) ? [...s.allowedUses] : [],
  };
  if (row.disableNewAllocations) out.disableNewAllocations = s.disabled === true;
  if (row.assignmentMode) out.assignmentMode = s.assignmentMode ?? '';
  return out;
}

export interface EntryContext {
  /** Installation spec.cni.type (the operator waits for it before it compares; Calico unless a provider set another). */
  cniType?: string;
  /** The name of the existing pool with the entry's CIDR, which an entry without a name takes. */
  poolNameForCidr?: string;
}

/**
 * `fillDefaults` for one Installation entry, restricted to the fields of the operator's pool type (an older operator
 * decodes the Installation into a type without the newer fields). `disableBGPExport` defaults to false through the
 * Installation CRD's schema (`+kubebuilder:default:=false`), i.e. in every stored Installation. An entry without a
 * name takes the existing pool's; the other naming rules only matter for a pool that does not exist yet.
 */
export function entryAsDefaulted(entry: Record<string, any>, row: PoolConversionRow, ctx: EntryContext = {}): OperatorPool {
  const v6 = String(entry.cidr ?? '').includes(':');
  const uses: unknown[] = Array.isArray(entry.allowedUses) && entry.allowedUses.length ? [...entry.allowedUses] : ['Workload', 'Tunnel'];
  const out: OperatorPool = {
    name: entry.name || ctx.poolNameForCidr || '',
    cidr: entry.cidr,
    encapsulation: entry.encapsulation || (v6 || (ctx.cniType ?? 'Calico') !== 'Calico' ? 'None' : 'IPIP'),
    natOutgoing: entry.natOutgoing || (v6 ? 'Disabled' : 'Enabled'),
    blockSize: Number(entry.blockSize ?? (v6 ? 122 : 26)),
    nodeSelector: entry.nodeSelector || 'all()',
    disableBGPExport: entry.disableBGPExport === true,
    allowedUses: uses,
  };
  if (row.disableNewAllocations) out.disableNewAllocations = entry.disableNewAllocations === true;
  if (row.assignmentMode) out.assignmentMode = entry.assignmentMode || 'Automatic';
  return out;
}

/** The fields where the defaulted entry and the converted pool differ (none: the operator adopts the pool). */
export function operatorPoolDifferences(entry: OperatorPool, pool: OperatorPool): string[] {
  const keys = new Set([...Object.keys(entry), ...Object.keys(pool)]);
  return [...keys].filter((k) => JSON.stringify(entry[k] ?? '') !== JSON.stringify(pool[k] ?? ''));
}
