/**
 * The demo's story as data: each step is a title, an explanation, and either a cni-rewind invocation
 * (run as a child process, exactly as a user would type it) or a user's action on the cluster that the demo
 * performs itself (installing Calico, the upgrade by hand, the disaster). Calico's reactions come from its real
 * programs (the tigera operators v1.32.10 and v1.34.3, the Calico API server, kube-controllers).
 */
export interface DemoPaths {
  work: string;
  bundle: string;
  plan: string;
  mapping: string;
  config: string;
  providerModule?: string;
  providerName: string;
}

export type DemoAction = 'install-3.27.4' | 'upgrade-3.28.1-by-hand' | 'delete-crds' | 'ipam-check' | 'write-data-after-backup' | 'check-data-restored';

export interface DemoStep {
  title: string;
  explain: string;
  /** cni-rewind arguments, when the step is a CLI call. */
  cli?: string[];
  /** An action the demo performs on the cluster itself. */
  action?: DemoAction;
  /** Exit codes that mean the step went as the story expects (doctor warns: 1 or 2). */
  expectExit?: number[];
}

export function demoSteps(p: DemoPaths): DemoStep[] {
  const provider = [...(p.providerModule ? ['--provider-module', p.providerModule] : []), '--provider', p.providerName, '--config', p.config];
  return [
    {
      title: 'Install Calico 3.27.4',
      explain:
        'tigera-operator.yaml and custom-resources.yaml of the release; the real tigera operator v1.32.10 renders Calico and its API server. Then the pool migration through projectcalico.org/v3 (default-ipv4-ippool disabled, new-pool active), workloads with IPAM records, policies, BGP and Felix configuration.',
      action: 'install-3.27.4',
    },
    { title: 'Status', explain: 'What cni-rewind sees in the cluster.', cli: ['status'] },
    {
      title: 'Backup',
      explain: `Disk snapshots of every node (${p.providerName} provider) and an export of every Calico resource into one checksummed bundle.`,
      cli: ['backup', ...provider, '--mapping', p.mapping, '--out', p.bundle],
    },
    { title: 'Inspect the bundle', explain: 'Counts per kind and the snapshot records.', cli: ['inspect', p.bundle] },
    {
      title: 'Doctor before the upgrade',
      explain:
        'The disabled default-ipv4-ippool will be adopted and re-enabled by the 3.28 operator (Calico issue #9100). Doctor also lists the pods the operator rendered: kwok gave them addresses in new-pool and no CNI plugin runs here, so IPAM has no allocation for them.',
      cli: ['doctor', '--target', '3.28.1'],
      expectExit: [1, 2],
    },
    {
      title: 'Upgrade to 3.28.1 "by hand"',
      explain:
        "kubectl apply --server-side of 3.28.1's tigera-operator.yaml. The operator Deployment's image changes to v1.34.3 and the real operator v1.34.3 starts: it adopts default-ipv4-ippool (listed in the Installation) and rewrites it without `disabled` through projectcalico.org/v3.",
      action: 'upgrade-3.28.1-by-hand',
    },
    {
      title: 'What changed since the backup',
      explain: 'The pool came back enabled: diff against the bundle shows it (exit 1: differences).',
      cli: ['diff', p.bundle, '--kinds', 'IPPool'],
      expectExit: [1],
    },
    {
      title: 'Plan the downgrade to 3.27.4',
      explain:
        'Schema-aware: the Installation fields 3.27 does not know, the pool the operator changed since the backup (--restore-drift puts it back), what the plan does about each, every step.',
      cli: ['plan', '--to', '3.27.4', '--bundle', p.bundle, '--restore-drift', '--out', p.plan],
    },
    { title: 'Apply the plan', explain: 'Journaled and resumable; no CRD that holds data is deleted.', cli: ['apply', p.plan, '--yes'] },
    {
      title: 'Diff against the backup',
      explain: 'Calico data compared with the bundle taken before the upgrade: intact, default-ipv4-ippool disabled again.',
      cli: [
        'diff',
        p.bundle,
        '--kinds',
        'IPPool,IPAMBlock,IPAMHandle,BlockAffinity,IPAMConfig,GlobalNetworkPolicy,NetworkPolicy,GlobalNetworkSet,FelixConfiguration,BGPConfiguration',
      ],
    },
    {
      title: 'Disaster: every Calico CRD deleted',
      explain: 'What `kubectl delete -f tigera-operator.yaml` does on 3.27/3.28: every IP pool, IPAM record and policy is gone.',
      action: 'delete-crds',
    },
    {
      title: 'Restore the resources',
      explain:
        "One command, ordered, with the operator paused and the datastore locked. Then it checks every pod's address against IPAM: the pods the operator rolled after the backup (the upgrade and the downgrade) hold addresses the bundle's IPAM never had, so restore names them to be restarted and exits 3. Here no CNI plugin runs, so kwok gave them those addresses; on a real cluster they are the next duplicate IPs.",
      cli: ['restore', p.bundle, '--resources', '--yes'],
      expectExit: [0, 3],
    },
    { title: 'Diff again', explain: 'Nothing differs from the bundle.', cli: ['diff', p.bundle] },
    {
      title: 'IPAM check',
      explain:
        "Calico's own consistency check of the restored IPAM (calicoctl ipam check). No CNI plugin runs on this local cluster: the pods the operator rendered got their addresses from kwok, not from Calico IPAM, and are listed as such.",
      action: 'ipam-check',
    },
    {
      title: 'Data written to a node disk after the backup',
      explain: "A file changes on demo-node-1's disk after the snapshot.",
      action: 'write-data-after-backup',
    },
    {
      title: 'Restore one node from its disk snapshots',
      explain: 'Cordon, drain (PDB-aware), restore the disks, wait Ready, uncordon.',
      cli: ['restore', p.bundle, '--disks', '--nodes', 'demo-node-1', ...provider, '--mapping', p.mapping, '--yes'],
    },
    { title: 'Check the node disk', explain: 'The disk is back to its state at backup time.', action: 'check-data-restored' },
  ];
}
