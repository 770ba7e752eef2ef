import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * kwok's configuration for the local cluster: its options and the upstream stages copied at build time.
 *
 * One change to upstream's `node-initialize` stage: it no longer renders `status.nodeInfo.bootID`. kwok plays a
 * stage from the node as its event saw it, so a play queued while a node was still NotReady can land after the node
 * turned Ready and after someone set the bootID, and its `{{ or $nodeInfo.bootID "" }}` wrote '' over it
 * (CI, 2026-12-06: plan-reboot.test.ts found frb-3's bootID '' before and after its reboot). A node's boot identity
 * is the machine's to report, as a kubelet does: fakeNode() gives one at creation and tests that play a reboot set a
 * new one. The stage is applied as a merge patch, so leaving the key out leaves the node's bootID as it is.
 */
export function kwokConfig(stagesDir: string): string {
  // The standalone kwok binary does not default these (kwokctl would): set them explicitly.
  const options = ['podPlayStageParallelism: 4', 'nodePlayStageParallelism: 4', 'nodeLeaseParallelism: 4', 'podsOnNodeSyncParallelism: 4']
    .map((l) => `  ${l}`)
    .join('\n');
  const parts = [`apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n${options}\n`];
  for (const f of readdirSync(stagesDir).sort()) {
    const text = readFileSync(path.join(stagesDir, f), 'utf8');
    parts.push(/^\s*name: node-initialize$/m.test(text) ? withoutBootIdRender(text) : text);
  }
  return parts.join('\n---\n');
}

export function writeKwokConfig(file: string, stagesDir: string): void {
  writeFileSync(file, kwokConfig(stagesDir));
}

function withoutBootIdRender(stage: string): string {
  const lines = stage.split('\n');
  const kept = lines.filter((l) => !/^\s*bootID:/.test(l));
  // Upstream's template has exactly one such line; another shape means kwok changed it and this needs a look.
  if (lines.length - kept.length !== 1)
    throw new Error(`kwok's node-initialize stage no longer has one bootID line to leave out (found ${lines.length - kept.length})`);
  return kept.join('\n');
}
