/**
 * Plan time of the rolling node step (`plan --reboot-nodes`): every node is resolved to its machine through the
 * same provider settings as `backup` (--provider, --provider-module, --config, --mapping); the plan records the
 * settings (file paths, never their contents) and the node -> machine list, workers first, control-plane nodes
 * last. The step itself runs at apply time (src/apply/reboot-nodes.ts).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseDuration } from '../config/config.js';
import type { NodeMapping } from '../config/mapping.js';
import { describePreflight, drainPreflight } from '../drain/drain.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import type { PreflightCheck, RollingNodes } from './types.js';
import type { ProviderSet } from '../providers/registry.js';
import { nodeInfo, resolveNodes } from '../providers/resolve.js';
import { loadProviderSettings, openProviders } from '../providers/session.js';

export interface RollingSettings {
  provider?: string;
  providerModules?: string[];
  config?: string;
  mapping?: string;
  drainTimeout?: string;
  readyTimeout?: string;
}

const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'];

/** Workers first, control-plane nodes last (losing one control-plane node at a time is the least risk), then by name. */
export function rollingOrder(nodes: KubeObject[]): KubeObject[] {
  const isCp = (n: KubeObject) => CONTROL_PLANE_LABELS.some((l) => Object.hasOwn(n.metadata.labels ?? {}, l));
  return [...nodes].sort((a, b) => Number(isCp(a)) - Number(isCp(b)) || a.metadata.name.localeCompare(b.metadata.name));
}

/** A module given as a file path is recorded absolute (apply may run from another folder); a package name as is. */
function moduleSpec(spec: string): string {
  return (spec.startsWith('.') || spec.includes(path.sep)) && existsSync(spec) ? path.resolve(spec) : spec;
}

/** The provider set and mapping the settings describe (the same sources as `backup`). Close the set when done. */
export async function openRollingProviders(
  s: Pick<RollingSettings, 'providerModules' | 'config' | 'mapping'>,
  reporter: Reporter,
): Promise<{ providers: ProviderSet; mapping: NodeMapping }> {
  const { config, mapping } = await loadProviderSettings(s);
  return { providers: await openProviders({ config, modules: s.providerModules }, reporter), mapping };
}

/**
 * Plan time: resolve every node to its machine and check a drain of each can finish. Returns what the plan
 * records and two blocking preflight checks (`node-providers`, `drain-preflight`).
 */
export async function planRollingNodes(
  client: KubeClient,
  s: RollingSettings,
  reporter: Reporter,
): Promise<{ rolling: RollingNodes; checks: PreflightCheck[] }> {
  const drainTimeout = s.drainTimeout ?? '10m';
  const readyTimeout = s.readyTimeout ?? '15m';
  parseDuration(drainTimeout, '--drain-timeout');
  parseDuration(readyTimeout, '--ready-timeout');
  const settings = {
    provider: s.provider ?? 'auto',
    providerModules: (s.providerModules ?? []).map(moduleSpec),
    config: s.config ? path.resolve(s.config) : undefined,
    mapping: s.mapping ? path.resolve(s.mapping) : undefined,
  };
  const { providers, mapping } = await openRollingProviders(settings, reporter);
  try {
    if (settings.provider !== 'auto') providers.assertKnown(settings.provider);
    const nodes = rollingOrder(await client.listAll(K.node));
    const { targets, unresolved } = await resolveNodes(nodes.map(nodeInfo), providers, { mapping, provider: settings.provider });
    const byNode = new Map(targets.map((t) => [t.node, t]));
    const ordered = nodes.map((n) => byNode.get(n.metadata.name)).filter((t) => !!t);
    // `reboot` is an optional capability: a node whose provider lacks it cannot take part in a rolling reboot.
    const noReboot: string[] = [];
    for (const t of ordered) if (!(await providers.get(t.provider)).reboot) noReboot.push(`${t.node} (provider ${t.provider} cannot reboot machines)`);
    const cannot = [...unresolved.map((u) => `${u.node} (${u.reason})`), ...noReboot];
    const drain = await drainPreflight(
      client,
      nodes.map((n) => n.metadata.name),
    );
    const problems = describePreflight(drain);
    const checks: PreflightCheck[] = [
      {
        name: 'node-providers',
        ok: cannot.length === 0,
        blocking: true,
        detail: cannot.length
          ? `cannot reboot ${cannot.length} node(s) through a provider: ${cannot.join('; ')}`
          : `${ordered.length} node(s) resolved: ${ordered.map((t) => `${t.node} -> ${t.provider} ${t.machine}`).join(', ')}`,
      },
      {
        name: 'drain-preflight',
        ok: drain.ok,
        blocking: true,
        detail: drain.ok ? `every node can be drained (${Object.values(drain.evict).flat().length} pod(s) to evict in all)` : problems.join('; '),
      },
    ];
    return {
      rolling: { ...settings, drainTimeout, readyTimeout, nodes: ordered.map((t) => ({ node: t.node, provider: t.provider, machine: t.machine })) },
      checks,
    };
  } finally {
    await providers.closeAll();
  }
}
