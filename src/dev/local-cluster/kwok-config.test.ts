import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { kwokConfig } from './kwok-config.js';

// The lines of upstream kwok v0.8.0's kustomize/stage/node/fast/node-initialize.yaml that matter here.
const NODE_INITIALIZE = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  next:
    statusTemplate: |
      {{ $nodeInfo := .status.nodeInfo }}
      nodeInfo:
        architecture: {{ or $nodeInfo.architecture "amd64" }}
        bootID: {{ or $nodeInfo.bootID \`""\` }}
        machineID: {{ or $nodeInfo.machineID \`""\` }}
      phase: Running
`;
const POD_READY = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  next:
    statusTemplate: |
      bootID: not a node stage, left as it is
`;

function stages(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-kwok-stages-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

describe('kwokConfig', () => {
  it("leaves the node's bootID out of node-initialize (a stale play wrote '' over a set one) and keeps everything else", () => {
    const out = kwokConfig(stages({ 'node_fast_node-initialize.yaml': NODE_INITIALIZE, 'pod_fast_pod-ready.yaml': POD_READY }));
    const [config, initialize, podReady] = out.split('\n---\n');
    expect(config).toContain('nodePlayStageParallelism: 4');
    expect(initialize).not.toMatch(/bootID/);
    expect(initialize).toContain('machineID: {{ or $nodeInfo.machineID `""` }}');
    expect(initialize).toContain('architecture: {{ or $nodeInfo.architecture "amd64" }}');
    expect(podReady).toBe(POD_READY);
  });

  it('fails loudly when upstream changed the stage so that no bootID line is there to leave out', () => {
    const changed = NODE_INITIALIZE.replace(/^\s*bootID:.*\n/m, '');
    expect(() => kwokConfig(stages({ 'node_fast_node-initialize.yaml': changed }))).toThrow(/no longer has one bootID line/);
  });
});
