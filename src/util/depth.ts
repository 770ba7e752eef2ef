/**
 * Nesting depth of data from outside. The code that walks objects (diff, normalisation, schema checks, YAML
 * dumps) recurses, so an object nested thousands deep would overflow the stack there, long after it was accepted.
 */

/** Is any value nested deeper than `max` levels? Iterative, so it cannot overflow itself. */
export function depthExceeds(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (d > max) return true;
    for (const c of Object.values(v)) if (c && typeof c === 'object') stack.push([c, d + 1]);
  }
  return false;
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The deepest nesting of JSON text fed in chunks, without parsing it: brackets outside strings are counted
 * (a JSON string holds no raw quote except escaped, and every byte of a multi-byte UTF-8 character is >= 0x80).
 */
export class JsonDepthScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  deepest = 0;

  update(chunk: Uint8Array): void {
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (b === BACKSLASH) this.escaped = true;
        else if (b === QUOTE) this.inString = false;
      } else if (b === QUOTE) this.inString = true;
      else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
        if (++this.depth > this.deepest) this.deepest = this.depth;
      } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) this.depth--;
    }
  }
}
