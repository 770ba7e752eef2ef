/**
 * The IPAM driver a churn starts (control-plane/ipam-driver, by startChurn in ipam-support.ts) dies with the process
 * that started it. A vitest worker killed mid-churn (a run stopped with SIGKILL, a worker that crashed) runs no
 * cleanup: a driver that outlived it went on allocating on the cluster under the next run's tests.
 *
 * A child node process starts a churn through the built ipam-support module (dist/, as `npm run build` leaves it)
 * and is SIGKILLed. This slot's cluster has no Calico installed, so every call the driver makes fails fast and is
 * logged: it churns (its log grows) for the five minutes asked, unless it dies with its parent.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect, it } from 'vitest';
import { until } from '../support/until.js';
import { readEvents, startChurn } from './ipam-support.js';

const builtSupport = path.resolve(import.meta.dirname, '../../dist/test/e2e/ipam-support.js');

/** Running, as opposed to gone or a zombie nobody reaps (a container's PID 1 may never reap an orphan). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

it('a churning IPAM driver is gone within seconds of a SIGKILL of the process that started it', async () => {
  expect(existsSync(builtSupport), `${builtSupport} (run npm run build)`).toBe(true);
  const logFile = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-driver-lifetime-')), 'churn.jsonl');
  const script = `
    const { startChurn } = await import(${JSON.stringify(builtSupport)});
    const churn = await startChurn(${JSON.stringify(logFile)}, { nodes: ['lifetime-node'], prefix: 'lifetime', rate: 5, target: 2, durationS: 300 });
    console.log(churn.child.pid);
    setInterval(() => undefined, 60_000);`;
  const parent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let driver: number | undefined;
  try {
    for await (const line of createInterface({ input: parent.stdout! })) {
      driver = Number(line);
      break;
    }
    expect(driver, 'the driver pid the child printed').toBeGreaterThan(0);
    await until('the driver to churn (its log grows)', () => lines(logFile).length >= 3, { timeoutMs: 60_000, state: () => lines(logFile).join('\n') });
    expect(alive(driver!)).toBe(true);
    parent.kill('SIGKILL');
    await until('the driver to die with its parent', () => !alive(driver!), {
      timeoutMs: 5_000,
      state: () => `driver ${driver} still running; its log has ${lines(logFile).length} lines`,
    });
  } finally {
    parent.kill('SIGKILL');
    if (driver && alive(driver)) process.kill(driver, 'SIGKILL');
  }
});

it('stop still ends a churn as before: the SIGTERM reaches the driver itself, which writes its end line and exits 0', async () => {
  const logFile = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-driver-stop-')), 'churn.jsonl');
  const churn = await startChurn(logFile, { nodes: ['lifetime-node'], prefix: 'lifetime-stop', rate: 5, target: 2, durationS: 300 });
  await until('the driver to churn', () => lines(logFile).length >= 2, { timeoutMs: 60_000, state: () => lines(logFile).join('\n') });
  expect(await churn.stop()).toBe(0);
  expect(readEvents(logFile).at(-1)?.op).toBe('end');
});
