/**
 * Fields a target CRD prunes whose value the newer release wrote by itself (calico/operator-defaults.ts
 * isReleaseDefault: IPPool assignmentMode Automatic, BlockAffinity type host, FelixConfiguration nftablesMode as
 * the operator derives it).
 * They are not a user's settings, so they need no --allow-field-loss; they are listed as an info finding.
 */
import { isReleaseDefault, valueAt } from '../calico/operator-defaults.js';
import type { KubeObject } from '../kube/types.js';
import { objRef } from './live.js';
import type { PlanFinding } from './types.js';

/**
 * Takes the release's own defaults out of `pruned` (path -> refs of the objects with it; paths left with no object
 * are removed) and returns the finding that lists them (none when there are none).
 */
export function releaseDefaultsPruned(
  kind: string,
  objects: KubeObject[],
  pruned: Map<string, Set<string>>,
  installation: KubeObject | undefined,
  targetVersion: string,
): PlanFinding[] {
  const defaults: { ref: string; text: string }[] = [];
  for (const obj of objects) {
    const ref = objRef(obj);
    for (const [p, refs] of pruned) {
      if (!refs.has(ref) || !isReleaseDefault(obj, p, installation)) continue;
      refs.delete(ref);
      defaults.push({ ref, text: `${ref}: ${p}: ${JSON.stringify(valueAt(obj, p))}` });
    }
  }
  for (const [p, refs] of pruned) if (refs.size === 0) pruned.delete(p);
  if (!defaults.length) return [];
  return [
    {
      id: `${kind.toLowerCase()}-defaults-pruned`,
      severity: 'info',
      title: `${kind} values that ${targetVersion}'s CRD prunes, written by the newer release itself (its defaults)`,
      objects: [...new Set(defaults.map((d) => d.ref))],
      details: defaults.map((d) => d.text),
      action: 'none',
      plan: `dropped by the cluster on the next write: ${targetVersion} behaves as these defaults say without them (they stay in the bundle)`,
    },
  ];
}
