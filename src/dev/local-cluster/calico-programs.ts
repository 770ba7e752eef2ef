import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../core/package-root.js';
import { buildCacheRoot, buildTimesFile } from './paths.js';

/**
 * Calico's own control-plane programs for the local cluster, built from the upstream release source and cached by
 * version (docs/calico-programs.md): by control-plane/build-calico.sh for the four trees it pins, by
 * build-calico-release.sh for each release in calico-releases.pins. `node-side` (calico-node's start-up and
 * tunnel-address allocator, and the CNI plugin) is built by control-plane/build-calico-node.sh, with a key of its
 * own. Each later script has its own key so that build-calico.sh's, which keys the programs cached first, stays.
 */
export type CalicoProgramKind = 'operator' | 'calico' | 'ipam-driver' | 'node-side';

/**
 * The build script of one program set and what its cache key hashes (first 12 hex digits of one sha256 over them),
 * exactly as the script computes it. A release pinned in control-plane/calico-releases.pins is built by
 * build-calico-release.sh, whose key covers that release's own pin line (adding a release rebuilds nothing else);
 * the four trees pinned in build-calico.sh keep that script's key.
 */
function recipeOf(kind: CalicoProgramKind, tag: string): { args: string[]; hashed: Buffer[] } {
  const dir = path.join(packageRoot(), 'control-plane');
  const read = (...f: string[]) => readFileSync(path.join(dir, ...f));
  if (kind === 'node-side') {
    const script = path.join(dir, 'build-calico-node.sh');
    return { args: [script, tag], hashed: [read('build-calico-node.sh'), read('calico-source.sh'), ...NODE_LITE_FILES.map((f) => read('calico-node', f))] };
  }
  const pin = kind === 'ipam-driver' ? undefined : releasePin(kind, tag);
  if (pin) {
    const script = path.join(dir, 'build-calico-release.sh');
    return { args: [script, kind, tag], hashed: [read('build-calico-release.sh'), read('calico-source.sh'), Buffer.from(`${pin}\n`)] };
  }
  const script = path.join(dir, 'build-calico.sh');
  const hashed = kind === 'ipam-driver' ? [read('build-calico.sh'), read('ipam-driver', 'go.mod'), read('ipam-driver', 'main.go')] : [read('build-calico.sh')];
  return { args: [script, kind, tag], hashed };
}

/** calico-node-lite's sources in the order build-calico-node.sh hashes them (its NODE_LITE_FILES). */
const NODE_LITE_FILES = ['main.go', 'version_startup.go', 'version_buildinfo.go', 'allocator_done_channel.go', 'allocator_context.go'];

let pinsText: string | undefined;

/** The pin line (`kind tag commit sha256`, single spaces) of a release in calico-releases.pins, or undefined. */
function releasePin(kind: CalicoProgramKind, tag: string): string | undefined {
  // Read once per process: the supervisor asks on every tick.
  pinsText ??= readFileSync(path.join(packageRoot(), 'control-plane', 'calico-releases.pins'), 'utf8');
  for (const line of pinsText.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === kind && f[1] === tag) return f.slice(0, 4).join(' ');
  }
  return undefined;
}

/** The Calico tree of the default calicoctl, and of the API server and kube-controllers for 3.27 and 3.28 installs. */
export const CALICO_PROGRAMS_VERSION = 'v3.28.1';

/**
 * Installed Calico minor (the image tag the operator or calico.yaml rendered) -> the pinned Calico tree whose API
 * server and kube-controllers serve it when its own release is not pinned (a patch release no test installs). Each
 * shipped release has its own tree: 3.27.4 too, whose API server gives a Namespace's Profile that Namespace's UID
 * while 3.27.5 and 3.28.1 derive another (the plan finding `v3-uids-change`): served by 3.28.1's programs, as it
 * once was here, the seed's own 3.27.4 -> 3.28.1 path could not show that.
 */
export const CALICO_PROGRAMS_FOR_MINOR: Readonly<Record<string, string>> = {
  'v3.27': 'v3.27.4',
  'v3.28': 'v3.28.1',
  'v3.29': 'v3.29.7',
  'v3.30': 'v3.30.7',
  'v3.31': 'v3.31.7',
  'v3.32': 'v3.32.1',
};

/**
 * Installed calico-node minor -> the pinned tree its node side (calico-node's start-up and tunnel allocator, the CNI
 * plugin) is built from: each minor its own release, 3.27 included. Unlike the API server, these programs write
 * what the installed release writes (start-up's Node, default pools and ClusterInformation calicoVersion, the
 * plugin's IPAM allocations), and the seed's incident is on 3.27.4's: a newer tree would not show it.
 */
export const NODE_SIDE_FOR_MINOR: Readonly<Record<string, string>> = {
  'v3.27': 'v3.27.4',
  'v3.28': 'v3.28.1',
  'v3.29': 'v3.29.7',
  'v3.30': 'v3.30.7',
  'v3.31': 'v3.31.7',
  'v3.32': 'v3.32.1',
};

const minorOf = (tag: string | undefined): string | undefined => {
  const m = /^v?(\d+)\.(\d+)\./.exec(tag ?? '');
  return m ? `v${m[1]}.${m[2]}` : undefined;
};

/**
 * The release's own tree when calico-releases.pins pins exactly that tag (3.26.5, 3.27.5, 3.28.5, 3.31.7, 3.32.1:
 * each release on its own programs, and a new release needs only its pin line), else undefined. A vendor suffix
 * (`v3.28.5-gke.1`) is the same release.
 */
function ownTree(tag: string | undefined): string | undefined {
  const m = /^v?(\d+\.\d+\.\d+)/.exec(tag ?? '');
  return m && releasePin('calico', `v${m[1]}`) ? `v${m[1]}` : undefined;
}

/** The Calico tree for an installed image tag (`v3.30.7`): its own when pinned, else its minor's, else undefined. */
export function calicoProgramsFor(tag: string | undefined): string | undefined {
  const minor = minorOf(tag);
  return ownTree(tag) ?? (minor ? CALICO_PROGRAMS_FOR_MINOR[minor] : undefined);
}

/** The tree of the node side for a calico-node image tag: its own when pinned, else its minor's, else undefined. */
export function nodeSideFor(tag: string | undefined): string | undefined {
  const minor = minorOf(tag);
  return ownTree(tag) ?? (minor ? NODE_SIDE_FOR_MINOR[minor] : undefined);
}

/** Operator tags the build script has pinned sources for (image tag -> buildable). */
export const BUILDABLE_OPERATORS = ['v1.30.11', 'v1.32.10', 'v1.32.12', 'v1.34.3', 'v1.34.13', 'v1.36.16', 'v1.38.13', 'v1.40.15', 'v1.42.3'] as const;

/**
 * True when control-plane/build-calico.sh would find this program set cached (and not build): its bin directory,
 * keyed by version and the recipe hash exactly as the script computes it, holds the tag commit marker the script
 * writes last. Lets the test run order files by what is already built without running the script.
 */
export function calicoProgramCached(kind: CalicoProgramKind, tag: string): boolean {
  return cachedProgramBin(kind, tag) !== undefined;
}

/** The bin directory build-calico.sh would print for a program set it finds cached, else undefined. */
function cachedProgramBin(kind: CalicoProgramKind, tag: string): string | undefined {
  const hash = createHash('sha256');
  for (const b of recipeOf(kind, tag).hashed) hash.update(b);
  const recipe = hash.digest('hex').slice(0, 12);
  const bin = path.join(buildCacheRoot(), 'calico-programs', `${kind}-${tag}_${recipe}`, 'bin');
  return existsSync(path.join(bin, '.commit')) ? bin : undefined;
}

/**
 * Build (or find cached) one program set and return its bin directory. The build prints a progress line at
 * least every 30 s; those lines go to `log`. Asynchronous so that a supervisor keeps serving while it builds.
 */
export function ensureCalicoProgram(kind: CalicoProgramKind, tag: string, log: (line: string) => void = () => {}): Promise<string> {
  const { args } = recipeOf(kind, tag);
  // Cached: no script to run. A supervisor once waited for ever on a spawned check of a cached operator (rehearsal,
  // cluster-up-ready: 'preparing operator v1.34.3' and no operator for 10 minutes, no child process left); the
  // liveness check in runBuildScript now ends such a wait if the script's process is gone.
  const cached = cachedProgramBin(kind, tag);
  if (cached) return Promise.resolve(cached);
  return runBuildScript(`${kind} ${tag}`, args, log);
}

/** A build whose process vanished without an exit status: worth preparing again (the supervisor does at its next tick). */
export class BuildProcessLostError extends Error {}

/** How often a running build's process is checked for being alive. */
const LIVENESS_INTERVAL_MS = 30_000;

/**
 * Calls `onGone` once process `pid` no longer exists, checking every `intervalMs` (signal 0: no signal sent, only
 * the existence check). Returns the stop function.
 */
export function watchProcessGone(pid: number, onGone: () => void, intervalMs = LIVENESS_INTERVAL_MS): () => void {
  const timer = setInterval(() => {
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') return;
      clearInterval(timer);
      onGone();
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Runs a build script (`bash ...args`) and resolves with the bin directory it prints last on stdout. Rejects when it
 * fails, and when its process is gone with no exit seen one check later: a caller never waits for ever (the hang
 * above). No time limit otherwise: the script may wait silently for the build lock while another build runs.
 */
export function runBuildScript(what: string, args: string[], log: (line: string) => void, intervalMs = LIVENESS_INTERVAL_MS): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let settled = false;
    let stopWatch = () => {};
    const settle = (fn: () => void) => {
      stopWatch();
      if (!settled) fn();
      settled = true;
    };
    if (child.pid)
      stopWatch = watchProcessGone(
        child.pid,
        // Its exit event gets one more interval to arrive before the process counts as lost.
        () =>
          setTimeout(
            () => settle(() => reject(new BuildProcessLostError(`building ${what}: its process (pid ${child.pid}) is gone and no exit was seen`))),
            intervalMs,
          ).unref(),
        intervalMs,
      );
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b: Buffer) => {
      err += b;
      for (const line of b.toString().split('\n')) if (line.startsWith('[calico-build') || /^build-calico(-node)?\.sh:/.test(line)) log(line);
    });
    child.on('error', (e) => settle(() => reject(e)));
    const finish = (code: number | null) =>
      settle(() => {
        if (code === 0) {
          // The script logs "<step>: done in N s" for a compile it ran (not for a cached build, nor for the time it
          // waited on another build's lock).
          const compiled = [...err.matchAll(/^\[calico-build [\d:]+\] .*: done in (\d+) s$/gm)].reduce((n, m) => n + Number(m[1]), 0);
          if (compiled > 0) recordBuildTime(`Calico ${what}`, compiled);
          const bin = out.trim().split('\n').pop();
          if (bin) return resolve(bin);
          return reject(new Error(`building ${what}: the script exited 0 without naming its bin directory`));
        }
        const last = err
          .trim()
          .split('\n')
          .filter((l) => /^build-calico(-node)?\.sh:/.test(l))
          .pop();
        reject(new Error(`building ${what} failed (exit ${code})${last ? `: ${last}` : ''}`));
      });
    // 'close' comes once the output is read to its end ('exit' may come first); a process the script left behind
    // holding its output open gets 5 s before the output read so far counts.
    child.on('close', (code) => finish(code));
    child.on('exit', (code) => setTimeout(() => finish(code), 5000).unref());
  });
}

function recordBuildTime(what: string, seconds: number): void {
  try {
    appendFileSync(buildTimesFile(), `${Math.floor(Date.now() / 1000)}\t${what}\t${seconds}\n`);
  } catch {
    // only the test run's closing table misses it
  }
}
