/**
 * doctor: find the known Calico traps, before and after a change. Checks are pure functions of a CalicoState,
 * registered in CHECKS; `plan` and `wrap` call runChecks() instead of repeating them.
 */
import type { Release } from '../calico/release.js';
import { ExitCode } from '../core/errors.js';
import { gitOpsChecks } from './checks/gitops.js';
import { healthChecks } from './checks/health.js';
import { ipamChecks } from './checks/ipam.js';
import { ownerChecks } from './checks/owners.js';
import { poolChecks } from './checks/pools.js';
import { targetChecks } from './checks/target.js';
import { installedCalicoVersion, versionChecks } from './checks/versions.js';
import type { CalicoState } from './state.js';
import type { Check, CheckContext, Finding, Severity } from './types.js';

export { loadBundleState, loadLiveState } from './load.js';
export type { CalicoState } from './state.js';
export type { Check, CheckContext, Finding, Severity } from './types.js';

/** Every check, in report order. Add a check here (and its finding ids to docs/troubleshooting.md). */
export const CHECKS: Check[] = [...poolChecks, ...ipamChecks, ...versionChecks, ...healthChecks, ...ownerChecks, ...gitOpsChecks, ...targetChecks];

const ORDER: Record<Severity, number> = { error: 0, warning: 1, info: 2 };

export function checkContext(state: CalicoState, opts: { target?: Release } = {}): CheckContext {
  const installedVersion = installedCalicoVersion(state);
  const governing = opts.target
    ? { version: opts.target.version, source: 'target' as const }
    : installedVersion && state.installType === 'operator'
      ? { version: installedVersion, source: 'installed' as const }
      : undefined;
  return { target: opts.target, installedVersion, governing };
}

/** Run every check; findings sorted errors first. */
export function runChecks(state: CalicoState, opts: { target?: Release; checks?: Check[] } = {}): Finding[] {
  const ctx = checkContext(state, opts);
  const findings = (opts.checks ?? CHECKS).flatMap((c) => c.run(state, ctx));
  return findings.sort((a, b) => ORDER[a.severity] - ORDER[b.severity]);
}

export interface DoctorReport {
  source: CalicoState['source'];
  calico: { installType: CalicoState['installType']; version?: string; target?: string };
  summary: { errors: number; warnings: number; info: number };
  findings: Finding[];
  /** What could not be checked, and why (e.g. a bundle holds no pods). */
  notes: string[];
}

export function doctorReport(state: CalicoState, opts: { target?: Release } = {}): DoctorReport {
  const findings = runChecks(state, opts);
  const notes: string[] = [];
  if (!state.pods)
    notes.push(
      'no pod list in this source (bundles keep no pods): pod/IPAM cross-checks (handles without pods, pod addresses vs pools, duplicate pod IPs) were skipped',
    );
  if (!state.nodes) notes.push('no node list in this source: IPAM affinity to missing nodes was not checked');
  if (state.objects['ippools.crd.projectcalico.org'] === undefined) notes.push('no Calico IPPool CRD: IPAM checks were skipped');
  const count = (s: Severity) => findings.filter((f) => f.severity === s).length;
  return {
    source: state.source,
    calico: { installType: state.installType, version: installedCalicoVersion(state), target: opts.target?.version },
    summary: { errors: count('error'), warnings: count('warning'), info: count('info') },
    findings,
    notes,
  };
}

/** 0 no findings (or only info), 1 warnings only, 2 errors found (documented in docs/troubleshooting.md and the README). */
export function doctorExitCode(report: DoctorReport): number {
  if (report.summary.errors > 0) return ExitCode.BadInput;
  if (report.summary.warnings > 0) return ExitCode.Differences;
  return ExitCode.Ok;
}
