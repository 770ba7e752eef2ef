/** Reading and writing plan files (YAML, or JSON when the name ends in .json), atomically. */
import yaml from 'js-yaml';
import { writeFileAtomic } from '../bundle/writer.js';
import { BadInputError, isErrorKind } from '../core/errors.js';
import { readInputFile } from '../io/safe-file.js';
import { PLAN_API_VERSION, PLAN_KIND, type Plan } from './types.js';

export async function writePlan(file: string, plan: Plan): Promise<void> {
  const text = file.endsWith('.json') ? JSON.stringify(plan, null, 2) + '\n' : yaml.dump(plan, { noRefs: true, lineWidth: 140 });
  await writeFileAtomic(file, text);
}

export async function readPlan(file: string): Promise<Plan> {
  let text: string;
  try {
    text = readInputFile(file, 'plan file').data.toString('utf8');
  } catch (err) {
    if (isErrorKind(err, 'bad-input') && / does not exist$/.test(err.message)) throw new BadInputError(`${file}: no such plan file`);
    throw err;
  }
  let p: any;
  try {
    p = yaml.load(text); // JSON is YAML too
  } catch (err) {
    throw new BadInputError(`${file} is not a plan: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!p || p.apiVersion !== PLAN_API_VERSION || p.kind !== PLAN_KIND)
    throw new BadInputError(`${file} is not a cni-rewind plan (expected apiVersion ${PLAN_API_VERSION}, kind ${PLAN_KIND})`);
  for (const k of ['id', 'cluster', 'target', 'bundle', 'steps', 'transforms', 'options']) {
    if (!p[k]) throw new BadInputError(`${file}: the plan has no ${k}`);
  }
  if (!/^[\w.-]+$/.test(p.id)) throw new BadInputError(`${file}: the plan id ${JSON.stringify(p.id)} is not a plain name`);
  return p as Plan;
}
