/** The shipped CronJob backs up encrypted: bundles in object storage hold the Calico Secrets (the operator's CA key). */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';

describe('deploy/cronjob.yaml', () => {
  const cronJob = yaml.load(readFileSync(path.join(packageRoot(), 'deploy', 'cronjob.yaml'), 'utf8')) as any;
  const container = cronJob.spec.jobTemplate.spec.template.spec.containers[0];

  it('backs up with --encrypt and the key from a Secret, never a literal value', () => {
    const script: string = container.args.join(' ');
    expect(script).toMatch(/cni-rewind backup [^&]*--encrypt\b/);
    const key = container.env.find((e: any) => e.name === 'CNI_REWIND_ENCRYPTION_KEY');
    expect(key, 'CNI_REWIND_ENCRYPTION_KEY in the env').toBeDefined();
    expect(key.value).toBeUndefined();
    expect(key.valueFrom.secretKeyRef).toEqual({ name: 'cni-rewind-bundle-key', key: 'key' });
  });
});
