/**
 * One resource restore by cni-rewind's engine (what `restore --resources --kinds IPAMHandle --yes` runs), in a
 * process of its own so bench/restore.ts can take its peak RSS with GNU time. Prints one JSON line: ok, the first
 * failures, RestoreResult.timings and the client's request counts (KubeClient.stats).
 *
 *   node dist/bench/restore-worker.js KUBECONFIG BUNDLE CONCURRENCY
 */
import { openBundle } from '../src/bundle/reader.js';
import { preferSmallHeap } from '../src/core/heap.js';
import { Reporter, type IoHost } from '../src/io/host.js';
import { KubeClient } from '../src/kube/client.js';
import { restoreResources } from '../src/restore/restore.js';

async function main(): Promise<void> {
  const [kubeconfig, bundlePath, concurrency] = process.argv.slice(2);
  // As every command's handler does (src/cli/context.ts).
  preferSmallHeap();
  const client = await KubeClient.connect({ kubeconfig: kubeconfig! });
  const bundle = await openBundle(bundlePath!);
  // Messages go nowhere (a terminal would show them and forget them): the engine's memory, not a log's.
  const host: IoHost = { notify: () => {}, progress: () => {}, confirm: async () => true };
  const res = await restoreResources(client, bundle, { kinds: ['IPAMHandle'], concurrency: Number(concurrency) }, new Reporter(host));
  await bundle.close();
  client.close();
  process.stdout.write(JSON.stringify({ ok: res.ok, failures: res.failures.slice(0, 3), timings: res.timings, stats: client.stats }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`bench/restore-worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
