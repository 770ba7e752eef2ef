import { afterEach, describe, expect, it, vi } from 'vitest';
import { reportError } from '../cli/context.js';
import { styler } from '../cli/output.js';
import { BadInputError, ERROR_BRAND, EnvironmentError, ExitCode, isCniRewindError, isErrorKind, PartialFailureError, RefusedError } from './errors.js';

/** An error class built apart from this module, as a plugin bundling its own copy of the package would have it. */
class ForeignRefused extends Error {
  constructor(message: string) {
    super(message);
    Object.defineProperty(this, Symbol.for('cni-rewind.error'), { value: true });
  }
  readonly kind = 'refused';
  readonly exitCode = 5;
  readonly hint = 'stop the VM first';
}

describe('branded errors', () => {
  afterEach(() => vi.restoreAllMocks());

  it('every error class carries the brand, its kind and its exit code', () => {
    const cases = [
      [new BadInputError('x'), 'bad-input', ExitCode.BadInput],
      [new EnvironmentError('x'), 'environment', ExitCode.Environment],
      [new RefusedError('x'), 'refused', ExitCode.Refused],
      [new PartialFailureError('x'), 'partial', ExitCode.Partial],
    ] as const;
    for (const [e, kind, code] of cases) {
      expect(e[ERROR_BRAND]).toBe(true);
      expect(isCniRewindError(e)).toBe(true);
      expect(isErrorKind(e, kind)).toBe(true);
      expect(e.exitCode).toBe(code);
    }
    expect(ERROR_BRAND).toBe(Symbol.for('cni-rewind.error'));
  });

  it('recognises an error of a separately built class by its brand, not by instanceof', () => {
    const e = new ForeignRefused('qcow2-files: image is in use');
    expect(e instanceof RefusedError).toBe(false);
    expect(isCniRewindError(e)).toBe(true);
    expect(isErrorKind(e, 'refused')).toBe(true);
    expect(isErrorKind(e, 'bad-input')).toBe(false);
  });

  it('does not take a plain Error, an unbranded exitCode, or a brand with an invalid exit code for one', () => {
    expect(isCniRewindError(new Error('x'))).toBe(false);
    expect(isCniRewindError(Object.assign(new Error('x'), { exitCode: 4 }))).toBe(false);
    expect(isCniRewindError(Object.assign(new Error('x'), { [ERROR_BRAND]: true, exitCode: 0 }))).toBe(false);
    expect(isCniRewindError(Object.assign(new Error('x'), { [ERROR_BRAND]: true, exitCode: 42 }))).toBe(false);
    expect(isCniRewindError(undefined)).toBe(false);
    expect(isCniRewindError('text')).toBe(false);
  });

  it('the CLI maps a foreign branded error to its exit code, message and hint (not "unexpected error", 1)', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (written.push(String(chunk)), true));
    const code = reportError(new ForeignRefused('qcow2-files: image is in use'), false, styler(false));
    expect(code).toBe(ExitCode.Refused);
    expect(written).toEqual(['cni-rewind: qcow2-files: image is in use\n', '  stop the VM first\n']);
  });
});
