/**
 * Notes about single objects (restore's "linked to Installation default once restored") as a log reads them: a
 * note that several objects share is one line with their count, `-v` lists every object.
 */

export interface ObjectNote {
  id: string;
  note: string;
}

/** What differs from object to object in an otherwise shared note (the owner's new UID) is left out of the summary. */
const PER_OBJECT_DETAIL = / \(uid [^)]*\)/g;

export function renderNotes(notes: readonly ObjectNote[], verbose: boolean): string[] {
  if (verbose) return notes.map((n) => `note: ${n.id}: ${n.note}`);
  const groups = new Map<string, ObjectNote[]>();
  for (const n of notes) {
    const key = n.note.replace(PER_OBJECT_DETAIL, '');
    const g = groups.get(key);
    if (g) g.push(n);
    else groups.set(key, [n]);
  }
  return [...groups].map(([key, g]) => (g.length === 1 ? `note: ${g[0]!.id}: ${g[0]!.note}` : `note: ${g.length} objects: ${key} (-v lists them)`));
}
