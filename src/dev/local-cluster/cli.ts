#!/usr/bin/env node
/**
 * `npm run cluster -- up [--calico VERSION [--install operator|manifest]] | down | status`: the local real
 * control plane used by tests and the demo; with --calico, that Calico release installed and its real
 * control-plane programs running (calico-supervisor.ts).
 */
import { KubeClient } from '../../kube/client.js';
import { installCalicoRelease, type CalicoInstallMode } from './calico-install.js';
import { LocalCluster } from './cluster.js';

const USAGE = 'usage: npm run cluster -- up [--calico VERSION [--install operator|manifest]] | down | status';

export function parseUpArgs(args: string[]): { calico?: string; install: CalicoInstallMode } {
  let calico: string | undefined;
  let install: CalicoInstallMode = 'operator';
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
      if (v !== 'operator' && v !== 'manifest') throw new UsageError(`--install takes operator or manifest, not "${v}"`);
      install = v;
    } else throw new UsageError(`unknown option ${args[i]}`);
  }
  if (!calico && args.some((a) => a.startsWith('--install'))) throw new UsageError('--install needs --calico VERSION');
  return { calico, install };
}

class UsageError extends Error {}

async function main(): Promise<number> {
  const cmd = process.argv[2] ?? 'status';
  const name = process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e';
  const log = (l: string) => process.stderr.write(`[cluster] ${l}\n`);
  const cluster = new LocalCluster({ name, log });
  switch (cmd) {
    case 'up': {
      const opts = parseUpArgs(process.argv.slice(3));
      const st = await cluster.up();
      if (opts.calico) {
        const client = await KubeClient.connect({ kubeconfig: st.kubeconfig });
        try {
          await installCalicoRelease(client, opts.calico, opts.install, log);
        } finally {
          client.close();
        }
        await cluster.startCalico({ nodeSide: true });
        log(
          'the Calico programs, calico-node per node and the CNI plugin per pod start as the installed objects ask for them (a first build takes minutes; see the supervisor log)',
        );
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
      if (err instanceof UsageError) {
        console.error(`cluster: ${err.message}\n${USAGE}`);
        process.exit(2);
      }
      console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(4);
    },
  );
}
