/**
 * Bundles in object storage, on moto's S3 and the real control plane:
 * - export --out s3://..., every Calico CRD deleted, restore s3://.../<id> --resources --yes from another working
 *   directory brings everything back (diff exits 0; every IPAM allocation is back, since each has its running
 *   pod, and each pod holds its address); list and verify take the s3:// location;
 * - an upload that never completed (a multipart upload left open, as a killed export leaves it) is never listed;
 * - prune --keep-last 2 on s3:// leaves exactly the two newest bundles.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, CreateMultipartUploadCommand, PutObjectCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { startMoto, type Moto } from '../support/moto.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, deleteNodes, operatorType, resetCalico, runCli, testClient } from './helpers.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

const BUCKET = 'cnr-backups';
const CALICO_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io'];
const NODES = ['s3p-node-1', 's3p-node-2', 's3p-node-3'];

describe('bundles in S3 (moto)', () => {
  let client: KubeClient;
  let moto: Moto;
  let env: Record<string, string>;
  let s3: S3Client;
  let population: Population;

  beforeAll(async () => {
    moto = await startMoto();
    env = { ...moto.env, AWS_ENDPOINT_URL_S3: moto.url };
    s3 = new S3Client({ region: 'us-east-1', endpoint: moto.url, forcePathStyle: true, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    client = await testClient();
    await resetCalico(client);
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    population = await populateCalico(client, { prefix: 's3p', nodes: NODES });
    // The pods behind the population's allocations, running with those addresses on their nodes: restore puts back
    // only allocations a running pod uses (src/restore/ipam-use.ts).
    await createFakeNodes(
      client,
      NODES.map((name) => ({ name })),
    );
    await podsForPopulation(client, population);
    // The 3.28 operator writes allowedUses into the Installation pool entries itself; kwok runs no operator, so do it.
    const installation = operatorType('installations', 'Installation');
    const inst = await client.get(installation, undefined, 'default');
    inst.spec.calicoNetwork.ipPools[0].allowedUses = ['Workload', 'Tunnel'];
    await client.replace(installation, inst);
  }, 600_000);
  afterAll(async () => {
    if (population) await client?.delete(K.namespace, undefined, population.namespace).catch(() => undefined);
    if (client) await deleteNodes(client, 's3p-node-');
    client?.close();
    s3?.destroy();
    await moto?.stop();
  });

  it('export --out s3://, all Calico CRDs deleted, restore s3://.../<id> from another directory, diff exits 0', async () => {
    const ex = await runCli(['export', '--out', `s3://${BUCKET}/prod`, '-o', 'json'], { env });
    expect(ex.code, ex.stderr).toBe(0);
    const { path: url, id } = JSON.parse(ex.stdout);
    expect(url).toBe(`s3://${BUCKET}/prod/${id}.tar.gz`);

    const listed = await runCli(['list', `s3://${BUCKET}/prod`, '-o', 'json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).map((b: any) => b.id)).toEqual([id]);
    const verified = await runCli(['verify', `s3://${BUCKET}/prod/${id}`], { env });
    expect(verified.code, verified.stderr).toBe(0);

    const crds = (await client.listAll(K.crd)).filter((x) => CALICO_GROUPS.includes(x.spec.group));
    for (const x of crds) await client.delete(K.crd, undefined, x.metadata.name);
    await client.waitFor(
      'Calico CRDs to be gone',
      async () => ((await client.listAll(K.crd)).some((x) => CALICO_GROUPS.includes(x.spec.group)) ? undefined : true),
      { timeoutMs: 180_000 },
    );

    const elsewhere = mkdtempSync(path.join(os.tmpdir(), 'cnr-s3-cwd-'));
    const rs = await runCli(['restore', `s3://${BUCKET}/prod/${id}`, '--resources', '--yes'], { env, cwd: elsewhere });
    expect(rs.code, rs.stderr + rs.stdout.slice(-2000)).toBe(0);
    expect(rs.stdout + rs.stderr).not.toContain('not put back');
    const d = await runCli(['diff', `s3://${BUCKET}/prod/${id}`], { env, cwd: elsewhere });
    expect(d.code, d.stdout.slice(-2000) + d.stderr).toBe(0);
    await expectPodAddressesHeld(client, populationPods(population).length);
  });

  it('a bundle whose upload never completed is not listed; prune --keep-last 2 leaves the two newest', async () => {
    // What a killed export leaves behind: a multipart upload begun, a part sent, never completed.
    const open = await s3.send(
      new CreateMultipartUploadCommand({
        Bucket: BUCKET,
        Key: 'nightly/killed.tar.gz',
        Metadata: { 'bundle-id': 'killed', 'created-at': new Date().toISOString() },
      }),
    );
    await s3.send(
      new UploadPartCommand({ Bucket: BUCKET, Key: 'nightly/killed.tar.gz', UploadId: open.UploadId, PartNumber: 1, Body: Buffer.alloc(5 * 1024 * 1024, 1) }),
    );
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const ex = await runCli(['export', '--out', `s3://${BUCKET}/nightly`, '-o', 'json'], { env });
      expect(ex.code, ex.stderr).toBe(0);
      ids.push(JSON.parse(ex.stdout).id);
      await new Promise((r) => setTimeout(r, 1100)); // distinct createdAt seconds
    }
    const listed = await runCli(['list', `s3://${BUCKET}/nightly`, '-o', 'json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).map((b: any) => b.id)).toEqual([...ids].reverse());

    const pruned = await runCli(['prune', `s3://${BUCKET}/nightly`, '--keep-last', '2', '-o', 'json'], { env });
    expect(pruned.code, pruned.stderr).toBe(0);
    const after = await runCli(['list', `s3://${BUCKET}/nightly`, '-o', 'json'], { env });
    expect(JSON.parse(after.stdout).map((b: any) => b.id)).toEqual([ids[2], ids[1]]);
  });

  it('issue 32: an object that only claims to be a bundle dated 2099 pushes out no real one', async () => {
    const ex = await runCli(['export', '--out', `s3://${BUCKET}/hostile`, '-o', 'json'], { env });
    expect(ex.code, ex.stderr).toBe(0);
    const { id } = JSON.parse(ex.stdout);
    await new Promise((r) => setTimeout(r, 1100)); // a later LastModified second
    await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'hostile/planted.tar.gz',
        Body: 'not a bundle.',
        Metadata: { 'bundle-id': 'planted', 'created-at': '2099-01-01T00:00:00.000Z', complete: 'true' },
      }),
    );
    const pruned = await runCli(['prune', `s3://${BUCKET}/hostile`, '--keep-last', '1', '-o', 'json'], { env });
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stderr).toMatch(/planted\.tar\.gz does not verify, so it is not counted/);
    const after = await runCli(['list', `s3://${BUCKET}/hostile`, '-o', 'json'], { env });
    expect(
      JSON.parse(after.stdout)
        .map((b: any) => b.id)
        .sort(),
    ).toEqual([id, 'planted'].sort());
  });

  it('issue 32: an s3:// object that is not a bundle is refused from its first bytes, naming its URL', async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'junk/planted.tar.gz', Body: Buffer.alloc(32 * 1024 * 1024, 'x') }));
    const v = await runCli(['verify', `s3://${BUCKET}/junk/planted.tar.gz`], { env });
    expect(v.code, v.stderr).toBe(2);
    expect(v.stderr).toMatch(/cni-rewind: s3:\/\/cnr-backups\/junk\/planted\.tar\.gz is not a bundle/);
    expect(v.stderr).not.toMatch(/cni-rewind-s3-/);
  });
});
