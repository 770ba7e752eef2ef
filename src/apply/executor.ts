/**
 * Runs a plan's steps in order with a journal: each step's start and end are recorded durably, steps already
 * finished are skipped on resume, and the step that was in flight when the process died is run again (every
 * step is written to be idempotent). Values that must not be re-read after the step changed them (the operator's
 * replica count before it was scaled to 0) are remembered in the journal.
 */
import { channel } from 'node:diagnostics_channel';
import { errorMessage } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { Journal } from './journal.js';

/**
 * Published (synchronously) right after a step's end is durably journaled: a step boundary, where an observer
 * (tracing, a kill-and-resume test harness) may act before the next step starts. Nothing here depends on it.
 */
export const STEP_JOURNALED_CHANNEL = 'cni-rewind:step-journaled';
export interface StepJournaled {
  step: string;
  /** 1-based. */
  index: number;
  journal: string;
}
const stepJournaled = channel(STEP_JOURNALED_CHANNEL);

export interface StepRuntime {
  /** Record a value durably (in the journal) before acting on it. */
  remember(key: string, value: unknown): void;
  /** A value remembered by this run or an earlier, interrupted one. */
  recall<T = unknown>(key: string): T | undefined;
  reporter: Reporter;
  /** 1-based position and count, for progress. */
  index: number;
  total: number;
}

export interface ExecStep {
  id: string;
  title: string;
  /** Returns a one-line summary of what it did (shown and journaled). */
  run(rt: StepRuntime): Promise<string | void>;
}

export interface StepOutcome {
  id: string;
  title: string;
  status: 'done' | 'skipped' | 'failed' | 'not-run';
  summary?: string;
  error?: string;
  /** Milliseconds spent in this run. */
  ms?: number;
}

export interface ExecResult {
  ok: boolean;
  steps: StepOutcome[];
  failed?: { step: string; error: string; cause: unknown };
}

export interface ExecOptions {
  reporter: Reporter;
  /**
   * Called before each step is started (the safe points); if it throws, the run stops there: the journal records
   * where (`stopped`, naming the step not started) and --resume continues with that step.
   */
  beforeStep?: () => Promise<void>;
}

export async function runSteps(steps: ExecStep[], journal: Journal, opts: ExecOptions): Promise<ExecResult> {
  const { reporter } = opts;
  const outcomes: StepOutcome[] = steps.map((s) => ({ id: s.id, title: s.title, status: 'not-run' }));
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    const out = outcomes[i]!;
    const index = i + 1;
    if (journal.current.finished.has(step.id)) {
      out.status = 'skipped';
      reporter.info('CNR_STEP_SKIP', `[${index}/${steps.length}] ${step.title}: already done (journal)`, { step: step.id, index });
      reporter.progress({ id: step.id, label: step.title, echoed: true, current: 1, total: 1, status: 'done earlier', done: true });
      continue;
    }
    if (opts.beforeStep) {
      try {
        await opts.beforeStep();
      } catch (err) {
        const msg = errorMessage(err);
        journal.append({ event: 'stopped', step: step.id, index, reason: msg });
        reporter.error('CNR_APPLY_STOPPED', `stopped before step [${index}/${steps.length}] ${step.title}: ${msg}`, { step: step.id, index });
        return { ok: false, steps: outcomes, failed: { step: step.id, error: msg, cause: err } };
      }
    }
    const rerun = journal.current.unfinished.includes(step.id);
    reporter.info('CNR_STEP_START', `[${index}/${steps.length}] ${step.title}${rerun ? ' (again: it was interrupted)' : ''}`, { step: step.id, index, rerun });
    reporter.progress({ id: step.id, label: step.title, echoed: true, current: 0, total: 1, status: 'running' });
    journal.append({ event: 'step-start', step: step.id, index });
    const t0 = Date.now();
    try {
      const summary = await step.run({
        remember: (key, value) => journal.append({ event: 'remember', key, value }),
        recall: <T>(key: string) => journal.current.remembered[key] as T | undefined,
        reporter,
        index,
        total: steps.length,
      });
      journal.append({ event: 'step-end', step: step.id, index, summary: summary || undefined });
      out.status = 'done';
      out.summary = summary || undefined;
      out.ms = Date.now() - t0;
      reporter.info('CNR_STEP_DONE', `[${index}/${steps.length}] ${step.title}: ${summary || 'done'}`, { step: step.id, index, ms: out.ms });
      reporter.progress({ id: step.id, label: step.title, echoed: true, current: 1, total: 1, status: 'done', done: true });
      if (stepJournaled.hasSubscribers) stepJournaled.publish({ step: step.id, index, journal: journal.path } satisfies StepJournaled);
    } catch (err) {
      const msg = errorMessage(err);
      journal.append({ event: 'step-failed', step: step.id, index, error: msg });
      out.status = 'failed';
      out.error = msg;
      out.ms = Date.now() - t0;
      reporter.error('CNR_STEP_FAILED', `[${index}/${steps.length}] ${step.title} failed: ${msg}`, { step: step.id, index });
      reporter.progress({ id: step.id, label: step.title, echoed: true, current: 0, total: 1, status: 'failed', done: true });
      return { ok: false, steps: outcomes, failed: { step: step.id, error: msg, cause: err } };
    }
  }
  journal.append({ event: 'done' });
  return { ok: true, steps: outcomes };
}
