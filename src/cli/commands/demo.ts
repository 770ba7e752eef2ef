import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EnvironmentError, ExitCode } from '../../core/errors.js';
import { KubeClient } from '../../kube/client.js';
import { LocalCluster } from '../../dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../dev/local-cluster/nodes.js';
import { packageRoot } from '../../core/package-root.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../dev/local-cluster/calico-programs.js';
import { countPools, deleteCalicoCrds, installCalico, ipamCheck, upgradeByHand, type DemoCalico } from '../../dev/demo/actions.js';
import { OPERATOR_MANAGED_LABEL } from '../../calico/knowledge.js';
import { hasPattern, hasQemuTools, makeNodeImages, writePattern } from '../../dev/demo/disks.js';
import { demoSteps, type DemoAction } from '../../dev/demo/scenario.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

const NODES = ['demo-node-1', 'demo-node-2', 'demo-node-3'];

interface DemoArgs {
  keep: boolean;
}

/**
 * `cni-rewind demo`: the incident behind this project and its safe resolution, on a local real control plane
 * that the demo starts and stops itself. Every cni-rewind step runs as a child process, as a user would type it.
 */
export const demoCommand: Command<DemoArgs> = {
  command: 'demo',
  describe: 'Play the Calico 3.28.1 incident and its safe resolution on a local cluster (starts and stops it itself)',
  builder: (y) =>
    y.option('keep', {
      type: 'boolean',
      default: false,
      describe: 'leave the demo cluster running at the end (stop it with CNI_REWIND_CLUSTER_NAME=demo npm run cluster -- down)',
    }) as any,
  handler: handler<DemoArgs>(async (ctx, args) => {
    // What the demo needs besides Node (Go, openssl, qemu-utils), checked and, where it can, installed by the
    // script shipped in the package: an installed `cni-rewind demo` works like the repository's `npm run demo`.
    if (!hasQemuTools() || process.env.CNI_REWIND_DEMO_PREREQS === 'always') {
      const res = spawnSync('bash', [path.join(packageRoot(), 'scripts', 'demo-prereqs.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
      if (res.status !== 0 || !hasQemuTools()) {
        throw new EnvironmentError('the demo needs Go, openssl, qemu-img and qemu-io', {
          hint: 'install them: apt-get install qemu-utils openssl (Go >= 1.26 from go.dev)',
        });
      }
    }
    const s = ctx.style;
    const say = (line = '') => ctx.host.result(line);
    const work = mkdtempSync(path.join(os.tmpdir(), 'cni-rewind-demo-'));
    const cluster = new LocalCluster({
      name: 'demo',
      portBase: Number(process.env.CNI_REWIND_DEMO_PORT_BASE ?? 17443),
      log: (l) => say(s.dim(`  [cluster] ${l}`)),
    });
    const results: { step: string; result: string; seconds: string }[] = [];
    let client: KubeClient | undefined;
    try {
      say(s.bold('cni-rewind demo: the Calico 3.28.1 incident, made safe'));
      say(s.dim('Starting a local Kubernetes control plane on 127.0.0.1 (etcd, kube-apiserver, controller-manager, scheduler, kwok).'));
      say(s.dim('The first run builds it from Go modules (about 10-30 minutes on 2 cores); later runs start in seconds.'));
      const state = await cluster.up();
      say(s.dim("Calico's own programs run beside it: the tigera operators v1.32.10 and v1.34.3, the Calico API server, kube-controllers, calicoctl."));
      say(s.dim('They are built from upstream source once (several minutes each on a fresh machine; cached afterwards).'));
      for (const [kind, tag] of [
        ['operator', 'v1.32.10'],
        ['operator', 'v1.34.3'],
        ['calico', CALICO_PROGRAMS_VERSION],
      ] as const) {
        const dir = await ensureCalicoProgram(kind, tag, (l) => say(s.dim(`  ${l}`)));
        say(s.dim(`  [calico] ${kind} ${tag}: ${dir}`));
      }
      client = await KubeClient.connect({ kubeconfig: state.kubeconfig });
      await createFakeNodes(
        client,
        NODES.map((name) => ({ name })),
      );
      await cluster.startCalico();
      const calico: DemoCalico = { client, cluster, kubeconfig: state.kubeconfig, log: say };
      const imagesDir = path.join(work, 'images');
      const images = makeNodeImages(imagesDir, NODES);
      const config = path.join(work, 'cni-rewind.yaml');
      writeFileSync(config, `providers:\n  qcow2-files:\n    imagesDir: ${imagesDir}\n`);
      const mapping = path.join(work, 'node-mapping.yaml');
      writeFileSync(mapping, `nodes:\n${NODES.map((n) => `  ${n}:\n    provider: qcow2-files\n`).join('')}`);
      const paths = {
        work,
        bundle: path.join(work, 'backups', 'before-upgrade'),
        plan: path.join(work, 'downgrade-plan.yaml'),
        mapping,
        config,
        providerName: 'qcow2-files',
        providerModule: path.join(packageRoot(), 'examples', 'third-party-provider', 'index.js'),
      };
      const env = { ...process.env, KUBECONFIG: state.kubeconfig };
      const steps = demoSteps(paths);
      for (const [i, step] of steps.entries()) {
        say();
        say(s.bold(`── Step ${i + 1}/${steps.length}: ${step.title}`));
        say(s.dim(`   ${step.explain}`));
        const t0 = Date.now();
        let outcome: string;
        if (step.cli) {
          say(`   $ cni-rewind ${step.cli.map((a) => (a.startsWith(work) ? a.replace(work, '$DEMO') : a)).join(' ')}`);
          const code = await runSelf(step.cli, env);
          const ok = (step.expectExit ?? [0]).includes(code);
          outcome = `exit ${code}${ok ? '' : ' (unexpected)'}`;
          if (!ok) {
            results.push({ step: step.title, result: outcome, seconds: secs(t0) });
            throw new EnvironmentError(`demo step "${step.title}" exited ${code}`);
          }
        } else {
          outcome = await runAction(step.action!, { calico, images, say });
        }
        results.push({ step: step.title, result: outcome, seconds: secs(t0) });
      }
      say();
      say(s.bold('Summary'));
      say(
        renderTable(results, [
          { header: 'step', value: (r) => r.step },
          { header: 'result', value: (r) => r.result },
          { header: 'seconds', value: (r) => r.seconds },
        ]),
      );
      say();
      say('Every IP pool, IPAM record and policy survived the upgrade, the downgrade and the deleted CRDs; the node disk came back from its snapshot.');
      return ExitCode.Ok;
    } catch (err) {
      if (results.length) {
        say();
        say(
          renderTable(results, [
            { header: 'step', value: (r) => r.step },
            { header: 'result', value: (r) => r.result },
          ]),
        );
      }
      throw err;
    } finally {
      client?.close();
      if (!args.keep) {
        await cluster.down();
        rmSync(work, { recursive: true, force: true });
        say(s.dim('Demo cluster stopped; nothing left running.'));
      } else {
        say(`Kept: cluster "demo" (export KUBECONFIG=${cluster.readState()?.kubeconfig}) and ${work}`);
      }
    }
  }),
};

function secs(t0: number): string {
  return ((Date.now() - t0) / 1000).toFixed(1);
}

async function runAction(action: DemoAction, c: { calico: DemoCalico; images: string[]; say: (l: string) => void }): Promise<string> {
  const client = c.calico.client;
  switch (action) {
    case 'install-3.27.4': {
      const created = await installCalico(c.calico, '3.27.4');
      c.say(
        `   created: ${Object.entries(created)
          .map(([k, v]) => `${v} ${k}`)
          .join(', ')}`,
      );
      return 'installed';
    }
    case 'upgrade-3.28.1-by-hand': {
      const got = await upgradeByHand(c.calico);
      c.say(`   operator v1.34.3 (pid ${got.operatorPid}) re-enabled default-ipv4-ippool ${got.seconds.toFixed(1)} s after it started`);
      c.say(`   the pool's projectcalico.org/v3 labels: ${OPERATOR_MANAGED_LABEL}=${got.managedBy ?? '(none)'}`);
      c.say('   $ calicoctl get ippool -o wide');
      for (const l of got.wide.trimEnd().split('\n')) c.say(`   ${l}`);
      const pools = await countPools(client);
      c.say(`   pools now: ${pools.map((p) => `${p.name} (${p.disabled ? 'disabled' : 'ENABLED'})`).join(', ')}`);
      return 'default-ipv4-ippool re-enabled by operator v1.34.3';
    }
    case 'delete-crds': {
      const { deleted, terminating } = await deleteCalicoCrds(client);
      c.say(`   deleted ${deleted} CRDs; IP pools left: ${(await countPools(client)).length}`);
      if (terminating.length) c.say(`   still terminating (their objects carry the running operator's finalizers): ${terminating.join(', ')}`);
      return `${deleted} CRDs deleted`;
    }
    case 'ipam-check': {
      c.say('   $ calicoctl ipam check --show-problem-ips');
      const out = await ipamCheck(c.calico.kubeconfig);
      for (const l of out.trimEnd().split('\n')) c.say(`   ${l}`);
      return /Check complete; found \d+ problems/.exec(out)?.[0] ?? 'no summary line';
    }
    case 'write-data-after-backup':
      writePattern(c.images[0]!, 0x99);
      return 'demo-node-1 disk changed';
    case 'check-data-restored': {
      const ok = hasPattern(c.images[0]!, 0x11);
      if (!ok) throw new EnvironmentError('demo-node-1 disk does not hold the backed-up data after the restore');
      c.say('   demo-node-1 disk holds the data of backup time again');
      return 'disk restored';
    }
  }
}

function runSelf(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const main = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'main.js');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, ...args], { env, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('exit', (code) => resolve(code ?? 1));
  });
}
