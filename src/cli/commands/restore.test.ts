import { describe, expect, it, vi } from 'vitest';
import { registerSecret } from '../../io/redact.js';
import { CliContext } from '../context.js';
import { confirmPlan } from './restore.js';

type RestorePlan = Parameters<typeof confirmPlan>[1];

const SECRET = 'k7Qm2vXr9pLw';

function planWith(diff: string): RestorePlan {
  return {
    bundle: {
      id: 'bundle-1',
      cluster: { name: 'prod', uid: 'uid-1', server: 'https://127.0.0.1:6443', kubernetesVersion: 'v1.33.0' },
      calicoVersion: '3.28.1',
    },
    cluster: { uid: 'uid-1', sameCluster: true },
    dryRun: false,
    existing: 'update',
    crdsToCreate: [],
    deleting: [],
    awaitingCollection: [],
    operatorReports: [],
    actions: [
      {
        ref: { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', name: 'default-pool' },
        id: 'IPPool default-pool',
        phase: 'pools',
        action: 'update',
        diff,
      },
    ],
    counts: { update: 1 },
  } as RestorePlan;
}

describe('restore preview', () => {
  it('goes through redaction and escaping before it reaches stderr', async () => {
    registerSecret(SECRET);
    const ctx = new CliContext({ verbose: false, quiet: false, color: false, output: 'table', yes: false });
    vi.spyOn(ctx.host, 'confirm').mockResolvedValue(false);
    const written: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      expect(await confirmPlan(ctx, planWith(`- spec.description: old\n+ spec.description: copied from ${SECRET}\x1b]0;owned\x07`))).toBe(false);
    } finally {
      stderr.mockRestore();
    }
    const out = written.join('');
    expect(out).toContain('IPPool default-pool');
    expect(out).toContain('copied from ***');
    expect(out).not.toContain(SECRET);
    expect(out).not.toContain('\x1b]0;');
  });
});
