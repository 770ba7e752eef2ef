/**
 * Fan-out: one backup over 120 nodes whose instances live in moto, with EC2 throttling injected by a stand-in
 * proxy (moto never throttles): every snapshot is made and recorded, and throttled calls are retried, not fatal;
 * CreateSnapshots answers lost on the way back (the call was done) are retried without making a second set.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DescribeSnapshotsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { runMotoInstances, startMoto, startThrottlingProxy, type Moto, type ThrottlingProxy } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-fan-';
const COUNT = 120;

describe(`backup fan-out over ${COUNT} nodes (moto, throttling injected)`, () => {
  let moto: Moto;
  let proxy: ThrottlingProxy;
  let ec2: EC2Client;
  let client: KubeClient;
  let ids: string[] = [];

  beforeAll(async () => {
    moto = await startMoto();
    proxy = await startThrottlingProxy(moto.url, { every: 7, loseAnswer: { action: 'CreateSnapshots', every: 15 } });
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    client = await testClient();
    await deleteNodes(client, PREFIX);
    ids = await runMotoInstances(ec2, COUNT);
    await createFakeNodes(
      client,
      ids.map((id, i) => ({
        name: `${PREFIX}${String(i).padStart(3, '0')}`,
        providerID: `aws:///us-east-1a/${id}`,
        labels: { 'cnr-test': 'fanout' },
        ipIndex: (i % 250) + 1,
      })),
      { waitReady: false },
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    ec2?.destroy();
    await proxy?.close();
    await moto?.stop();
  });

  it('snapshots every volume of every node concurrently, retrying throttled calls', { timeout: 900_000 }, async () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-fan-')), 'b');
    const r = await runCli(['backup', '--selector', 'cnr-test=fanout', '--out', out, '--concurrency', '50', '-o', 'json'], {
      env: { ...moto.env, AWS_ENDPOINT_URL_EC2: proxy.url, NODE_NO_WARNINGS: '1' },
    });
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    // The per-node table fills stderr's tail; the manifest's notes say which node failed and why.
    expect(r.code, `${(manifest.notes ?? []).join('\n')}\n${r.stderr.slice(-1500)}`).toBe(0);
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots).toHaveLength(COUNT * 2);
    expect(new Set(manifest.snapshots.map((s: any) => s.machine))).toEqual(new Set(ids));
    expect(manifest.snapshots.every((s: any) => s.state === 'completed')).toBe(true);
    // Throttling really happened and was absorbed.
    expect(proxy.throttled).toBeGreaterThan(10);
    // CreateSnapshots calls whose answer was lost were done: their retry adopted those snapshots, made none twice.
    expect(proxy.lost).toBeGreaterThan(3);
    const snaps = await ec2.send(new DescribeSnapshotsCommand({ Filters: [{ Name: 'tag:cni-rewind/bundle-id', Values: [manifest.id] }] }));
    expect(snaps.Snapshots).toHaveLength(COUNT * 2);
    console.log(
      `fan-out: ${COUNT} nodes, ${manifest.snapshots.length} snapshots, ${proxy.throttled} throttled answers retried, ${proxy.lost} lost CreateSnapshots answers, ${proxy.forwarded} calls forwarded`,
    );
  });
});
