/**
 * Operator-managed IP pools (Calico issue #9100, docs/calico-differences.md "Operator-managed IP pools"): from operator
 * v1.34 (Calico 3.28) a pool listed in Installation.spec.calicoNetwork.ipPools, or labelled
 * app.kubernetes.io/managed-by=tigera-operator, is reconciled from the Installation entry. Writing such an
 * IPPool alone is reverted minutes later, so restore relies on the Installation entry (restored first) and says
 * so. The operator's pool API has no `disabled`: a disabled pool restore writes gets its entry stopped the running
 * operator's way (`stopEntriesOfStoppedPools`: 3.28 `nodeSelector: "!all()"`, 3.29+ `disableNewAllocations: true`),
 * or the operator would rewrite it enabled, or create it again, allocating, once it is gone (Calico issue #9100). A
 * pool it owns (the managed-by label) it then rewrites from that entry, non-allocating; one it does not take as its
 * own (no label, and unequal to its entry once converted: the adoption model of doctor/checks/pools.ts) it leaves
 * alone ("Cannot update an IP pool not owned by the operator"), written as it is. A disabled pool whose entry restore
 * cannot stop (no entry of its CIDR in the bundle's Installation, or an operator without a supported stop) is refused.
 */
import {
  NODE_SELECTOR_STOP,
  isOperatorLabelled,
  OPERATOR_MANAGED_LABEL,
  OPERATOR_MANAGED_VALUE,
  calicoMinorForOperator,
  calicoVersionForOperator,
  imageTag,
  operatorPoolBehaviour,
  poolsTheOperatorDeletes,
} from '../calico/knowledge.js';
import type { KubeObject } from '../kube/types.js';
import { adoptionReason, cniTypeOf, entryPoolDifferences } from '../doctor/checks/pools.js';

/** What pool_controller.go (v1.34+) logs, on every reconcile, for an entry whose CIDR has a pool it does not own. */
export const NOT_OWNED_LOG = 'Cannot update an IP pool not owned by the operator';

export interface PoolVerdict {
  /** The operator reconciles this pool. */
  managed: boolean;
  /** Name (or CIDR) of the Installation entry the pool comes from. */
  entry?: string;
  /** Why it would not stick, and the fix; the pool is then not written. */
  refusal?: { reason: string; fix: string };
  note?: string;
}

/** Calico version the operator image stands for (`v1.34.3` -> `v3.28.1`, unknown patch -> `v3.28.0`). */
export function calicoVersionOfOperatorImage(image: string | undefined): string | undefined {
  const tag = imageTag(image);
  if (!tag) return undefined;
  return calicoVersionForOperator(tag) ?? (calicoMinorForOperator(tag) ? `${calicoMinorForOperator(tag)}.0` : undefined);
}

function installationEntries(installation: KubeObject | undefined): any[] {
  const pools = installation?.spec?.calicoNetwork?.ipPools;
  return Array.isArray(pools) ? pools : [];
}

/**
 * How a bundle IPPool must be restored given the Installation being restored and the operator that will run.
 * `installation`: the bundle's Installation as restore writes it (stopEntriesOfStoppedPools applied), or undefined.
 * `operatorImage` undefined = no operator installed: nothing reconciles pools, they are written like any object.
 */
export function judgePool(pool: KubeObject, installation: KubeObject | undefined, operatorImage: string | undefined): PoolVerdict {
  const version = calicoVersionOfOperatorImage(operatorImage);
  if (!operatorImage || !version) return { managed: false };
  const behaviour = operatorPoolBehaviour(version);
  if (!behaviour.managesPools) return { managed: false };
  const entries = installationEntries(installation);
  const entry = entries.find((e) => (e?.name && e.name === pool.metadata.name) || (e?.cidr && e.cidr === pool.spec?.cidr));
  const labelled = isOperatorLabelled(pool);
  if (!entry && !labelled) return { managed: false };
  const entryName: string | undefined = entry ? (entry.name ?? entry.cidr) : undefined;
  const op = imageTag(operatorImage);
  if (!labelled && !adoptionReason(pool, entries, version, cniTypeOf(installation))) {
    // pool_controller.go takes an unlabelled pool only when it equals an entry: this one it leaves alone as long as
    // it exists, so the bundle's pool is written as it is (a refusal would let the entry create it again, enabled).
    const why = entryPoolDifferences(entry!, pool, version, cniTypeOf(installation));
    return {
      managed: false,
      note: `pool ${pool.metadata.name} is not tigera operator ${op}'s: it has no ${OPERATOR_MANAGED_LABEL} label and differs from Installation entry ${entryName} (${why.join(', ')}), so the operator leaves it alone ("${NOT_OWNED_LOG}") and it is restored as it is`,
    };
  }
  const stop = behaviour.stopAllocations;
  // An entry that already stops allocations the operator's way (3.28 nodeSelector "!all()", 3.29+ disableNewAllocations)
  // keeps the pool non-allocating: restored through the entry, nothing to refuse (a refusal there would loop).
  const stoppedByEntry = !!entry && !!stop && JSON.stringify(entry[stop.field]) === JSON.stringify(stop.value);
  if (pool.spec?.disabled === true && !stoppedByEntry) {
    // Restore stops the entry of a disabled pool itself (stopEntriesOfStoppedPools): left here are a pool whose
    // entry it cannot stop (none of its CIDR in the bundle's Installation) and an operator without a supported stop.
    return {
      managed: true,
      entry: entryName,
      refusal: {
        reason: `pool ${pool.metadata.name} is disabled, but tigera operator ${op} manages it${entryName ? ` (Installation entry ${entryName})` : ' (managed-by label)'} and its pool API has no "disabled" field: the operator would re-enable it within minutes (Calico issue #9100)`,
        fix: stop
          ? `to stop allocations the supported way, set ${stop.text} on the pool's entry (cidr ${pool.spec?.cidr}) in Installation.spec.calicoNetwork.ipPools, live or in the bundle; or remove the entry and the ${OPERATOR_MANAGED_LABEL} label so the pool is yours, then restore again`
          : `remove the pool's entry from Installation.spec.calicoNetwork.ipPools and its ${OPERATOR_MANAGED_LABEL} label so the operator leaves it alone, then restore again`,
      },
    };
  }
  if (pool.spec?.disabled === true && stop) {
    // Owned and stopped on its entry: the operator writes the pool from that entry, non-allocating.
    return { managed: true, entry: entryName, note: ownedStoppedNote(pool, entryName!, op, stop) };
  }
  if (!entry && installation) {
    // The Installation restored with it does not list it: the operator deletes the pool once both are written.
    return {
      managed: true,
      refusal: {
        reason: `pool ${pool.metadata.name} carries the ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE} label but the bundle's Installation does not list it: operator ${op} deletes labelled pools it does not list, so it would not stay`,
        fix: `release the pool from the operator by removing the label through the Calico API server (kubectl label ippools.projectcalico.org ${pool.metadata.name} ${OPERATOR_MANAGED_LABEL}-) and restore again, or install the bundle's Calico version first (cni-rewind plan --to <bundle version>, then apply)`,
      },
    };
  }
  if (!entry) {
    return {
      managed: true,
      note: `pool ${pool.metadata.name} carries the ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE} label and the bundle has no Installation: the live Installation must list it or operator ${op} deletes it`,
    };
  }
  return {
    managed: true,
    entry: entryName,
    note: `pool ${pool.metadata.name} is restored through Installation entry ${entryName} (operator ${op} reconciles it from there); the IPPool is written too so IPAM is consistent before the operator resumes`,
  };
}

/** What restore says of a disabled pool the operator owns, stopped on its entry: the field, and what the operator writes. */
function ownedStoppedNote(pool: KubeObject, entry: string, op: string | undefined, stop: { field: string; text: string }): string {
  const rewrite =
    stop.field === 'nodeSelector'
      ? `its pool API has no "disabled", so it rewrites the pool from that entry with nodeSelector "${NODE_SELECTOR_STOP}" and without disabled: ` +
        'no node selects it, though a pod that names the pool in its cni.projectcalico.org/ipv4pools annotation can still get an address from it'
      : `it writes the pool from that entry with disabled: true`;
  return (
    `pool ${pool.metadata.name} is disabled and tigera operator ${op}'s: restored through Installation entry ${entry}, written with ${stop.text}, the operator's way ` +
    `to stop allocations; ${rewrite}, while an entry that does not stop it would have the operator re-enable it (Calico issue #9100)`
  );
}

/**
 * Does writing this Installation make the operator delete pools? From v1.34 (Calico 3.28) the operator deletes every
 * pool it manages (managed-by label, read from the v3 metadata) whose CIDR the Installation does not list, and a
 * missing `ipPools` is defaulted to [] while any pool exists (ippool/defaults.go). A restore that writes such an
 * Installation would delete those pools minutes later, so the write is refused with the ways out.
 * `pools`: every IPPool there will be after the restore (live ones, with the bundle's version where it has one).
 */
export function judgeInstallationPools(
  installation: KubeObject,
  pools: KubeObject[],
  operatorImage: string | undefined,
): { reason: string; fix: string } | undefined {
  const version = calicoVersionOfOperatorImage(operatorImage);
  if (!operatorImage || !version || !operatorPoolBehaviour(version).managesPools) return undefined;
  const listed = installation.spec?.calicoNetwork?.ipPools;
  const doomed = poolsTheOperatorDeletes(listed, pools);
  if (doomed.length === 0) return undefined;
  const names = doomed.map((p) => `${p.metadata.name} (${p.spec?.cidr})`).join(', ');
  const op = imageTag(operatorImage);
  return {
    reason:
      `the bundle's Installation ${Array.isArray(listed) ? 'does not list' : 'has no ipPools, which operator ' + op + ' defaults to [] and so does not list'} ` +
      `the operator-managed pool(s) ${names}: tigera operator ${op} would delete them once it is written`,
    fix:
      `install the bundle's Calico version first (cni-rewind plan --to <bundle version>, then apply), whose Installation matches it; ` +
      `or release the pool(s) from the operator through the Calico API server, then restore again: ` +
      doomed.map((p) => `kubectl label ippools.projectcalico.org ${p.metadata.name} ${OPERATOR_MANAGED_LABEL}-`).join('; '),
  };
}

/**
 * The bundle's Installation with the entry of each disabled pool stopped the running operator's way (3.28
 * `nodeSelector: "!all()"`, 3.29+ `disableNewAllocations: true`). A pool the operator does not own is restored as
 * it is (judgePool), but an entry that does not stop it is a pool the operator creates again, allocating, as soon as
 * the pool is gone; one it owns (the managed-by label) it rewrites from the entry, enabled unless the entry stops it
 * (Calico issue #9100, caused by the restore). Entries are matched by CIDR, as the operator does.
 * `pools`: the bundle's IPPools restore writes.
 */
export function stopEntriesOfStoppedPools(
  installation: KubeObject,
  pools: readonly KubeObject[],
  operatorImage: string | undefined,
): { installation: KubeObject; notes: string[] } {
  const version = calicoVersionOfOperatorImage(operatorImage);
  const stop = version ? operatorPoolBehaviour(version).stopAllocations : undefined;
  const entries = installationEntries(installation);
  if (!version || !stop || !operatorPoolBehaviour(version).managesPools || !entries.length) return { installation, notes: [] };
  const notes: string[] = [];
  const stopped = entries.map((e) => {
    const pool = pools.find((p) => p.spec?.disabled === true && e?.cidr && p.spec?.cidr === e.cidr);
    if (!pool || JSON.stringify(e[stop.field]) === JSON.stringify(stop.value)) return e;
    const op = imageTag(operatorImage);
    notes.push(
      isOperatorLabelled(pool)
        ? `entry ${e.name ?? e.cidr} of Installation.spec.calicoNetwork.ipPools written with ${stop.text}: pool ${pool.metadata.name} is disabled in the bundle and tigera operator ${op}'s ` +
            `(${OPERATOR_MANAGED_LABEL} label), which writes it from this entry: one that does not stop it would have the operator re-enable it (Calico issue #9100)`
        : `entry ${e.name ?? e.cidr} of Installation.spec.calicoNetwork.ipPools written with ${stop.text}: pool ${pool.metadata.name} is disabled in the bundle and not the operator's, ` +
            `and an entry that does not stop it would make tigera operator ${op} create it again, allocating, once it is gone (Calico issue #9100)`,
    );
    return { ...e, [stop.field]: stop.value };
  });
  if (!notes.length) return { installation, notes };
  const spec = installation.spec ?? {};
  return { installation: { ...installation, spec: { ...spec, calicoNetwork: { ...spec.calicoNetwork, ipPools: stopped } } }, notes };
}
