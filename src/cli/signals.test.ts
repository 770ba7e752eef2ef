import { afterEach, describe, expect, it, vi } from 'vitest';
import { InterruptedError, whenAborted } from '../io/abort.js';
import { SignalScope } from './signals.js';

/** Delivers a signal to the handlers installed (process.emit, so no real signal reaches the test runner). */
const deliver = (sig: NodeJS.Signals) => process.emit(sig, sig);

describe('SignalScope: the CLI owns SIGINT/SIGTERM, the engine sees an AbortSignal', () => {
  afterEach(() => vi.restoreAllMocks());

  it('aborts the signal with the signal name while the engine listens; a second signal changes nothing', async () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
    const heard: string[] = [];
    await SignalScope.run(async ({ signal }) => {
      const stop = whenAborted(signal, (why) => heard.push(why));
      deliver('SIGTERM');
      deliver('SIGINT');
      stop();
      expect(signal.aborted).toBe(true);
      expect(signal.reason).toBe('SIGTERM');
    });
    expect(heard).toEqual(['SIGTERM']);
    expect(kill).not.toHaveBeenCalled();
  });

  it('outside a listened stretch the signal keeps its default effect: handlers off, the process killed by it', async () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
    const before = process.listenerCount('SIGINT');
    await SignalScope.run(async ({ signal }) => {
      expect(process.listenerCount('SIGINT')).toBe(before + 1);
      deliver('SIGINT');
      expect(signal.aborted).toBe(false);
      expect(process.listenerCount('SIGINT')).toBe(before);
    });
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGINT');
  });

  it('ignores SIGINT while a child process on the terminal decides, but not SIGTERM', async () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
    await SignalScope.run(async (scope) => {
      scope.ignoreInterrupt = true;
      deliver('SIGINT');
      expect(kill).not.toHaveBeenCalled();
      deliver('SIGTERM');
    });
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGTERM');
  });

  it('an engine that stopped at once (InterruptedError) ends the process by its signal; other errors are rethrown only', async () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => true);
    await expect(SignalScope.run(async () => Promise.reject(new InterruptedError('SIGTERM')))).rejects.toThrow(InterruptedError);
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGTERM');
    kill.mockClear();
    await expect(SignalScope.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(kill).not.toHaveBeenCalled();
  });

  it('removes its handlers when the command ends', async () => {
    const before = [process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')];
    await SignalScope.run(async () => undefined);
    expect([process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')]).toEqual(before);
  });
});

describe('whenAborted', () => {
  it('hears an abort that already happened, keeps listening until stopped, and hears nothing without a signal', () => {
    const c = new AbortController();
    c.abort('SIGINT');
    const heard: string[] = [];
    const stop = whenAborted(c.signal, (why) => heard.push(why));
    expect(heard).toEqual(['SIGINT']);
    stop();
    expect(whenAborted(undefined, () => heard.push('x'))()).toBeUndefined();
    expect(heard).toEqual(['SIGINT']);
  });
});
