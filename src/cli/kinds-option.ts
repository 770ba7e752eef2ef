import type { Argv } from 'yargs';

/**
 * `--kinds`, the same on every command that takes it (diff, restore): repeated or comma-separated, as kubectl takes
 * `get pods,services`. restore once took only the repeated form and refused `--kinds IPAMHandle,IPAMBlock` as one
 * unknown kind while diff took it.
 */
export function withKindsOption<T>(y: Argv<T>, describe: string): Argv<T & { kinds?: string[] }> {
  return y.option('kinds', { type: 'string', array: true, describe: `${describe}; comma-separated or repeated` }).coerce('kinds', (v: string[] | undefined) =>
    v
      ?.flatMap((x) => String(x).split(','))
      .map((x) => x.trim())
      .filter(Boolean),
  ) as unknown as Argv<T & { kinds?: string[] }>;
}
