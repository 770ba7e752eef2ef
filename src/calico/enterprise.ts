/**
 * Calico Enterprise (issue 31, item 1): the same tigera operator, told by Installation `spec.variant:
 * TigeraSecureEnterprise` (tigera/operator api/v1/installation_types.go, ProductVariant: "Calico" or
 * "TigeraSecureEnterprise"; `status.variant` is the variant the operator last installed). Its data lives in the same
 * crd.projectcalico.org CRDs, so export, backup, diff and restore work as for Calico. A plan rolls out open-source
 * Calico's manifests, whose tigera-operator.yaml would replace the Enterprise operator and its images: plan and apply
 * refuse it by name (exit 5) and point to Tigera's own upgrade procedure.
 */
import { RefusedError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';

export const ENTERPRISE_VARIANT = 'TigeraSecureEnterprise';

/** The product the Installation asks for (or the operator last installed); undefined without an Installation or a variant. */
export function variantOf(installation: KubeObject | undefined): 'Calico' | typeof ENTERPRISE_VARIANT | undefined {
  const v = installation?.spec?.variant ?? installation?.status?.variant;
  return v === 'Calico' || v === ENTERPRISE_VARIANT ? v : undefined;
}

/** Refuses (exit 5) changing the version of a Calico Enterprise install with open-source Calico's manifests. */
export function refuseEnterprise(variant: string | undefined, outcome: string): void {
  if (variant !== ENTERPRISE_VARIANT) return;
  throw new RefusedError(
    `this cluster runs Calico Enterprise (Installation variant ${ENTERPRISE_VARIANT}): plans roll out open-source Calico's manifests, whose operator would replace the Enterprise one, so ${outcome}`,
    {
      hint: "upgrade Calico Enterprise with Tigera's procedure (docs.tigera.io/calico-enterprise/latest/getting-started/upgrading); export, backup, diff and restore still work here",
    },
  );
}
