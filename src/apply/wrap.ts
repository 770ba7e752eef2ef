/**
 * `wrap -- COMMAND`: back up, run any risky command (kubectl apply/delete, helm upgrade, a script), then check
 * that Calico is still healthy and that its data is still there; if not, show the damage and how to restore, or
 * restore the resources right away.
 */
import { spawn } from 'node:child_process';
import { openBundle } from '../bundle/reader.js';
import { CALICO_CRD_GROUP, CALICO_V3_GROUP, OPERATOR_DEPLOYMENT, OPERATOR_GROUP, OPERATOR_NAMESPACE } from '../calico/knowledge.js';
import { etcdKindOf, roleOf } from '../calico/etcd-datastore.js';
import { operatorInstallCommands } from '../calico/release.js';
import { diffBundle, type Ref } from '../diff/diff.js';
import { loadLiveState, runChecks, type Finding } from '../doctor/doctor.js';
import { BadInputError, errorMessage, isErrorKind, RefusedError } from '../core/errors.js';
import { exportBundle } from '../export/export.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { restoreResources } from '../restore/restore.js';
import { RUNTIME_KINDS } from '../plan/rules.js';
import type { HelmGiven } from './helm-steps.js';
import { helmBefore, helmRevisionsAdded, helmRollbackCommand, rollBackHelm, type HelmBefore } from './wrap-helm.js';

export interface WrapOptions {
  command: string[];
  restoreOnFailure: boolean;
  /** Send the command's stdout to our stderr (with -o json|yaml, so stdout stays machine-readable). */
  commandStdoutToStderr?: boolean;
  out?: string;
  excludeSecrets?: boolean;
  /** Take the bundle another way (`backup` with disk snapshots); default: export only. */
  takeBackup?: () => Promise<{ path: string; diskSnapshots: number }>;
  /** Passed to the export and the restore: aborted = they stop as they do on their own. */
  signal?: AbortSignal;
  /**
   * Told when the user's command starts and ends. The command shares our terminal, so a Ctrl-C reaches it too:
   * the caller lets the command decide and keeps checking Calico after it (the CLI ignores SIGINT meanwhile).
   */
  onCommandRunning?: (running: boolean) => void;
  /** The helm program and cluster flags a Helm-installed operator is rolled back with (wrap-helm.ts). */
  helm?: HelmGiven;
}

export interface WrapResult {
  bundle: { path: string; id: string; diskSnapshots: number };
  command: { argv: string[]; exitCode: number; signal?: string };
  check: {
    healthy: boolean;
    /** Calico data objects in the bundle that are gone from the cluster. */
    lost: Ref[];
    /** Calico objects that differ from the bundle (may be intended by the command). */
    changed: { ref: Ref; diff: string }[];
    /** Doctor findings of severity error. */
    errors: Pick<Finding, 'id' | 'title' | 'objects' | 'fix'>[];
    problem?: string;
  };
  restoreCommand: string;
  /** refused: a safety check of the restore said no (exit 5); nothing was restored. */
  restored?: { ok: boolean; failures: { id: string; reason: string }[]; error?: string; refused?: boolean };
  /**
   * What to run, in order, when Calico is not healthy and was not restored: the restore command, preceded by the
   * commands that install the tigera operator again when the command removed it (its finalizers hold the deleted
   * Calico objects, and only it removes them: a restore without it is refused).
   */
  recovery: string[];
  /** A Helm-installed operator whose release the command gave a new revision, when Calico then needed restoring. */
  helm?: { release: string; namespace: string; revisionBefore?: number; newestAfter: number; rollback?: string; rolledBack?: boolean };
}

/** The user's Calico data: custom resources of the Kubernetes datastore, or (etcd datastore) v3 kinds that are the user's config. */
const isData = (r: Ref) => {
  const group = r.apiVersion.split('/')[0]!;
  if (group === CALICO_V3_GROUP) {
    const kind = etcdKindOf(r.kind);
    return !!kind && roleOf(kind, r.name) === 'config';
  }
  return [CALICO_CRD_GROUP, OPERATOR_GROUP].includes(group) && !RUNTIME_KINDS.has(r.kind);
};

export async function wrap(client: KubeClient, opts: WrapOptions, reporter: Reporter): Promise<WrapResult> {
  if (!opts.command.length) throw new BadInputError('wrap needs a command after --, e.g. cni-rewind wrap -- kubectl apply -f calico.yaml');
  const backup = opts.takeBackup
    ? await opts.takeBackup()
    : { ...(await exportBundle(client, { out: opts.out, excludeSecrets: opts.excludeSecrets, signal: opts.signal }, reporter)), diskSnapshots: 0 };
  if (!opts.takeBackup)
    reporter.warn(
      'CNR_WRAP_EXPORT_ONLY',
      'backed up Calico resources only (no disk snapshots); use --disk-snapshots to snapshot node disks through their providers',
    );
  const bundle = await openBundle(backup.path);
  const restoreCommand = `cni-rewind restore ${backup.path} --resources`;
  const helm = await helmBefore(client).catch((err: unknown) => {
    reporter.warn(
      'CNR_WRAP_HELM_UNREAD',
      `Helm's record of the tigera-operator release could not be read (${errorMessage(err)}): a restore will not roll it back`,
    );
    return undefined;
  });
  try {
    reporter.info('CNR_WRAP_RUN', `backup ${bundle.manifest.id} taken; running: ${opts.command.join(' ')}`);
    opts.onCommandRunning?.(true);
    const command = await run(opts.command, !!opts.commandStdoutToStderr).finally(() => opts.onCommandRunning?.(false));
    reporter.info('CNR_WRAP_EXIT', `command exited with ${command.signal ? `signal ${command.signal}` : `code ${command.exitCode}`}; checking Calico`);

    const check: WrapResult['check'] = { healthy: true, lost: [], changed: [], errors: [] };
    try {
      const diff = await diffBundle(client, bundle, {}, reporter);
      // An object that moved (another namespace or name) is gone from where the backup had it.
      check.lost = [...diff.onlyInBundle, ...diff.moved.map((m) => m.from)].filter(isData);
      check.changed = diff.changed.filter((c) => isData(c.ref));
      const state = await loadLiveState(client);
      check.errors = runChecks(state)
        .filter((f) => f.severity === 'error')
        .map((f) => ({ id: f.id, title: f.title, objects: f.objects, fix: f.fix }));
    } catch (err) {
      check.problem = `the check itself failed: ${errorMessage(err)}`;
    }
    check.healthy = !check.problem && check.lost.length === 0 && check.errors.length === 0;
    const result: WrapResult = {
      bundle: { path: backup.path, id: bundle.manifest.id, diskSnapshots: backup.diskSnapshots },
      command,
      check,
      restoreCommand,
      recovery: [],
    };
    if (!check.healthy || command.exitCode !== 0) {
      reporter.warn('CNR_WRAP_UNHEALTHY', `after the command: ${describe(check, command)}`);
      result.helm =
        helm &&
        (await helmChange(client, helm).catch((err: unknown) => {
          reporter.warn('CNR_WRAP_HELM_UNREAD', `Helm's record of release ${helm.namespace}/${helm.release} could not be read again (${errorMessage(err)})`);
          return undefined;
        }));
      if (opts.restoreOnFailure) {
        try {
          // The release goes back first: the restore then finds the objects of the revision Helm says is deployed.
          if (result.helm) result.helm.rolledBack = await rollBack(helm!, result.helm, opts.helm ?? {}, reporter);
          reporter.warn('CNR_WRAP_RESTORE', `restoring Calico resources from ${bundle.manifest.id} (--restore-on-failure)`);
          const r = await restoreResources(client, bundle, { existing: 'update', dropUnknownFields: true, signal: opts.signal }, reporter);
          result.restored = { ok: r.failures.length === 0, failures: r.failures.map((f) => ({ id: f.id, reason: f.reason })) };
        } catch (err) {
          result.restored = { ok: false, failures: [], error: errorMessage(err), refused: isErrorKind(err, 'refused') };
        }
      }
      if (!result.restored?.ok) {
        const rollback = result.helm && !result.helm.rolledBack && result.helm.rollback ? [result.helm.rollback] : [];
        result.recovery = [...rollback, ...(await operatorReinstall(client, bundle.manifest.calico)), restoreCommand];
      }
    }
    return result;
  } finally {
    await bundle.close();
  }
}

/** The release's change by the command, when it made a new revision. */
async function helmChange(client: KubeClient, before: HelmBefore): Promise<WrapResult['helm']> {
  const newestAfter = await helmRevisionsAdded(client, before);
  if (newestAfter === undefined) return undefined;
  const rollback = helmRollbackCommand(before);
  return { release: before.release, namespace: before.namespace, revisionBefore: before.deployed, newestAfter, ...(rollback ? { rollback } : {}) };
}

/** Rolls the release back; a release with no revision to go back to refuses the restore (exit 5), naming it. */
async function rollBack(before: HelmBefore, change: NonNullable<WrapResult['helm']>, given: HelmGiven, reporter: Reporter): Promise<boolean> {
  if (!change.rollback)
    throw new RefusedError(
      `Helm release ${before.namespace}/${before.release} had no deployed revision before the command, so it cannot be rolled back; nothing was restored`,
    );
  reporter.warn(
    'CNR_WRAP_HELM_ROLLBACK',
    `the command made revision ${change.newestAfter} of Helm release ${before.namespace}/${before.release}: ${change.rollback}`,
  );
  const done = await rollBackHelm(before, given).catch((err: unknown) => {
    throw new RefusedError(`${errorMessage(err)}; nothing was restored: roll the release back first (${change.rollback})`);
  });
  reporter.info('CNR_WRAP_HELM_ROLLED_BACK', done);
  return true;
}

/** The commands that install the bundle's tigera operator again, when the bundle had one and the cluster has none now. */
async function operatorReinstall(client: KubeClient, calico: { installType: string; version?: string }): Promise<string[]> {
  if (calico.installType !== 'operator' || !calico.version) return [];
  const operator = await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT).catch(() => 'unknown');
  if (operator) return [];
  // The reinstall is refused while the operator's namespace is still being deleted ("unable to create new content in
  // namespace tigera-operator because it is being terminated"); with its objects gone that takes seconds, so wait for
  // it, and when it does not go, make waiting for it the first step.
  const nsGone = async () => ((await client.getOrUndefined(K.namespace, undefined, OPERATOR_NAMESPACE)) ? undefined : true);
  const gone = await client.waitFor(`namespace ${OPERATOR_NAMESPACE} to be gone`, nsGone, { timeoutMs: NAMESPACE_GONE_MS, intervalMs: 500 }).catch(() => false);
  return [...(gone ? [] : [`kubectl wait --for=delete namespace/${OPERATOR_NAMESPACE} --timeout=10m`]), ...operatorInstallCommands(calico.version)];
}

/** How long wrap waits for the deleted operator's namespace to go before it prints the reinstall commands. */
const NAMESPACE_GONE_MS = 120_000;

function describe(check: WrapResult['check'], command: WrapResult['command']): string {
  const parts: string[] = [];
  if (command.exitCode !== 0) parts.push(`the command failed (${command.signal ?? `exit ${command.exitCode}`})`);
  if (check.lost.length) parts.push(`${check.lost.length} Calico objects are gone`);
  if (check.errors.length) parts.push(`doctor errors: ${check.errors.map((e) => e.title).join('; ')}`);
  if (check.problem) parts.push(check.problem);
  return parts.join('; ') || 'healthy';
}

/** Run the user's command with our stdio; Ctrl-C goes to it (we wait for it and then check). */
function run(argv: string[], stdoutToStderr: boolean): Promise<{ argv: string[]; exitCode: number; signal?: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: stdoutToStderr ? [0, 2, 2] : 'inherit' });
    child.on('error', (err) => {
      reject(new BadInputError(`cannot run ${argv[0]}: ${err.message}`));
    });
    child.on('exit', (code, signal) => {
      // A command killed by a signal exits like a shell reports it: 128 + signal number.
      const sigNum = signal ? (({ SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[signal] ?? 1) : 0;
      resolve({ argv, exitCode: code ?? 128 + sigNum, signal: signal ?? undefined });
    });
  });
}
