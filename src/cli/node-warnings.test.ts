import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package-root.js';

/**
 * Under Node 20 (a supported runtime) the AWS SDK prints an eight-line NodeVersionSupportWarning on every run that
 * touches AWS. The CLI turns it off unless the user asked for it. Runs the built CLI (dist/, as `npm test` builds
 * it) against a closed port, which fails fast after the S3 client was created (where the SDK warns).
 */
const main = path.join(packageRoot(), 'dist/src/cli/main.js');
const nodeMajor = Number(process.versions.node.split('.')[0]);

function listS3(extra: Record<string, string>) {
  const env: Record<string, string> = {
    ...process.env,
    AWS_ACCESS_KEY_ID: 'x',
    AWS_SECRET_ACCESS_KEY: 'y',
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1',
  } as Record<string, string>;
  delete env.NODE_NO_WARNINGS;
  delete env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED;
  Object.assign(env, extra);
  return spawnSync(process.execPath, [main, 'list', 's3://bucket/prefix'], { encoding: 'utf8', env });
}

// On Node 22+ the SDK has nothing to warn about, so neither case could fail there.
describe.runIf(nodeMajor < 22)('the AWS SDK Node-version warning under Node 20', () => {
  it('is printed when the user asks for it (control: the run does reach the SDK)', () => {
    const r = listS3({ AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'no' });
    expect(r.stderr).toContain('NodeVersionSupportWarning');
  });
  it('is not printed by default: the CLI prints one line about the unreachable store only', () => {
    const r = listS3({});
    expect(r.status).toBe(4);
    expect(r.stderr).not.toContain('NodeVersionSupportWarning');
    expect(r.stderr).toMatch(/^cni-rewind: cannot list s3:\/\/bucket\/prefix: connect ECONNREFUSED/);
  });
});
