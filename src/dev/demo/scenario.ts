/**
 * The demo's story as data: each step is a title, an explanation, and either a cni-rewind invocation
 * (run as a child process, exactly as a user would type it) or an action on the cluster that the
 * demo performs itself (installing Calico, simulating the 3.28 operator, the disaster).
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

export type DemoAction = 'install-3.27.4' | 'upgrade-3.28.1-by-hand' | 'delete-crds' | 'write-data-after-backup' | 'check-data-restored';

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
        'CRDs, tigera operator and custom resources from the release manifests, plus a migrated pool setup (default-ipv4-ippool disabled, new-pool active), workloads with IPAM records, policies, BGP and Felix configuration.',
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
      explain: 'The disabled default-ipv4-ippool will be adopted and re-enabled by the 3.28 operator (Calico issue #9100).',
      cli: ['doctor', '--target', '3.28.1'],
      expectExit: [1, 2],
    },
    {
      title: 'Upgrade to 3.28.1 "by hand"',
      explain:
        'kubectl apply --server-side of the 3.28.1 manifests, then what operator v1.34 does to the pools. The operator does not really run on this local cluster (kwok fakes its pod), so the demo applies its effects itself: it labels the pools and rewrites default-ipv4-ippool to disabled: false.',
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
      explain: 'One command, ordered, with the operator paused and the datastore locked.',
      cli: ['restore', p.bundle, '--resources', '--yes'],
    },
    { title: 'Diff again', explain: 'Nothing differs from the bundle.', cli: ['diff', p.bundle] },
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
