#!/usr/bin/env node
/**
 * `npm run cluster -- up [--calico VERSION [--install operator|manifest|helm|helm3] [--datastore kubernetes|etcd]] [--no-wait] [--timeout SECONDS] | down | status`:
 * the local real control plane used by tests and the demo; with --calico, that Calico release installed and its
 * real control-plane programs running (calico-supervisor.ts). `up` returns once what it started is usable
 * (readiness.ts), as `kind create cluster --wait` does, unless --no-wait.
 */
import { KubeClient } from '../../kube/client.js';
import { detectCalico } from '../../calico/detect.js';
import { helmInstallRefusal, installCalicoByHelm } from './calico-helm.js';
import { installCalicoRelease, type CalicoInstallMode } from './calico-install.js';
import { installCalicoEtcdRelease } from './calico-etcd-install.js';
import { LocalCluster } from './cluster.js';
import {
  apiServerConditions,
  calicoConditions,
  nodeSideConditions,
  NotReadyError,
  programRunning,
  waitUntilReady,
  type ReadinessCondition,
} from './readiness.js';

const USAGE =
  'usage: npm run cluster -- up [--calico VERSION [--install operator|manifest|helm|helm3] [--datastore kubernetes|etcd]] [--no-wait] [--timeout SECONDS] | down | status';

/** Long enough for a first build of Calico's programs on 2 cores (the supervisor builds what is not cached). */
const DEFAULT_WAIT_S = 1800;

export interface UpArgs {
  calico?: string;
  install: CalicoInstallMode;
  /** With `--install helm3`: the chart installed by Helm 3 (most clusters' Helm) instead of Helm 4. */
  helmMajor: 3 | 4;
  /** `etcd`: calico-etcd.yaml on the cluster's Calico etcd (calico-etcd-install.ts); a manifest install only. */
  datastore: 'kubernetes' | 'etcd';
  wait: boolean;
  timeoutS: number;
}

export function parseUpArgs(args: string[]): UpArgs {
  let calico: string | undefined;
  let install: CalicoInstallMode = 'operator';
  let helmMajor: 3 | 4 = 4;
  let datastore: UpArgs['datastore'] = 'kubernetes';
  let explicitInstall = false;
  let wait = true;
  let timeoutS = DEFAULT_WAIT_S;
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i]!.split('=', 2) as [string, string | undefined];
    const value = () => {
      const v = inline ?? args[++i];
      if (!v) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    if (flag === '--calico') calico = value();
    else if (flag === '--install') {
      const v = value();
      if (v !== 'operator' && v !== 'manifest' && v !== 'helm' && v !== 'helm3')
        throw new UsageError(`--install takes operator, manifest, helm or helm3, not "${v}"`);
      install = v === 'helm3' ? 'helm' : v;
      if (v === 'helm3') helmMajor = 3;
      explicitInstall = true;
    } else if (flag === '--datastore') {
      const v = value();
      if (v !== 'kubernetes' && v !== 'etcd') throw new UsageError(`--datastore takes kubernetes or etcd, not "${v}"`);
      datastore = v;
    } else if (flag === '--no-wait') wait = false;
    else if (flag === '--timeout') {
      const v = value();
      timeoutS = Number(v);
      if (!Number.isInteger(timeoutS) || timeoutS < 1) throw new UsageError(`--timeout takes whole seconds, not "${v}"`);
    } else throw new UsageError(`unknown option ${args[i]}`);
  }
  if (!calico && args.some((a) => a.startsWith('--install'))) throw new UsageError('--install needs --calico VERSION');
  if (!calico && datastore === 'etcd') throw new UsageError('--datastore needs --calico VERSION');
  if (datastore === 'etcd') {
    // Only calico-etcd.yaml installs Calico on etcd: the operator and its chart keep Calico's data in the Kubernetes API.
    if (explicitInstall && install !== 'manifest') throw new UsageError('--datastore etcd installs calico-etcd.yaml: it takes --install manifest or none');
    install = 'manifest';
  }
  return { calico, install, helmMajor, datastore, wait, timeoutS };
}

/**
 * One progress line on stderr while waiting: rewritten in place on a terminal; in a log, a line each time what is
 * missing changes (not one per poll).
 */
function progressLine(out: NodeJS.WriteStream): {
  round: (missing: { name: string; seen: string }[], elapsedMs: number, total: number) => void;
  end: () => void;
} {
  let last = '';
  let drawn = false;
  return {
    round(missing, elapsedMs, total) {
      if (!missing.length) return;
      const text = `[cluster] waiting (${Math.round(elapsedMs / 1000)} s): ${total - missing.length} of ${total} ready; next: ${missing[0]!.name} (${missing[0]!.seen})`;
      if (out.isTTY) {
        out.write(`\r\x1b[K${text.slice(0, (out.columns || 120) - 1)}`);
        drawn = true;
      } else {
        const what = missing.map((m) => `${m.name} (${m.seen})`).join('; ');
        if (what !== last) out.write(`${text}\n`);
        last = what;
      }
    },
    end() {
      if (drawn) out.write('\r\x1b[K');
      drawn = false;
    },
  };
}

async function waitReady(conditions: ReadinessCondition[], timeoutS: number, log: (l: string) => void): Promise<void> {
  const line = progressLine(process.stderr);
  const started = Date.now();
  try {
    await waitUntilReady(conditions, { timeoutMs: timeoutS * 1000, onRound: (missing, ms) => line.round(missing, ms, conditions.length) });
  } finally {
    line.end();
  }
  log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${conditions.map((c) => c.name).join(', ')}`);
}

class UsageError extends Error {}
/** Well-formed options this cluster cannot honour (a version `--install helm` has no chart for): exit 2, one line. */
class RefusedError extends Error {}

/**
 * How Calico is installed on the cluster now, as cni-rewind's own detection reads it (so it stays true after a test
 * resets Calico or installs it another way): `operator-helm (release tigera-operator/calico, chart tigera-operator
 * v3.28.1, revision 1), Calico v3.28.1`.
 */
async function installLine(kubeconfig: string): Promise<string> {
  const client = await KubeClient.connect({ kubeconfig });
  try {
    const c = await detectCalico(client);
    if (c.installType === 'none') return 'none';
    const h = c.method.helm;
    const helm = h
      ? ` (release ${h.namespace}/${h.release}${h.chart ? `, chart ${h.chart.name} ${h.chart.version}` : ''}${h.revision ? `, revision ${h.revision}` : ''})`
      : '';
    return `${c.method.method}${helm}, Calico ${c.version ?? 'version unknown'}`;
  } catch (err) {
    return `not read (${err instanceof Error ? err.message : String(err)})`;
  } finally {
    client.close();
  }
}

async function main(): Promise<number> {
  const cmd = process.argv[2] ?? 'status';
  const name = process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e';
  const log = (l: string) => process.stderr.write(`[cluster] ${l}\n`);
  const cluster = new LocalCluster({ name, log });
  switch (cmd) {
    case 'up': {
      const opts = parseUpArgs(process.argv.slice(3));
      // Refused before anything starts: a cluster brought up only to find the chart cannot be packaged helps no one.
      const refusal = opts.calico && opts.install === 'helm' ? await helmInstallRefusal(opts.calico) : undefined;
      if (refusal) throw new RefusedError(refusal);
      const st = await cluster.up();
      const client = await KubeClient.connect({ kubeconfig: st.kubeconfig });
      try {
        const conditions = apiServerConditions(() => cluster.isUp());
        if (opts.calico) {
          const etcd = opts.datastore === 'etcd' ? await installCalicoEtcdRelease(client, cluster, opts.calico, log) : undefined;
          if (etcd) log(`Calico's datastore: etcd at ${etcd.endpoint} (CA ${etcd.caFile}, client certificate ${etcd.certFile})`);
          else if (opts.install === 'helm') await installCalicoByHelm(client, opts.calico, st, log, opts.helmMajor);
          else await installCalicoRelease(client, opts.calico, opts.install, log);
          await cluster.startCalico({ nodeSide: true });
          log(
            'the Calico programs, calico-node per node and the CNI plugin per pod start as the installed objects ask for them (a first build takes minutes; see the supervisor log)',
          );
          // On etcd there are no Calico CRDs to wait for: kube-controllers, and the node side's pool in the Calico etcd.
          if (etcd) conditions.push(programRunning(() => cluster.calicoStatus(), 'kubeControllers'));
          else conditions.push(...calicoConditions(client, () => cluster.calicoStatus(), opts.calico, opts.install));
          conditions.push(...nodeSideConditions(client, () => cluster.calicoStatus(), etcd));
        }
        if (opts.wait) await waitReady(conditions, opts.timeoutS, log);
      } finally {
        client.close();
      }
      console.log(`kubeconfig: ${st.kubeconfig}`);
      console.log(`export KUBECONFIG=${st.kubeconfig}`);
      return 0;
    }
    case 'down':
      await cluster.down();
      console.log(`cluster "${name}" stopped`);
      return 0;
    case 'status': {
      const up = await cluster.isUp();
      const st = cluster.readState();
      console.log(up ? `cluster "${name}" is up at ${st!.server}\nexport KUBECONFIG=${st!.kubeconfig}` : `cluster "${name}" is not running`);
      const calico = up ? cluster.calicoStatus() : undefined;
      if (up) console.log(`calico install: ${await installLine(st!.kubeconfig)}`);
      if (calico) console.log(`calico: ${JSON.stringify({ operator: calico.operator, apiserver: calico.apiserver, kubeControllers: calico.kubeControllers })}`);
      if (calico?.nodeSide) console.log(`node side: ${JSON.stringify(calico.nodeSide)}`);
      return up ? 0 : 1;
    }
    default:
      console.error(USAGE);
      return 2;
  }
}

if (process.argv[1] && /local-cluster[\\/]cli\.[jt]s$/.test(process.argv[1])) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      if (err instanceof NotReadyError) {
        console.error(`cluster: ${err.message}`);
        console.error('  the cluster keeps running: see `npm run cluster -- status` and the supervisor log; `down` stops it');
        process.exit(4);
      }
      if (err instanceof RefusedError) {
        console.error(`cluster: ${err.message}`);
        process.exit(2);
      }
      if (err instanceof UsageError) {
        console.error(`cluster: ${err.message}\n${USAGE}`);
        process.exit(2);
      }
      console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(4);
    },
  );
}
