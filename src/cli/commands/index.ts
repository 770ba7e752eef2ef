import type { Command } from '../context.js';

/**
 * Every CLI command, in the order `--help` lists them. Add new commands here.
 *
 * A command module imports the engine it runs (the Kubernetes client, the cloud SDKs through the providers, yaml,
 * tar, ...), which costs about a second of start-up. So this table holds only what `--help` shows (`command`,
 * `describe`: the same strings as the module's, checked by index.test.ts) and how to import the module; main.ts
 * imports only the module of the command being run.
 */
export interface CommandEntry {
  /** The yargs command string, e.g. `inspect <bundle>`. */
  command: string;
  describe: string;
  load(): Promise<Command<any>>;
}

export const commandTable: CommandEntry[] = [
  { command: 'version', describe: 'Print the tool version and the bundle format version', load: async () => (await import('./version.js')).versionCommand },
  {
    command: 'status',
    describe:
      'Show Kubernetes, the Calico install (type, version, datastore, install method, GitOps owner, images, operator, TigeraStatus) and the nodes with their providers',
    load: async () => (await import('./status.js')).statusCommand,
  },
  {
    command: 'backup',
    describe: "Export every Calico resource and snapshot the nodes' disks through their providers, into one bundle",
    load: async () => (await import('./backup.js')).backupCommand,
  },
  {
    command: 'snapshots',
    describe: 'List or delete the provider snapshots cni-rewind made',
    load: async () => (await import('./snapshots.js')).snapshotsCommand,
  },
  {
    command: 'export',
    describe: 'Export every Calico resource (CRDs, custom resources, config, node annotations) to a checksummed bundle',
    load: async () => (await import('./export.js')).exportCommand,
  },
  {
    command: 'inspect <bundle>',
    describe: 'Summarize a bundle: cluster, versions, counts per kind, snapshot records',
    load: async () => (await import('./inspect.js')).inspectCommand,
  },
  {
    command: 'verify <bundle>',
    describe: 'Check a bundle: format version, completeness and every checksum (exit 2 naming each bad file)',
    load: async () => (await import('./verify.js')).verifyCommand,
  },
  {
    command: 'list [dir]',
    describe: 'List bundles under a directory (default ./cni-rewind-backups), newest first',
    load: async () => (await import('./list.js')).listCommand,
  },
  {
    command: 'prune [dir]',
    describe: 'Delete old bundles under a directory (default ./cni-rewind-backups): keep the newest N and/or those younger than an age',
    load: async () => (await import('./prune.js')).pruneCommand,
  },
  {
    command: 'diff <bundle>',
    describe: 'Compare the live cluster with a bundle; exit 0 no differences, 1 differences, 2 or more trouble (like diff(1); 2 bad input, 4 environment)',
    load: async () => (await import('./diff.js')).diffCommand,
  },
  {
    command: 'doctor [bundle]',
    describe: 'Find the known Calico traps (operator-managed pools, IPAM leaks, version skew, unhealthy parts), in the cluster or in a bundle',
    load: async () => (await import('./doctor.js')).doctorCommand,
  },
  {
    command: 'restore <bundle>',
    describe: 'Restore Calico resources from a bundle: ordered, previewed, schema-aware, with the operator paused',
    load: async () => (await import('./restore.js')).restoreCommand,
  },
  {
    command: 'plan',
    describe: 'Plan an upgrade or downgrade of Calico: schema-aware findings, preflight and the steps `apply` will run (changes nothing)',
    load: async () => (await import('./plan.js')).planCommand,
  },
  {
    command: 'apply <plan>',
    describe: 'Execute a plan: journaled, resumable steps under a cluster lock; stops with the restore commands if a step fails',
    load: async () => (await import('./apply.js')).applyCommand,
  },
  {
    command: 'wrap [command..]',
    describe:
      "Back up, run a risky command (after --), then check Calico and its data; print the restore command or restore with --restore-on-failure. Exits with the command's code",
    load: async () => (await import('./wrap.js')).wrapCommand,
  },
  {
    command: 'releases',
    describe: 'List the Calico releases cni-rewind ships manifests for (usable offline; others need --manifests)',
    load: async () => (await import('./releases.js')).releasesCommand,
  },
  {
    command: 'demo',
    describe: 'Play the Calico 3.28.1 incident and its safe resolution on a local cluster (starts and stops it itself)',
    load: async () => (await import('./demo.js')).demoCommand,
  },
];

/** The command word of an entry (`inspect` for `inspect <bundle>`). */
export const commandName = (e: Pick<CommandEntry, 'command'>): string => e.command.split(' ')[0]!;

/** Global options that take a value (their value is not the command word). */
const VALUE_OPTIONS = new Set(['--kubeconfig', '--context', '--output', '-o', '--as', '--as-group', '--request-timeout']);

/**
 * The command word of a command line: the first word that is neither an option nor a global option's value.
 * A guess good enough to choose which module to import: main.ts falls back to loading every command when yargs
 * picks another one.
 */
export function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return undefined;
    if (!a.startsWith('-') || a === '-') return a;
    if (VALUE_OPTIONS.has(a)) i++;
  }
  return undefined;
}
