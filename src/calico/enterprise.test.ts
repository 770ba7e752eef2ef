import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { refuseEnterprise, variantOf } from './enterprise.js';
import { installMethod } from './install-method.js';

const installation = (spec: Record<string, unknown>, status?: Record<string, unknown>): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec,
  ...(status ? { status } : {}),
});

describe('Calico Enterprise (Installation variant TigeraSecureEnterprise)', () => {
  it('is told by the Installation, spec first, else what the operator last installed', () => {
    expect(variantOf(installation({ variant: 'TigeraSecureEnterprise' }))).toBe('TigeraSecureEnterprise');
    expect(variantOf(installation({}, { variant: 'TigeraSecureEnterprise' }))).toBe('TigeraSecureEnterprise');
    expect(variantOf(installation({ variant: 'Calico' }, { variant: 'TigeraSecureEnterprise' }))).toBe('Calico');
    expect(variantOf(installation({ variant: 'Something' }))).toBeUndefined();
    expect(variantOf(undefined)).toBeUndefined();
    expect(installMethod({ installation: installation({ variant: 'TigeraSecureEnterprise' }) }).variant).toBe('TigeraSecureEnterprise');
    expect(installMethod({ installation: installation({}) })).not.toHaveProperty('variant');
  });

  it('plans and applies are refused by name, with Tigera’s procedure; open-source Calico is not held up', () => {
    let err: unknown;
    try {
      refuseEnterprise('TigeraSecureEnterprise', 'no plan was made');
    } catch (e) {
      err = e;
    }
    expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
    expect((err as Error).message).toContain('this cluster runs Calico Enterprise (Installation variant TigeraSecureEnterprise)');
    expect((err as Error).message).toMatch(/so no plan was made$/);
    expect((err as { hint?: string }).hint).toContain('docs.tigera.io/calico-enterprise');
    expect(() => refuseEnterprise('Calico', 'no plan was made')).not.toThrow();
    expect(() => refuseEnterprise(undefined, 'no plan was made')).not.toThrow();
  });
});
