/**
 * The last non-empty line of a program's message (helm's, calicoctl's), without control characters, at most 300
 * characters: what a one-line error shows of a program whose output is otherwise never shown.
 */
export function lastLine(text: string): string {
  const line =
    text
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .pop() ?? '';
  const clean = line.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > 300 ? `${clean.slice(0, 300)}...` : clean;
}
