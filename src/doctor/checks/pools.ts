/**
 * IP pools and the tigera operator (docs/calico-differences.md, "Operator-managed IP pools"; Calico issue #9100).
 * From operator v1.34 (Calico 3.28) Installation.spec.calicoNetwork.ipPools is desired state: the operator adopts
 * every pool that carries the managed-by label or that converts to an object equal to an Installation entry,
 * rewrites adopted pools to match their entry (its pool type has no `disabled`, so a disabled pool comes back
 * enabled) and deletes labelled pools that are no longer listed.
 */
import {
  isOperatorLabelled,
  OPERATOR_MANAGED_LABEL,
  OPERATOR_GROUP,
  OPERATOR_MANAGED_VALUE,
  operatorPoolBehaviour,
  poolsTheOperatorDeletes,
} from '../../calico/knowledge.js';
import { entryAsDefaulted, operatorPoolDifferences, poolAsOperatorEntry, poolConversion } from '../../calico/pool-conversion.js';
import type { KubeObject } from '../../kube/types.js';
import { parseCidr } from '../ip.js';
import { installation, KEYS, objectsOf, ref, type CalicoState } from '../state.js';
import type { Check, CheckContext, Finding, GoverningVersion } from '../types.js';

/** Label commands that reach the label the operator reads (the v3 API), with calicoctl as the alternative. */
function relabel(name: string, label: string): string {
  return `kubectl label ippools.projectcalico.org ${name} ${label}   (or: calicoctl label ippool ${name} ${label.endsWith('-') ? `${label.slice(0, -1)} --remove` : label.replace('=', ' ')})`;
}

export function installationPools(inst: KubeObject | undefined): any[] | undefined {
  const p = inst?.spec?.calicoNetwork?.ipPools;
  return Array.isArray(p) ? p : undefined;
}

/** The Installation's CNI type as the operator's pool defaulting reads it (Calico unless a provider set another). */
export const cniTypeOf = (inst: KubeObject | undefined): string | undefined => inst?.spec?.cni?.type;

/**
 * The fields in which an Installation entry, defaulted, differs from the pool converted to the operator's pool type
 * of Calico `calicoVersion` (calico/pool-conversion.ts); none means the operator takes the pool as its own.
 */
export function entryPoolDifferences(entry: Record<string, any>, pool: KubeObject, calicoVersion: string, cniType?: string): string[] {
  const row = poolConversion(calicoVersion);
  const filled = entryAsDefaulted(entry, row, { cniType, poolNameForCidr: entry.cidr === pool.spec?.cidr ? pool.metadata.name : undefined });
  return operatorPoolDifferences(filled, poolAsOperatorEntry(pool, row));
}

/**
 * Why the operator of Calico `calicoVersion` treats a pool as its own, or undefined when it leaves it alone: the
 * managed-by label (read where the operator reads it), or an entry equal to the converted pool (Go's DeepEqual).
 */
export function adoptionReason(pool: KubeObject, entries: any[] | undefined, calicoVersion: string, cniType?: string): string | undefined {
  if (isOperatorLabelled(pool)) return `it carries the label ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE}`;
  const i = (entries ?? []).findIndex((e) => entryPoolDifferences(e, pool, calicoVersion, cniType).length === 0);
  if (i >= 0) return `it equals entry ${i} of Installation default's spec.calicoNetwork.ipPools once converted to the operator's pool type`;
  return undefined;
}

/**
 * The Installation's pool entries as an operator that manages pools reads them: ippool/defaults.go (v1.34+) defaults
 * a missing ipPools to [] when pools exist, so a missing list means "no pools" then (and deletes owned ones).
 */
function entriesAsDefaulted(state: CalicoState, inst: KubeObject | undefined, managesPools: boolean): any[] | undefined {
  const entries = installationPools(inst);
  if (entries || !inst || !managesPools) return entries;
  return objectsOf(state, KEYS.ipPools).length > 0 ? [] : undefined;
}

/** The governing operator version, Installation `default` and its pool entries, when the operator behaviour `needs` applies. */
function installationScope(state: CalicoState, ctx: CheckContext, needs: 'managesPools' | 'onePoolPerFamily') {
  const g = ctx.governing;
  const inst = installation(state);
  if (!g || !inst || !operatorPoolBehaviour(g.version)[needs]) return undefined;
  const entries = entriesAsDefaulted(state, inst, operatorPoolBehaviour(g.version).managesPools);
  return entries ? { g, inst, entries, listed: installationPools(inst) !== undefined } : undefined;
}

/**
 * pool_controller.go (v1.34+) rewrites or deletes existing pools only while APIServer `default` reports state Ready
 * (`apiAvailable`); otherwise it only sets its status Degraded ("Unable to modify/delete IP pools while Calico API
 * server is unavailable") and acts once the API server is Ready. Undefined when the installed one is Ready or when
 * the judgement is about a target (its API server's state is not known yet).
 */
function apiServerNotReady(state: CalicoState, g: GoverningVersion): string | undefined {
  const objs = state.objects[`apiservers.${OPERATOR_GROUP}`];
  if (g.source !== 'installed' || !objs) return undefined;
  const api = objs.find((o) => o.metadata.name === 'default' || o.metadata.name === 'tigera-secure');
  const st: string | undefined = api?.status?.state;
  if (st === 'Ready') return undefined;
  return api ? `APIServer ${api.metadata.name} is not Ready (state: ${st || 'none'})` : 'there is no APIServer object';
}

const notReadyWhy = (why: string, verb: string) =>
  ` Not yet, though: ${why}, and the operator ${verb} existing pools only through the Calico API server while its APIServer ` +
  `reports Ready (until then its TigeraStatus says Degraded). It will do so as soon as the API server becomes Ready.`;

function governingText(g: GoverningVersion): string {
  return g.source === 'target' ? `the target Calico ${g.version}` : `the installed Calico ${g.version}`;
}

const disabledAdoptedPools: Check = {
  name: 'operator-adopted disabled pools',
  run(state, ctx) {
    const g = ctx.governing;
    const inst = installation(state);
    if (!g || !inst) return [];
    const behaviour = operatorPoolBehaviour(g.version);
    if (!behaviour.managesPools || !behaviour.stopAllocations) return [];
    const entries = installationPools(inst) ?? [];
    const gate = apiServerNotReady(state, g);
    const out: Finding[] = [];
    for (const pool of objectsOf(state, KEYS.ipPools)) {
      if (pool.spec?.disabled !== true) continue;
      const reason = adoptionReason(pool, entries, g.version, cniTypeOf(inst));
      if (!reason) continue;
      const idx = entries.findIndex((e) => e.cidr === pool.spec?.cidr);
      if (idx < 0) continue; // labelled but not listed: the operator deletes it (reported by the next check)
      const stop = behaviour.stopAllocations;
      // Allocations already stopped the supported way (e.g. disableNewAllocations on 3.29+): the operator keeps it so.
      if (JSON.stringify(entries[idx][stop.field]) === JSON.stringify(stop.value)) continue;
      const patch = JSON.stringify([{ op: 'add', path: `/spec/calicoNetwork/ipPools/${idx}/${stop.field}`, value: stop.value }]);
      // 3.28's stop (nodeSelector) makes the entry differ from an unlabelled pool, which the operator then refuses
      // on every reconcile ("Cannot update an IP pool not owned by the operator"): unlisting it is the quiet way.
      const unlist = stop.field !== 'disableNewAllocations' && !isOperatorLabelled(pool);
      const unlistPatch = JSON.stringify([
        { op: 'test', path: `/spec/calicoNetwork/ipPools/${idx}/cidr`, value: pool.spec?.cidr },
        { op: 'remove', path: `/spec/calicoNetwork/ipPools/${idx}` },
      ]);
      out.push({
        id: 'pool-disabled-will-be-reenabled',
        severity: 'error',
        title: `IP pool ${pool.metadata.name} is disabled, but the tigera operator of ${governingText(g)} manages it and will re-enable it${gate ? ' once the Calico API server is Ready' : ''}`,
        objects: [ref(pool), ref(inst)],
        why:
          `The operator adopts ${pool.metadata.name} because ${reason}. From Calico 3.28 the operator treats ` +
          `Installation.spec.calicoNetwork.ipPools as desired state and its pool type has no "disabled" field, so it rewrites ` +
          `the pool to disabled: false (${gate ? 'when it can' : 'at once'} and every 5 minutes); edits are reverted and a deleted pool is re-created ` +
          `while the entry is listed (Calico issue #9100). New pods will get addresses from ${pool.spec?.cidr} again.` +
          (gate ? notReadyWhy(gate, 'rewrites') : ''),
        fix:
          (unlist
            ? `Take the pool out of the operator's hands: remove entry ${idx} (cidr ${pool.spec?.cidr}); the pool has no operator label, so the operator then leaves it disabled:\n` +
              `  kubectl patch installation default --type=json -p '${unlistPatch}'\n`
            : `Stop allocations through the Installation instead of the pool: on entry ${idx} (cidr ${pool.spec?.cidr}) set ${stop.text}:\n` +
              `  kubectl patch installation default --type=json -p '${patch}'\n`) +
          (unlist
            ? `To remove the pool entirely later, first move its pods to another pool, then delete it with calicoctl (the operator does not own it).`
            : `To remove the pool entirely, first move its pods to another pool, then delete entry ${idx} from ` +
              `spec.calicoNetwork.ipPools (the operator deletes the pool through the Calico API server).`),
      });
    }
    return out;
  },
};

const managedPoolsNotListed: Check = {
  name: 'operator-managed pools missing from the Installation',
  run(state, ctx) {
    const scope = installationScope(state, ctx, 'managesPools');
    if (!scope) return [];
    const { g, inst, entries } = scope;
    const gate = apiServerNotReady(state, g);
    const doomed = poolsTheOperatorDeletes(entries, objectsOf(state, KEYS.ipPools));
    if (doomed.length === 0) return [];
    const names = doomed.map((p) => p.metadata.name);
    const emptied = entries.length === 0;
    return [
      {
        id: emptied ? 'installation-ippools-empty' : 'pool-managed-not-listed',
        severity: 'error',
        title:
          (emptied
            ? `Installation default has ${scope.listed ? 'ipPools: []' : 'no ipPools (the operator defaults it to [])'} while ${doomed.length} pool(s) are operator-managed: the operator of ${governingText(g)} will delete ${names.join(', ')}`
            : `IP pool(s) ${names.join(', ')} carry ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE} but are not listed in Installation default: the operator of ${governingText(g)} will delete them`) +
          (gate ? ' once the Calico API server is Ready' : ''),
        objects: [...doomed.map(ref), ref(inst)],
        why:
          `The operator deletes every pool it manages (labelled ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE}) whose CIDR is not in ` +
          `spec.calicoNetwork.ipPools. Pods keep their addresses, but the pool's settings (encapsulation, NAT) go and IPAM ` +
          `can no longer allocate from ${doomed.map((p) => p.spec?.cidr).join(', ')}.` +
          (scope.listed ? '' : ' An Installation without spec.calicoNetwork.ipPools is defaulted to [] while pools exist (ippool/defaults.go).') +
          (gate ? notReadyWhy(gate, 'deletes') : ''),
        fix:
          `Either list the pool(s) in the Installation again (an entry with the same cidr, blockSize, encapsulation, natOutgoing and ` +
          `nodeSelector), or release them from the operator by removing the label:\n` +
          names.map((n) => `  ${relabel(n, `${OPERATOR_MANAGED_LABEL}-`)}`).join('\n') +
          '\n(through the Calico API server: the operator reads the label from the v3 metadata, not from the crd.projectcalico.org object)',
      },
    ];
  },
};

const onePoolPerFamily: Check = {
  name: 'one Installation pool per IP family',
  run(state, ctx) {
    const scope = installationScope(state, ctx, 'onePoolPerFamily');
    if (!scope) return [];
    const { g, inst, entries } = scope;
    const out: Finding[] = [];
    for (const family of [4, 6] as const) {
      const fam = entries.filter((e) => parseCidr(e.cidr)?.family === family);
      if (fam.length <= 1) continue;
      out.push({
        id: 'installation-pools-per-family',
        severity: 'error',
        title: `Installation default lists ${fam.length} IPv${family} pools; the operator of ${governingText(g)} accepts one per IP family`,
        objects: [ref(inst)],
        why: `The Calico ${g.version} operator rejects an Installation with more than one IPv${family} pool (${fam.map((e) => e.cidr).join(', ')}) and stops reconciling (TigeraStatus Degraded).`,
        fix:
          `Keep one IPv${family} entry in spec.calicoNetwork.ipPools; keep the other pools as plain IPPool objects (kubectl/calicoctl), ` +
          `which this operator version never touches. After an upgrade to 3.28 or later they can be listed again.`,
      });
    }
    return out;
  },
};

const entryCidrNotOwned: Check = {
  name: 'Installation entries whose CIDR belongs to a pool the operator does not own',
  run(state, ctx) {
    const scope = installationScope(state, ctx, 'managesPools');
    if (!scope) return [];
    const { g, inst, entries } = scope;
    const out: Finding[] = [];
    entries.forEach((e, i) => {
      const pool = objectsOf(state, KEYS.ipPools).find((p) => p.spec?.cidr === e.cidr);
      if (!pool || adoptionReason(pool, entries, g.version, cniTypeOf(inst))) return;
      const view = poolAsOperatorEntry(pool, poolConversion(g.version));
      const differs = entryPoolDifferences(e, pool, g.version, cniTypeOf(inst));
      const unmatchable = differs.filter((k) => view[k] === '' || (Array.isArray(view[k]) && view[k].length === 0));
      out.push({
        id: 'pool-cidr-not-owned',
        severity: 'warning',
        title: `Installation entry ${i} (${e.cidr}) matches the CIDR of IP pool ${pool.metadata.name}, which the operator of ${governingText(g)} does not own`,
        objects: [ref(pool), ref(inst)],
        why:
          `The pool has no ${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE} label and differs from the entry (${differs.join(', ') || 'name'}), ` +
          'so the operator refuses to touch it: it logs "Cannot update an IP pool not owned by the operator" on every reconcile ' +
          '(TigeraStatus ippools stays Available: operator v1.34.3 clears the condition at the end of the same reconcile) and the entry is never applied.' +
          (pool.spec?.disabled === true
            ? ` That keeps ${pool.metadata.name} disabled, which is what a plan that stops a disabled pool on its entry relies on.`
            : ''),
        fix:
          // A field the pool converts to "" or [] (no encapsulation; natOutgoing false on v1.34; no allowedUses) is one
          // the operator's defaulting never leaves empty: no entry can equal the pool then, only the label makes it the operator's.
          (unmatchable.length
            ? `No entry can equal this pool: its ${unmatchable.join(', ')} convert(s) to an empty value, which the operator's defaults never leave in an entry. `
            : `Make the entry describe the pool as it is (${differs.map((k) => `${k}: ${JSON.stringify(view[k])}`).join(', ') || `name: ${pool.metadata.name}`}), or `) +
          `let the operator take the pool over and rewrite it to the entry: ${relabel(pool.metadata.name, `${OPERATOR_MANAGED_LABEL}=${OPERATOR_MANAGED_VALUE}`)} ` +
          '(check first that the entry is what you want: a disabled pool comes back enabled).',
      });
    });
    return out;
  },
};

export const poolChecks: Check[] = [disabledAdoptedPools, managedPoolsNotListed, entryCidrNotOwned, onePoolPerFamily];

/** Exported for tests and for plan: is this pool the operator's (by label or by equality)? */
export function operatorAdopts(state: CalicoState, pool: KubeObject, calicoVersion: string): boolean {
  const inst = installation(state);
  return adoptionReason(pool, installationPools(inst), calicoVersion, cniTypeOf(inst)) !== undefined;
}

export type { CheckContext };
