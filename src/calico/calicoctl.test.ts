import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RefusedError } from '../core/errors.js';
import { checkCalicoctlVersion, kubernetesDatastoreEnv, runCalicoctl } from './calicoctl.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-calicoctl-'));
/** A stand-in for calicoctl's command line only: what this module parses and passes, not Calico's behaviour. */
function script(name: string, body: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

describe('running calicoctl for the datastore migration', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it("takes calicoctl of the cluster's release only, from what `calicoctl version` prints without a datastore", async () => {
    const ctl = script('v3281', 'echo "Client Version:    v3.28.1"; echo "Git commit:        abc"; echo "Unable to retrieve Cluster Version" >&2; exit 1');
    await expect(checkCalicoctlVersion(ctl, 'v3.28.1')).resolves.toBeUndefined();
    await expect(checkCalicoctlVersion(ctl, '3.28.1')).resolves.toBeUndefined();
    await expect(checkCalicoctlVersion(ctl, 'v3.29.7')).rejects.toThrow(/calicoctl v3.28.1, and the cluster runs Calico v3.29.7/);
    await expect(checkCalicoctlVersion(script('other', 'echo hello'), 'v3.28.1')).rejects.toBeInstanceOf(RefusedError);
  });

  it("passes the datastore it is given and none of the caller's own Calico settings", async () => {
    process.env.DATASTORE_TYPE = 'etcdv3';
    process.env.ETCD_ENDPOINTS = 'https://elsewhere:2379';
    process.env.K8S_API_ENDPOINT = 'https://elsewhere:6443';
    const env = script('env', 'env | grep -E "^(DATASTORE_TYPE|ETCD_|K8S_|KUBECONFIG)" | sort; echo "args: $*"');
    const out = await runCalicoctl(env, ['datastore', 'migrate', 'unlock'], kubernetesDatastoreEnv({ kubeconfig: '/k/config', context: 'ctx' }), 'unlock');
    expect(out.trim().split('\n')).toEqual([
      'DATASTORE_TYPE=kubernetes',
      'K8S_CURRENT_CONTEXT=ctx',
      'KUBECONFIG=/k/config',
      'args: datastore migrate unlock --allow-version-mismatch',
    ]);
  });

  it("fails in one line with the last line of calicoctl's message", async () => {
    const failing = script(
      'fail',
      'echo "Importing IPAM resources"; echo "Datastore already has Calico resources: Found existing Calico IPPool resource." >&2; exit 1',
    );
    await expect(runCalicoctl(failing, [], {}, 'calicoctl datastore migrate import')).rejects.toThrow(
      'calicoctl datastore migrate import failed: Datastore already has Calico resources: Found existing Calico IPPool resource.',
    );
  });
});
