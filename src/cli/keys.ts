// `errand key create|list|revoke`: API keys through the admin API. A new key is printed once:
// only its hash is stored. `errand key generate` makes one here, for ERRAND_ADMIN_KEY.
import type { ApiKey } from '../client/index.ts';
import { mintKey } from '../keys/format.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import { COMMON_OPTIONS, defineCommand, type Family, print } from './command.ts';
import { EXIT } from './errors.ts';

const create = defineCommand({
  name: 'key create',
  options: {
    project: { type: 'string', value: 'ID', either: 'scope', required: true },
    admin: { type: 'boolean', either: 'scope', required: true },
    name: { type: 'string', value: 'NAME' },
    ...COMMON_OPTIONS,
  },
  summary: 'a key for one project, or an admin key; prints the key, shown once',
  async run({ values, io }) {
    const created = await withAdminClient(io, values['data-dir'], (c) =>
      c.createKey({
        ...(values.admin ? { admin: true } : { projectId: values.project }),
        ...(values.name ? { name: values.name } : {}),
      }),
    );
    print(
      io,
      values.json,
      created,
      `created ${created.admin ? 'admin' : `project ${created.projectId}`} key ${created.id} (shown once):\n  ${created.key}`,
    );
    return EXIT.ok;
  },
});

const list = defineCommand({
  name: 'key list',
  options: COMMON_OPTIONS,
  summary: 'every key, without its secret',
  async run({ values, io }) {
    const keys = await withAdminClient(io, values['data-dir'], (c) => c.listKeys());
    const line = (k: ApiKey) =>
      `${k.id}  ${k.start}…  ${k.admin ? 'admin' : k.projectId}  ${k.name ?? ''}${k.revokedAt ? '  (revoked)' : ''}`;
    print(io, values.json, keys, keys.length === 0 ? 'no keys' : keys.map(line).join('\n'));
    return EXIT.ok;
  },
});

const revoke = defineCommand({
  name: 'key revoke',
  args: ['ID'],
  options: COMMON_OPTIONS,
  summary: 'the key stops working at once',
  async run({ values, args: [id = ''], io }) {
    const key = await withAdminClient(io, values['data-dir'], (c) => c.revokeKey(id));
    print(io, values.json, key, `revoked key ${key.id}`);
    return EXIT.ok;
  },
});

const generate = defineCommand({
  name: 'key generate',
  options: { json: COMMON_OPTIONS.json },
  summary: 'prints a new key without storing it anywhere: the value for ERRAND_ADMIN_KEY',
  async run({ values, io }) {
    const key = mintKey();
    print(io, values.json, { key }, key);
    return EXIT.ok;
  },
});

export const keys: Family = {
  name: 'key',
  commands: [create, list, revoke, generate],
  subcommandPages: false,
  outro: `${ADMIN_NOTE}
\`key generate\` asks no API: it prints a new admin key, stored nowhere, for ERRAND_ADMIN_KEY
(the first admin key of a deploy, docs/deploy.md#the-first-admin-key).`,
};
