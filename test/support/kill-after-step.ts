/**
 * Loaded into a CLI process with `node --import` (runCli and startCli do it when the environment names a step):
 * the process SIGKILLs itself right after step N (1-based) is journaled as finished, to prove that --resume
 * continues correctly from every step boundary. It observes the executor's step-journaled channel, so the
 * engine has no test-only code path.
 */
import { subscribe } from 'node:diagnostics_channel';
import { STEP_JOURNALED_CHANNEL, type StepJournaled } from '../../src/apply/executor.js';

export const KILL_AFTER_STEP_ENV = 'CNI_REWIND_TEST_KILL_AFTER_STEP';

const killAfter = Number(process.env[KILL_AFTER_STEP_ENV] || NaN);
if (Number.isInteger(killAfter)) {
  subscribe(STEP_JOURNALED_CHANNEL, (message) => {
    if ((message as StepJournaled).index === killAfter) process.kill(process.pid, 'SIGKILL');
  });
}
