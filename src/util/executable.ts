import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

const isExecutableFile = (p: string) => {
  try {
    accessSync(p, constants.X_OK);
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

/**
 * A program to run: the path given on this run's command line (which must be an executable file), else `name` on
 * this run's PATH. Returns an absolute path, or why there is none (for the caller's one-line refusal). Never read from
 * a plan file or a bundle: what runs is the user's choice on the command line.
 */
export function findExecutable(name: string, given: string | undefined, env: NodeJS.ProcessEnv = process.env): { path: string } | { missing: string } {
  if (given) return isExecutableFile(given) ? { path: path.resolve(given) } : { missing: `${given} is not an executable file` };
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    if (isExecutableFile(candidate)) return { path: candidate };
  }
  return { missing: `${name} is not on PATH` };
}
