import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runBuildScript, watchProcessGone } from './calico-programs.js';

describe('running a Calico build script', () => {
  it('resolves with the bin directory the script prints last, and rejects a failed build with its exit status', async () => {
    await expect(runBuildScript('test ok', ['-c', 'echo progress; echo /cache/bin'], () => {})).resolves.toBe('/cache/bin');
    await expect(runBuildScript('test fail', ['-c', 'echo "build-calico.sh: no source" >&2; exit 3'], () => {})).rejects.toThrow(
      'building test fail failed (exit 3): build-calico.sh: no source',
    );
  });

  it('notices a watched process that is gone (the check a build waits with, so no caller waits for ever)', async () => {
    // Not a child of this process (a child's exit event would arrive anyway): a background sleep of a shell that exits.
    const pid = Number(execFileSync('bash', ['-c', 'sleep 60 >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' }).trim());
    let gone = false;
    const stop = watchProcessGone(pid, () => (gone = true), 50);
    await new Promise((r) => setTimeout(r, 300));
    expect(gone, 'the process still runs').toBe(false);
    process.kill(pid, 'SIGKILL');
    const deadline = Date.now() + 5000;
    while (!gone && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    stop();
    expect(gone).toBe(true);
  });
});
