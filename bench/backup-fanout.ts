/**
 * Benchmark (not a test): wall time of `backup` (export + snapshots) for 1, 50 and 200 nodes whose machines are
 * moto EC2 instances, with the bounded concurrent fan-out vs a sequential loop over the nodes (concurrency 1).
 *
 *   npm run build && CNI_REWIND_CLUSTER_NAME=<x> CNI_REWIND_E2E_PORT_BASE=<p> npm run cluster -- up
 *   KUBECONFIG=... node dist/bench/backup-fanout.js [sizes=1,50,200] [concurrency=50] [sequential sizes=1,50,200]
 *
 * Needs moto (test/requirements.txt). moto answers every call at once and completes snapshots immediately, so this
 * measures cni-rewind's own overhead and the API round trips, not EBS snapshot speed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EC2Client } from '@aws-sdk/client-ec2';
import { backup } from '../src/backup/backup.js';
import { emptyConfig } from '../src/config/config.js';
import { emptyMapping } from '../src/config/mapping.js';
import { Reporter, silentHost } from '../src/io/host.js';
import { K } from '../src/kube/builtin.js';
import { KubeClient } from '../src/kube/client.js';
import { createFakeNodes } from '../src/local-cluster/nodes.js';
import { runMotoInstances, startMoto } from '../test/support/moto.js';

const PREFIX = 'cnr-bench-';
const sizes = (process.argv[2] ?? '1,50,200').split(',').map(Number);
const concurrency = Number(process.argv[3] ?? 50);
const sequentialSizes = (process.argv[4] ?? '1,50,200').split(',').map(Number);

async function main() {
  const moto = await startMoto();
  Object.assign(process.env, moto.env, { AWS_ENDPOINT_URL_EC2: moto.url });
  const ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
  const client = await KubeClient.connect({});
  const dir = mkdtempSync(path.join(tmpdir(), 'cnr-bench-'));
  const rows: string[] = [];
  try {
    for (const n of sizes) {
      for (const n2 of await client.listAll(K.node)) if (n2.metadata.name.startsWith(PREFIX)) await client.delete(K.node, undefined, n2.metadata.name);
      await moto.reset();
      const ids = await runMotoInstances(ec2, n);
      await createFakeNodes(client, ids.map((id, i) => ({ name: `${PREFIX}${i}`, providerID: `aws:///us-east-1a/${id}`, labels: { 'cnr-bench': 'yes' }, ipIndex: (i % 250) + 1 })), { waitReady: false });
      const modes: [string, number][] = [[`concurrent (${concurrency})`, concurrency]];
      if (sequentialSizes.includes(n)) modes.push(['sequential loop', 1]);
      for (const [label, c] of modes) {
        const t0 = process.hrtime.bigint();
        const r = await backup(
          client,
          { selector: 'cnr-bench=yes', out: path.join(dir, `b-${n}-${c}`), snapshotTimeoutMs: 600_000, concurrency: c, config: { ...emptyConfig(), providers: { aws: { pollSeconds: 1 } } }, mapping: emptyMapping() },
          new Reporter(silentHost),
        );
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        if (!r.complete || r.snapshots.length !== n * 2) throw new Error(`backup of ${n} nodes incomplete`);
        const row = `| ${n} | ${label} | ${s.toFixed(1)} s | ${r.snapshots.length} |`;
        rows.push(row);
        console.log(row);
      }
    }
  } finally {
    for (const n2 of await client.listAll(K.node)) if (n2.metadata.name.startsWith(PREFIX)) await client.delete(K.node, undefined, n2.metadata.name);
    client.close();
    ec2.destroy();
    await moto.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(['', '| nodes | mode | wall time | snapshots |', '|---|---|---|---|', ...rows].join('\n'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
