#!/usr/bin/env node
/**
 * `npm run cluster -- up|down|status`: the local real control plane used by tests and the demo.
 */
import { LocalCluster } from './cluster.js';

async function main(): Promise<number> {
  const cmd = process.argv[2] ?? 'status';
  const name = process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e';
  const cluster = new LocalCluster({ name, log: (l) => process.stderr.write(`[cluster] ${l}\n`) });
  switch (cmd) {
    case 'up': {
      const st = await cluster.up();
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
      return up ? 0 : 1;
    }
    default:
      console.error(`usage: npm run cluster -- up|down|status`);
      return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(4);
  },
);
