import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildPlan } from './plan.js';
import { exportBundle } from '../export/export.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { fluxOwnedOperatorInstall, INSTALL_PATHS, recordingApi } from '../../test/support/recording-api.js';

/*
 * plan judges the install, its datastore and its GitOps owners from one read of their objects: detectCalico's.
 * The owners' judgement and doctor's preflight (which judges owners and datastore too) take what it read.
 * Doctor still reads the operator and calico-node once more for their readiness (its workloads view, with status).
 */
describe('plan reads', () => {
  it('reads the Installation, the datastore objects and the Flux owner once, and names the owner', async () => {
    const api = recordingApi(fluxOwnedOperatorInstall());
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-plan-reads-')), 'bundle');
    await exportBundle(api.client, { out }, new Reporter(new RecordingIoHost()));
    api.requests.length = 0;
    const plan = await buildPlan(api.client, { to: '3.29.7', bundle: out, diskSnapshots: false }, new Reporter(new RecordingIoHost()));
    expect(plan.findings.find((f) => f.id === 'gitops-owner')?.title).toContain('Flux Kustomization flux-system/calico');
    const { operator, calicoNodeSystem, ...readOnce } = INSTALL_PATHS;
    for (const p of Object.values(readOnce)) expect(api.count(p), p).toBe(1);
    for (const p of [operator, calicoNodeSystem]) expect(api.count(p), p).toBe(2);
  });
});
