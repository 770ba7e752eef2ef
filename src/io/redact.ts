/**
 * Last line of defence against leaking credentials into output: values registered as secret are
 * masked wherever they appear, and common credential shapes are masked by pattern.
 */
const registered = new Set<string>();

export function registerSecret(value: string | undefined): void {
  if (value && value.length >= 6) registered.add(value);
}

const CREDENTIAL_KEY = '(?:password|passwd|secret|token|apikey|api_key|secretAccessKey|aws_secret_access_key)';

const PATTERNS: RegExp[] = [
  /(PVEAPIToken=[^=\s]+=)[^\s"']+/g,
  // key=value, and "key": value as JSON writes it.
  new RegExp(`(${CREDENTIAL_KEY}["']?\\s*=\\s*["']?|${CREDENTIAL_KEY}["']\\s*:\\s*["']?)[^\\s"',}]+`, 'gi'),
  // key: value as YAML writes it: a quoted value, or one that ends the line or the flow item. Not prose that only
  // starts with such a word, as in an error naming a file called passwd ("passwd: no such bundle").
  new RegExp(`(${CREDENTIAL_KEY}:[ \\t]*)(?:"[^"\\n]*"|'[^'\\n]*'|[^\\s"',}]+(?=[,}]|[ \\t]*$))`, 'gim'),
  /(Bearer\s+)[A-Za-z0-9._~+/-]+=*/g,
  /(-----BEGIN [A-Z ]*PRIVATE KEY-----)[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----)/g,
];

export function redact(text: string): string {
  let out = text;
  for (const v of registered) if (out.includes(v)) out = out.split(v).join('***');
  for (const re of PATTERNS) {
    // With one capture group, the callback's third argument is the match offset (a number), not a group.
    out = out.replace(re, (_m, a: string, b?: unknown) => (typeof b === 'string' && b.startsWith('-----END') ? `${a}***${b}` : `${a}***`));
  }
  return out;
}
