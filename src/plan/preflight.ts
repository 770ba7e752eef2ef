/**
 * Preflight: the checks a plan makes before it is written and `apply` makes again before touching anything.
 * The bundle the plan relies on must belong to this cluster, pass verify, be recent and (unless disk snapshots
 * are waived) hold completed snapshots of every node; the cluster must be healthy; PDBs that would block a drain
 * are listed.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { openBundle, readBundleManifest, type Bundle } from '../bundle/reader.js';
import type { BundleManifest } from '../bundle/types.js';
import { verifyBundle } from '../bundle/verify.js';
import type { Release } from '../calico/release.js';
import { poolChecks } from '../doctor/checks/pools.js';
import { loadLiveState, runChecks } from '../doctor/doctor.js';
import { installation as installationOf, KEYS, type CalicoState } from '../doctor/state.js';
import { transformInstallation } from './findings.js';
import { isErrorKind, RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { InstallationTransform, PreflightCheck } from './types.js';

export const DEFAULT_BACKUP_DIR = 'cni-rewind-backups';

/** The newest bundle of this cluster in `dir` (default ./cni-rewind-backups), or undefined. */
export async function newestBundleFor(uid: string, dir = DEFAULT_BACKUP_DIR): Promise<string | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return undefined;
  }
  let best: { p: string; at: string } | undefined;
  for (const n of names) {
    if (n.startsWith('.') || n.endsWith('.journal')) continue;
    const p = path.join(dir, n);
    const m = await readBundleManifest(p).catch(() => undefined);
    if (!m || m.cluster.uid !== uid) continue;
    if (!best || m.createdAt > best.at) best = { p, at: m.createdAt };
  }
  return best?.p;
}

export function manifestSha256(bundle: Bundle): string {
  return createHash('sha256')
    .update(readFileSync(path.join(bundle.root, 'manifest.json')))
    .digest('hex');
}

export interface BundleCheckOptions {
  uid: string;
  maxAgeMs: number;
  maxBackupAge: string;
  diskSnapshots: boolean;
  nodes: string[];
  /** When the plan recorded a bundle: its manifest checksum must still match. */
  expectSha256?: string;
  now?: Date;
}

/** Checks on the bundle; returns the checks (the caller decides what a failure means). */
export async function checkBundle(bundle: Bundle, opts: BundleCheckOptions): Promise<PreflightCheck[]> {
  const m: BundleManifest = bundle.manifest;
  const checks: PreflightCheck[] = [];
  const v = await verifyBundle(bundle);
  checks.push({
    name: 'bundle-verifies',
    ok: v.ok,
    blocking: true,
    detail: v.ok
      ? `bundle ${m.id}: every file matches its checksum`
      : `bundle ${m.id} fails verify: ${v.problems
          .slice(0, 3)
          .map((p) => `${p.file}: ${p.problem}`)
          .join('; ')}`,
  });
  if (opts.expectSha256) {
    const sha = manifestSha256(bundle);
    checks.push({
      name: 'bundle-is-the-planned-one',
      ok: sha === opts.expectSha256,
      blocking: true,
      detail: sha === opts.expectSha256 ? 'manifest checksum matches the plan' : "the bundle's manifest.json changed since the plan was made",
    });
  }
  const same = m.cluster.uid === opts.uid;
  checks.push({
    name: 'bundle-of-this-cluster',
    ok: same,
    blocking: true,
    detail: same ? `cluster uid ${m.cluster.uid}` : `bundle is of cluster ${m.cluster.name} (uid ${m.cluster.uid}), this cluster's uid is ${opts.uid}`,
  });
  const ageMs = (opts.now ?? new Date()).getTime() - Date.parse(m.createdAt);
  const recent = ageMs <= opts.maxAgeMs;
  checks.push({
    name: 'bundle-recent',
    ok: recent,
    blocking: true,
    detail: `made ${Math.round(ageMs / 60_000)} min ago (limit --max-backup-age ${opts.maxBackupAge})`,
  });
  if (opts.diskSnapshots) {
    const done = new Set(m.snapshots.filter((s) => s.state === 'completed').map((s) => s.node));
    const missing = opts.nodes.filter((n) => !done.has(n));
    const ok = m.complete && missing.length === 0 && opts.nodes.length > 0;
    checks.push({
      name: 'disk-snapshots',
      ok,
      blocking: true,
      detail: ok
        ? `completed snapshots for all ${opts.nodes.length} nodes`
        : `no completed disk snapshot for ${missing.length ? missing.slice(0, 5).join(', ') + (missing.length > 5 ? ', ...' : '') : 'the bundle (incomplete)'}; take them with \`cni-rewind backup\` or pass --no-disk-snapshots`,
    });
  } else {
    checks.push({ name: 'disk-snapshots', ok: true, blocking: false, detail: 'waived (--no-disk-snapshots): only resources can be restored' });
  }
  return checks;
}

/** Cluster health: nodes Ready, and PDBs that would block a drain. `known`: what doctor need not read again (plan's). */
export async function checkCluster(
  client: KubeClient,
  rebootNodes: boolean,
  known: Parameters<typeof loadLiveState>[2] = {},
): Promise<{ checks: PreflightCheck[]; nodes: string[]; /** The live Calico state doctor read (for checkTargetPools), if it could. */ state?: CalicoState }> {
  const nodes = await client.listAll(K.node);
  const notReady = nodes.filter((n) => !n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True')).map((n) => n.metadata.name);
  const checks: PreflightCheck[] = [
    {
      name: 'nodes-ready',
      ok: notReady.length === 0,
      blocking: true,
      detail: notReady.length ? `not Ready: ${notReady.join(', ')}` : `${nodes.length} nodes Ready`,
    },
  ];
  const pdbs = await client.listAll(K.pdb);
  const blocking = pdbs.filter((p) => (p.status?.disruptionsAllowed ?? 0) === 0 && (p.status?.expectedPods ?? 0) > 0);
  checks.push({
    name: 'pdbs-blocking-drain',
    ok: blocking.length === 0,
    blocking: rebootNodes,
    detail: blocking.length
      ? `PDBs allowing no disruption (a drain would wait on them): ${blocking.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).join(', ')}`
      : 'no PDB blocks a drain',
  });
  // Doctor's checks, listed but not blocking: the cluster a downgrade rescues is often the one doctor flags (#9100).
  let state: CalicoState | undefined;
  try {
    state = await loadLiveState(client, undefined, known);
    const errors = runChecks(state).filter((f) => f.severity === 'error');
    checks.push({
      name: 'doctor',
      ok: errors.length === 0,
      blocking: false,
      detail: errors.length
        ? `doctor reports ${errors.length} error(s): ${errors
            .slice(0, 5)
            .map((f) => `${f.title}${f.objects.length ? ` (${f.objects.slice(0, 3).join(', ')})` : ''}`)
            .join('; ')}; see cni-rewind doctor`
        : 'doctor finds no errors',
    });
  } catch (err) {
    checks.push({ name: 'doctor', ok: false, blocking: false, detail: `doctor could not run: ${(err as Error).message}` });
  }
  return { checks, nodes: nodes.map((n) => n.metadata.name), state };
}

export function failedBlocking(checks: PreflightCheck[]): PreflightCheck[] {
  return checks.filter((c) => c.blocking && !c.ok);
}

/** Throw the documented refusal (exit 5) when a blocking check failed. */
export function refuseOnFailure(checks: PreflightCheck[], what: string): void {
  const bad = failedBlocking(checks);
  if (bad.length === 0) return;
  throw new RefusedError(`${what} refused by preflight: ${bad.map((c) => `${c.name}: ${c.detail}`).join('; ')}`);
}

export async function openPlanBundle(p: string): Promise<Bundle> {
  try {
    return await openBundle(p);
  } catch (err) {
    if (isErrorKind(err, 'bad-input')) throw new RefusedError(`the plan's bundle cannot be used: ${err.message}`);
    throw err;
  }
}

/**
 * The pools as the TARGET operator will treat them, after the plan's Installation transform: an upgrade to 3.28
 * with a disabled pool listed in the Installation re-enables it (calico#9100), and nothing after the operator
 * resumes can stop that. Blocking, with doctor's fix (stop allocations through the Installation entry), so a plan
 * is never the cause of the incident it exists to prevent.
 */
export async function checkTargetPools(
  client: KubeClient,
  target: Release,
  transform: InstallationTransform,
  /** The live state checkCluster already read: the same objects, not a second read of every pool and IPAM object. */
  loaded?: CalicoState,
): Promise<PreflightCheck> {
  const state = loaded ?? (await loadLiveState(client));
  return targetPoolsCheck(state, target, transform);
}

export function targetPoolsCheck(state: CalicoState, target: Release, transform: InstallationTransform): PreflightCheck {
  const inst = installationOf(state);
  const planned: CalicoState = inst ? { ...state, objects: { ...state.objects, [KEYS.installations]: [transformInstallation(inst, transform)] } } : state;
  const errors = runChecks(planned, { target, checks: poolChecks }).filter((f) => f.severity === 'error');
  return {
    name: 'target-operator-pools',
    ok: errors.length === 0,
    blocking: true,
    detail: errors.length
      ? `with ${target.version}'s operator: ${errors.map((f) => `${f.title}. Fix: ${f.fix}`).join(' | ')}`
      : `${target.version}'s operator leaves the IP pools as they are`,
  };
}
