import { describe, expect, it } from 'vitest';
import { MATRIX_BEGIN, MATRIX_END, runRows, withMatrixRows } from './path-matrix-docs.js';

const tsv = [
  '2026-12-06T10:00:00.000Z\t3.31.7 -> 3.32.1\tin-place\tpassed\t150\t80\t9',
  '2026-12-06T12:00:00.000Z\t3.31.7 -> 3.32.1\tin-place\tpassed\t120\t60\t4',
  '2026-12-06T12:01:00.000Z\t3.9.0 -> 3.10.0\tin-place\tpassed with --allow-field-loss (a | b)\t100\t50\t0',
  'not a row',
].join('\n');

describe('the path matrix table in the docs', () => {
  it("takes this run's newest row per path, escaping table bars", () => {
    const rows = runRows(tsv, '2026-12-06T11:00:00.000Z', 2);
    expect([...rows.values()]).toEqual([
      '| 3.31.7 -> 3.32.1 | 2026-12-06 (2) | in-place | passed | 120 | 60 | 4 |',
      '| 3.9.0 -> 3.10.0 | 2026-12-06 (2) | in-place | passed with --allow-field-loss (a \\| b) | 100 | 50 | 0 |',
    ]);
    expect(runRows(tsv, '2026-12-07T00:00:00.000Z').size).toBe(0);
  });

  it('replaces the rows of the same paths, keeps the others, in version order (3.9 before 3.10), between the markers only', () => {
    const doc = `intro\n${MATRIX_BEGIN}\n| h |\n|---|\n| 3.31.7 -> 3.32.1 | old |\n| 3.30.7 -> 3.31.7 | kept |\n${MATRIX_END}\nafter\n`;
    const out = withMatrixRows(doc, runRows(tsv, '2026-12-06T11:00:00.000Z', 2))!;
    const table = out
      .slice(out.indexOf(MATRIX_BEGIN) + MATRIX_BEGIN.length, out.indexOf(MATRIX_END))
      .trim()
      .split('\n');
    expect(table.slice(2).map((l) => l.split(' | ')[0]! + ' | ' + l.split(' | ')[1])).toEqual([
      '| 3.9.0 -> 3.10.0 | 2026-12-06 (2)',
      '| 3.30.7 -> 3.31.7 | kept |',
      '| 3.31.7 -> 3.32.1 | 2026-12-06 (2)',
    ]);
    expect(out.startsWith(`intro\n${MATRIX_BEGIN}\n`) && out.endsWith(`${MATRIX_END}\nafter\n`)).toBe(true);
    expect(withMatrixRows('no markers', new Map())).toBeUndefined();
  });
});
