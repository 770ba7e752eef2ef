/**
 * Running the real `helm` (resolved by helm-strategy.ts resolveHelmBinary, never named by a plan file): its output
 * is returned, never shown, and a failure becomes one line with the tail of helm's own message. Values are handed to
 * helm as a file only (helm-steps.ts), so no value reaches an argument list or a message.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import { isLocalChart } from './helm-strategy.js';
import { lastLine } from '../util/last-line.js';

/** How helm reaches the cluster cni-rewind talks to, and where it keeps releases. */
export interface HelmTarget {
  bin: string;
  /** `--kubeconfig`, `--kube-context`, `--kube-as-user`, `--kube-as-group` as this run was given them. */
  kubeArgs: string[];
  storage: 'secret' | 'configmap';
}

export interface HelmOutput {
  stdout: string;
  stderr: string;
}

/** `helm <args>`; throws EnvironmentError `what: <helm's last line>` on a non-zero exit. */
export function runHelm(target: HelmTarget, args: string[], what: string, timeoutMs = 10 * 60_000): Promise<HelmOutput> {
  // Helm's own settings (repositories, registry logins) are the user's; only where releases live is set to where
  // this release's records were found.
  const env = { ...process.env, HELM_DRIVER: target.storage };
  return new Promise((resolve, reject) => {
    execFile(target.bin, [...args, ...target.kubeArgs], { env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new EnvironmentError(`${what} failed: ${lastLine(String(stderr)) || err.message}`, { cause: err }));
      else resolve({ stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** A local chart file's sha256 (a chart folder has none: it is read as it is when apply runs). */
export function chartFileSha256(chart: string): string | undefined {
  if (!isLocalChart(chart) || !chart.endsWith('.tgz')) return undefined;
  try {
    return createHash('sha256').update(readFileSync(chart)).digest('hex');
  } catch {
    return undefined;
  }
}

/**
 * Refuses (exit 5) a chart that is not the tigera-operator chart of `version` (read by `helm show chart`): upgrading a
 * release with another chart or version would make Helm's history lie the other way.
 */
export async function checkChart(target: HelmTarget, chart: string, version: string): Promise<void> {
  const args = ['show', 'chart', chart, ...(isLocalChart(chart) ? [] : ['--version', version])];
  let out: HelmOutput;
  try {
    out = await runHelm({ ...target, kubeArgs: [] }, args, `helm show chart ${chart}`, 5 * 60_000);
  } catch (err) {
    throw new RefusedError(`${(err as Error).message} (pass the target's tigera-operator chart with --helm-chart)`, { cause: err });
  }
  const field = (k: string) => new RegExp(`^${k}:\\s*"?([^"\\s]+)"?\\s*$`, 'm').exec(out.stdout)?.[1];
  const [name, got] = [field('name'), field('version')];
  if (name !== 'tigera-operator' || got?.replace(/^v/, '') !== version.replace(/^v/, '')) {
    throw new RefusedError(`--helm-chart ${chart} is chart ${name ?? '?'} ${got ?? '?'}, not tigera-operator ${version}`);
  }
}
