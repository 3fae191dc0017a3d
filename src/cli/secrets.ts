// `errand secret …`: a project's secrets through the admin API. A value is read from stdin, or
// typed at a prompt that does not echo it, never taken from the command line (where the shell's
// history and every process listing would keep it); nothing prints one back.
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import type { Secret } from '../client/index.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import { COMMON_OPTIONS, defineCommand, type Family, print } from './command.ts';
import { CliError, EXIT } from './errors.ts';

const PROJECT = { project: { type: 'string', value: 'ID', required: true } } as const;
const EXPOSURES = ['setup', 'commands'] as const;

function secretLine(s: Secret): string {
  return `${s.name}  ${s.exposure}  set ${s.updatedAt}`;
}

/** All of stdin, without one final line break (what `echo` and a file's last line add). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** One line typed at a prompt on the terminal, not echoed. */
function prompt(question: string): Promise<string> {
  let muted = false;
  const output = new Writable({
    write(chunk, _encoding, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: true });
  return new Promise<string>((resolve, reject) => {
    rl.on('SIGINT', () => {
      rl.close();
      process.stderr.write('\n');
      reject(new CliError('cancelled: no secret was set'));
    });
    rl.question(question, (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolve(answer);
    });
    // After the question is written: what is typed is not.
    muted = true;
  });
}

const set = defineCommand({
  name: 'secret set',
  args: ['NAME'],
  options: {
    ...PROJECT,
    exposure: { type: 'string', choices: EXPOSURES },
    ...COMMON_OPTIONS,
  },
  summary:
    'create or replace a secret; its value from stdin, or typed at a prompt (never an argument)',
  unexpected:
    "unexpected argument: a secret's value is read from stdin or typed at the prompt, never given on the command line",
  async run({ values, args: [name = ''], io }) {
    const value = process.stdin.isTTY
      ? await prompt(`Value of ${name} (not shown): `)
      : await readStdin();
    const { secret, created } = await withAdminClient(
      io,
      values['data-dir'],
      (c) =>
        c.setSecret(name, {
          value,
          ...(values.exposure !== undefined ? { exposure: values.exposure } : {}),
        }),
      values.project,
    );
    print(
      io,
      values.json,
      { ...secret, created },
      `${created ? 'created' : 'replaced'} secret ${secret.name} (exposure ${secret.exposure})`,
    );
    return EXIT.ok;
  },
});

const list = defineCommand({
  name: 'secret list',
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: "the project's secrets: names, exposures and when each was set, never a value",
  async run({ values, io }) {
    const secrets = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.listSecrets(),
      values.project,
    );
    const text = secrets.length === 0 ? 'no secrets' : secrets.map(secretLine).join('\n');
    print(io, values.json, secrets, text);
    return EXIT.ok;
  },
});

const remove = defineCommand({
  name: 'secret delete',
  args: ['NAME'],
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: 'delete a secret: turns that start from now on do not get it',
  async run({ values, args: [name = ''], io }) {
    await withAdminClient(io, values['data-dir'], (c) => c.deleteSecret(name), values.project);
    print(io, values.json, { name, deleted: true }, `deleted secret ${name}`);
    return EXIT.ok;
  },
});

export const secrets: Family = {
  name: 'secret',
  commands: [set, list, remove],
  subcommandPages: false,
  collapsed: true,
  outro: `${ADMIN_NOTE}

A secret's value is read from stdin (one final line break dropped), or typed at a prompt that
does not show it: \`errand secret set NPM_TOKEN --project ID < token.txt\`. The setup command
gets every secret in its environment; --exposure commands also gives it to the agent's commands
and an engine's shell. No model and no output ever shows a value.`,
};
