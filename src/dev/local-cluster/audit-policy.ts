import { writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The local cluster's API server records every write to Calico's IPAM, pools, datastore lock and to CRDs (who, when,
 * which object; no bodies). IPAM is written by several programs at once (the CNI plugin or the IPAM driver,
 * kube-controllers' garbage collector, calico-node's tunnel allocator, restore): when a test finds an allocation
 * gone, this trail names the program that wrote its block or handle last.
 */
export const AUDIT_LOG = 'kube-apiserver-audit.jsonl';

const POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: crd.projectcalico.org
        resources: [ipamblocks, ipamhandles, blockaffinities, ippools, clusterinformations]
      - group: apiextensions.k8s.io
        resources: [customresourcedefinitions]
  - level: None
`;

/** The API server's audit flags; writes the policy into the cluster's run directory. */
export function auditArgs(workDir: string): string[] {
  const policy = path.join(workDir, 'audit-policy.yaml');
  writeFileSync(policy, POLICY, { mode: 0o600 });
  return [
    `--audit-policy-file=${policy}`,
    `--audit-log-path=${path.join(workDir, AUDIT_LOG)}`,
    // Batched: a benchmark's 100k writes never wait on the log.
    '--audit-log-mode=batch',
    '--audit-log-maxsize=64',
    '--audit-log-maxbackup=1',
  ];
}
