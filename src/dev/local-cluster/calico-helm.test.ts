import { describe, expect, it } from 'vitest';
import { loadRelease } from '../../calico/release.js';
import { chartValuesFor, helmInstallRefusal, pinnedCalicoSources } from './calico-helm.js';
import { parseUpArgs } from './cli.js';

describe('cluster up --install helm', () => {
  it('is an install method of up, and the wrong one is refused with one line naming each', () => {
    expect(parseUpArgs(['--calico', '3.28.1', '--install', 'helm'])).toMatchObject({ calico: '3.28.1', install: 'helm' });
    expect(() => parseUpArgs(['--install', 'bogus', '--calico', '3.28.1'])).toThrow('--install takes operator, manifest, helm or helm3, not "bogus"');
  });

  it('gives the chart the Installation and APIServer of the release’s custom-resources.yaml', async () => {
    const release = await loadRelease('v3.28.1', { offline: true, need: 'operator' });
    const installation = release.customResources.find((o) => o.kind === 'Installation')!;
    const values = chartValuesFor(release.customResources);
    expect(Object.keys(values).sort()).toEqual(['apiServer', 'installation']);
    expect(values.installation).toEqual({ enabled: true, ...installation.spec });
    // The pools the harness's operator install gets, by the same definition.
    expect((values.installation!.calicoNetwork as { ipPools: unknown[] }).ipPools).toEqual(installation.spec.calicoNetwork.ipPools);
    expect(values.apiServer).toMatchObject({ enabled: true });
  });

  it('3.30’s Goldmane and Whisker become the chart’s goldmane and whisker', async () => {
    const release = await loadRelease('v3.30.7', { offline: true, need: 'operator' });
    expect(Object.keys(chartValuesFor(release.customResources)).sort()).toEqual(['apiServer', 'goldmane', 'installation', 'whisker']);
  });

  it('installs the pinned releases whose operator is built, and refuses any other version in one line', async () => {
    expect(pinnedCalicoSources()).toEqual(expect.arrayContaining(['v3.28.1', 'v3.29.7', 'v3.30.7']));
    expect(await helmInstallRefusal('3.28.1')).toBeUndefined();
    expect(await helmInstallRefusal('v3.30.7')).toBeUndefined();
    expect(await helmInstallRefusal('3.32.1')).toBeUndefined();
    const refusal = await helmInstallRefusal('3.33.0');
    expect(refusal).toMatch(
      /^--install helm: no Calico source pin for v3\.33\.0 in control-plane\/build-calico\.sh or calico-releases\.pins to package its chart from \(pinned: v3\.27\.4, v3\.28\.1/,
    );
    expect(refusal).not.toContain('\n');
  });
});
