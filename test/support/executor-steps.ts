/**
 * Synthetic steps with side effects in a folder, used by executor.test.ts both in-process and in a
 * child process that kills itself at a step boundary. `effects` logs every effect; `replicas` plays the operator's
 * replica count (step 2 remembers it before setting it to 0, step 4 puts the remembered value back).
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ExecStep } from '../../src/apply/executor.js';

export function syntheticSteps(dir: string): ExecStep[] {
  const effect = (id: string) => appendFileSync(path.join(dir, 'effects'), id + '\n');
  const replicas = path.join(dir, 'replicas');
  return [
    { id: 'one', title: 'step one', run: async () => effect('one') },
    {
      id: 'pause',
      title: 'pause',
      run: async (rt) => {
        if (rt.recall('replicas') === undefined) rt.remember('replicas', Number(readFileSync(replicas, 'utf8')));
        writeFileSync(replicas, '0');
        effect('pause');
      },
    },
    { id: 'three', title: 'step three', run: async () => effect('three') },
    {
      id: 'resume',
      title: 'resume',
      run: async (rt) => {
        writeFileSync(replicas, String(rt.recall('replicas')));
        effect('resume');
        return `replicas ${rt.recall('replicas')}`;
      },
    },
  ];
}
