import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ProgressBars } from './progress-bars.js';

/** A stream that says it is a terminal and keeps what is written to it. */
function fakeTerminal(): NodeJS.WriteStream & { text: () => string } {
  const chunks: string[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  }) as unknown as NodeJS.WriteStream & { text: () => string };
  Object.assign(w, { isTTY: true, columns: 120, rows: 40, text: () => chunks.join('') });
  return w;
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('progress bars on a terminal', () => {
  it('draws one bar per running task, prints messages and finished tasks above them, and stops', async () => {
    const out = fakeTerminal();
    const bars = new ProgressBars(out, (u) => ({ label: u.label, status: u.status }));
    bars.update({ id: 'a', label: 'node-a', current: 3, total: 10, status: 'snapshotting' }, '');
    bars.update({ id: 'b', label: 'node-b', current: 1, total: 4 }, '');
    bars.log('warning: something\n');
    await tick(300);
    const drawn = out.text();
    expect(drawn).toContain('node-a');
    expect(drawn).toContain('3/10 30% snapshotting');
    expect(drawn).toContain('node-b');
    expect(drawn).toContain('1/4 25%');
    expect(drawn).toContain('warning: something\n');
    bars.update({ id: 'a', label: 'node-a', current: 10, total: 10, done: true }, 'node-a 10/10 100% done');
    await tick(300);
    expect(out.text().slice(drawn.length)).toContain('node-a 10/10 100% done\n');
    expect(bars.active).toBe(true);
    bars.update({ id: 'b', label: 'node-b', current: 4, total: 4, done: true }, 'node-b 4/4 100% done');
    expect(bars.active).toBe(false);
    expect(out.text()).toContain('node-b 4/4 100% done\n');
    // Without bars, a message goes out at once.
    bars.log('after\n');
    expect(out.text().endsWith('after\n')).toBe(true);
  });

  it('shows a count without a bar for a task with no total', async () => {
    const out = fakeTerminal();
    const bars = new ProgressBars(out, (u) => ({ label: u.label }));
    bars.update({ id: 'x', label: 'objects', current: 1200 }, '');
    await tick(300);
    bars.stop();
    expect(out.text()).toContain('objects 1200');
    expect(out.text()).not.toContain('█');
  });
});
