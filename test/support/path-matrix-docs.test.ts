import { describe, expect, it } from 'vitest';
import { MATRIX_BEGIN, MATRIX_END, matrixTable, withMatrixTable } from './path-matrix-docs.js';

const tsv = [
  '2026-12-06T10:00:00.000Z\t3.31.7 -> 3.32.1\tin-place\tpassed\t150\t80\t9',
  '2026-12-06T12:00:00.000Z\t3.31.7 -> 3.32.1\tin-place\tpassed\t120\t60\t4',
  '2026-12-06T12:01:00.000Z\t3.9.0 -> 3.10.0\tin-place\tpassed with --allow-field-loss (a | b)\t100\t50\t0',
  'not a row',
].join('\n');

describe('the path matrix table in the docs', () => {
  it("takes this run's newest row per path, in version order (3.9 before 3.10), escaping table bars", () => {
    const t = matrixTable(tsv, '2026-12-06T11:00:00.000Z', 2)!;
    expect(t.split('\n').slice(4)).toEqual([
      '| 3.9.0 -> 3.10.0 | in-place | passed with --allow-field-loss (a \\| b) | 100 | 50 | 0 |',
      '| 3.31.7 -> 3.32.1 | in-place | passed | 120 | 60 | 4 |',
    ]);
    expect(t).toContain('2 cores');
  });

  it('nothing from an earlier run, and only between the markers', () => {
    expect(matrixTable(tsv, '2026-12-07T00:00:00.000Z')).toBeUndefined();
    const doc = `intro\n${MATRIX_BEGIN}\nold table\n${MATRIX_END}\nafter\n`;
    expect(withMatrixTable(doc, 'T')).toBe(`intro\n${MATRIX_BEGIN}\nT\n${MATRIX_END}\nafter\n`);
    expect(withMatrixTable('no markers', 'T')).toBeUndefined();
  });
});
