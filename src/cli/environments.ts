// `errand environment …`: a project's environments through the admin API: the snapshots its
// workers keep of what the setup command left in the checkout, dropping them, and a rebuild in
// the background.
import type { Environment } from '../client/index.ts';
import { formatBytes, formatMs } from '../words.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import { COMMON_OPTIONS, defineCommand, type Family, print } from './command.ts';
import { EXIT } from './errors.ts';

const PROJECT = { project: { type: 'string', value: 'ID', required: true } } as const;

function environmentLine(e: Environment): string {
  return `${e.key}  ${e.worker}  ${formatBytes(e.sizeBytes)}  ${e.files.toLocaleString('en-US')} files  built in ${formatMs(e.buildMs)}  last used ${e.lastUsedAt}`;
}

const list = defineCommand({
  name: 'environment list',
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary:
    "the snapshots the workers keep of the project's environment, the one used last first: key, worker, size, files, build time, last use",
  async run({ values, io }) {
    const environments = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.listEnvironments(),
      values.project,
    );
    const text =
      environments.length === 0
        ? 'no environments kept'
        : environments.map(environmentLine).join('\n');
    print(io, values.json, environments, text);
    return EXIT.ok;
  },
});

const remove = defineCommand({
  name: 'environment delete',
  args: ['[KEY]'],
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary:
    'drop the snapshots of KEY on every worker, or without KEY every snapshot of the project: the next turn or build makes a new one',
  async run({ values, args: [key], io }) {
    const deleted = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.deleteEnvironments(key),
      values.project,
    );
    const what = deleted === 1 ? '1 environment' : `${deleted} environments`;
    print(
      io,
      values.json,
      { ...(key !== undefined ? { key } : {}), deleted },
      `deleted ${what}${key !== undefined ? ` of key ${key}` : ''}`,
    );
    return EXIT.ok;
  },
});

const rebuild = defineCommand({
  name: 'environment rebuild',
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: "build the project's environment again in the background (it needs a setup command)",
  async run({ values, io }) {
    await withAdminClient(io, values['data-dir'], (c) => c.rebuildEnvironment(), values.project);
    print(
      io,
      values.json,
      { queued: true },
      'a rebuild was requested: a worker builds it in the background',
    );
    return EXIT.ok;
  },
});

export const environments: Family = {
  name: 'environment',
  commands: [list, remove, rebuild],
  subcommandPages: false,
  collapsed: true,
  outro: `${ADMIN_NOTE}

An environment is what the project's setup command leaves in the checkout (node_modules, .venv…),
kept by each worker that ran it and restored by later turns instead of running the setup again.
It is built again when the setup command, its network, the secrets or the key files change
(errand project update --setup-command, --key-files…); deleting one only makes the next turn
or build make it again.`,
};
