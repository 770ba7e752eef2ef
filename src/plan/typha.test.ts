import { gunzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readShippedFile } from '../calico/shipped.js';
import { packageRoot } from '../core/package-root.js';
import { isErrorKind } from '../core/errors.js';
import { parseManifests } from '../kube/manifests.js';
import { refuseTyphaLeftBehind } from './typha.js';

// The real manifests: calico.yaml as shipped, calico-typha.yaml from the test fixtures (upstream, unmodified).
const calicoYaml = (v: string) => parseManifests(readShippedFile(v, 'calico.yaml')!.text, `${v}/calico.yaml`);
const typhaYaml = (v: string) =>
  parseManifests(gunzipSync(readFileSync(path.join(packageRoot(), 'test/fixtures/calico-typha', v, 'calico-typha.yaml.gz'))).toString('utf8'), v);
const liveTypha = (v: string) => typhaYaml(v).find((o) => o.kind === 'Deployment' && o.metadata.name === 'calico-typha')!;

describe('a calico.yaml install that runs Typha', () => {
  it('is refused when the target manifest would leave Typha behind, naming it and the way out', () => {
    let err: unknown;
    try {
      refuseTyphaLeftBehind(liveTypha('3.28.1'), calicoYaml('3.27.4'), 'v3.27.4');
    } catch (e) {
      err = e;
    }
    expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
    expect((err as Error).message).toContain('Deployment kube-system/calico-typha, docker.io/calico/typha:v3.28.1');
    expect((err as { hint?: string }).hint).toContain('https://raw.githubusercontent.com/projectcalico/calico/v3.27.4/manifests/calico-typha.yaml');
  });

  it('is planned when the target manifest is calico-typha.yaml, and one without Typha is not held up', () => {
    expect(() => refuseTyphaLeftBehind(liveTypha('3.28.1'), typhaYaml('3.27.4'), 'v3.27.4')).not.toThrow();
    expect(() => refuseTyphaLeftBehind(undefined, calicoYaml('3.27.4'), 'v3.27.4')).not.toThrow();
  });
});
