import { describe, expect, it } from 'vitest';
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { crdRefusal } from './shipped-crds.js';
import { readShippedFile } from './shipped.js';

const shippedCrd = (version: string, name: string): any => {
  const got = readShippedFile(version, 'operator-crds.yaml')!;
  return structuredClone(parseManifests(got.text, got.path).find((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === name));
};
const webhook = { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://collector.example/convert' } } };

describe('crdRefusal: a CRD is created only as a shipped release defines it, schema aside', () => {
  it('accepts a shipped CRD as a live export has it (conversion None filled in, schema edited), whatever version the bundle claims', () => {
    const crd = shippedCrd('3.28.1', 'ippools.crd.projectcalico.org');
    crd.spec.conversion = { strategy: 'None' };
    crd.spec.versions[0].schema.openAPIV3Schema.description = 'edited';
    expect(crdRefusal(crd, '3.28.1')).toBeUndefined();
    expect(crdRefusal(crd, '9.9.9')).toBeUndefined();
  });

  it('refuses a Calico CRD with a conversion webhook to an outside URL, naming the field', () => {
    const crd = shippedCrd('3.28.1', 'ippools.crd.projectcalico.org');
    crd.spec.conversion = webhook;
    expect(crdRefusal(crd, '3.28.1')).toBe("its spec.conversion differs from every shipped Calico release's definition of it");
  });

  it('refuses a served version or scope no release has; a CRD no release knows only without a conversion', () => {
    const crd = shippedCrd('3.28.1', 'ippools.crd.projectcalico.org');
    crd.spec.scope = 'Namespaced';
    expect(crdRefusal(crd)).toMatch(/spec\.scope differs/);
    const unknown = { ...shippedCrd('3.28.1', 'ippools.crd.projectcalico.org'), metadata: { name: 'newthings.crd.projectcalico.org' } } as KubeObject;
    expect(crdRefusal(unknown)).toBeUndefined();
    (unknown as any).spec.conversion = webhook;
    expect(crdRefusal(unknown)).toMatch(/no shipped Calico release has it, and it names a conversion \(Webhook\)/);
  });
});
