import { describe, expect, it } from 'vitest';
import { renderNotes } from './notes.js';

describe('object notes in a log', () => {
  const linked = (i: number) => ({ id: `ConfigMap calico-system/cm-${i}`, note: `linked to Installation default (uid u-${i}) once restored` });
  const notes = [...Array.from({ length: 10 }, (_, i) => linked(i)), { id: 'IPPool p', note: 'written without spec.x (unknown to the installed CRD)' }];

  it('a note ten objects share is one line with the count, the UID that differs left out; a single note names its object', () => {
    expect(renderNotes(notes, false)).toEqual([
      'note: 10 objects: linked to Installation default once restored (-v lists them)',
      'note: IPPool p: written without spec.x (unknown to the installed CRD)',
    ]);
  });

  it('-v lists every object with its own note', () => {
    const lines = renderNotes(notes, true);
    expect(lines).toHaveLength(11);
    expect(lines[3]).toBe('note: ConfigMap calico-system/cm-3: linked to Installation default (uid u-3) once restored');
  });
});
