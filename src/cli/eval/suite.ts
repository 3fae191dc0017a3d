// An eval suite file as `errand eval run` reads it and `errand eval from-git` writes it: YAML
// (or JSON, which is YAML too, read as JSON when the name ends in .json). The server checks
// the suite's fields (a bad one is a 400 naming it); this only makes sure it is an object with
// a list of tasks, so that a wrong file is told as such before anything is sent.
import { readFile, writeFile } from 'node:fs/promises';
import { parse, stringify } from 'yaml';
import type { EvalSuite } from '../../client/index.ts';
import { isRecord } from '../../json.ts';
import { CliError } from '../errors.ts';

/** The suite in `path`. */
export async function readSuite(path: string): Promise<EvalSuite> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(
      `cannot read the suite ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  let value: unknown;
  try {
    value = path.endsWith('.json') ? JSON.parse(text) : parse(text);
  } catch (err) {
    const kind = path.endsWith('.json') ? 'JSON' : 'YAML';
    throw new CliError(
      `the suite ${path} is not valid ${kind}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (!isRecord(value) || !Array.isArray(value.tasks))
    throw new CliError(`the suite ${path} is not a suite: an object with a list of tasks`);
  return value as unknown as EvalSuite;
}

/** Writes the suite as YAML, with a comment at the top saying where it came from. */
export async function writeSuite(path: string, suite: EvalSuite, origin: string): Promise<void> {
  const comment = origin
    .split('\n')
    .map((line) => `# ${line}`.trimEnd())
    .join('\n');
  await writeFile(path, `${comment}\n${stringify(suite, { lineWidth: 0 })}`);
}
