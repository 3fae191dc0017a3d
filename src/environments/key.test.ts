// The environment's key on real git checkouts: the lock files anywhere in the tree (by their
// blob ids), the setup command, its network and its secrets' names change it; other files, the
// secrets' values and the sandbox's edits of a lock file do not.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { git, makeTempDir, removeDir, testConfig, writeFiles } from '../../test/support/git.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { DEFAULT_ENVIRONMENT_KEY_FILES } from '../records/project.ts';
import { environmentKey, type KeyedProject, keyFilePathspecs } from './key.ts';

describe('environmentKey', () => {
  let tmp: string;
  let dir: string;
  const cfg = () => testConfig(join(tmp, 'ws'));
  const project: KeyedProject = {
    setup_command: 'npm ci',
    environment_key_files: null,
    network_setup: 'none',
    network_allow: [],
  };
  const key = (p: Partial<KeyedProject> = {}, secrets: TurnSecret[] = []) =>
    environmentKey(cfg(), { dir, project: { ...project, ...p }, secrets });
  const commit = async (files: Record<string, string>) => {
    await writeFiles(dir, files);
    git(dir, 'add', '--all');
    git(dir, 'commit', '--quiet', '-m', 'change');
  };

  before(async () => {
    tmp = await makeTempDir('env-key');
    dir = join(tmp, 'repo');
    git(tmp, 'init', '--quiet', dir);
    await commit({
      'README.md': '# demo\n',
      'package-lock.json': '{"v":1}\n',
      'services/api/requirements-dev.txt': 'pytest==8\n',
    });
  });
  after(() => removeDir(tmp));

  it('changes with a lock file at any depth, and with nothing else of the tree', async () => {
    const first = await key();
    assert.match(first, /^[0-9a-f]{64}$/);
    assert.equal(await key(), first);
    await commit({ 'README.md': '# changed\n', 'src/app.js': 'x\n' });
    assert.equal(await key(), first, 'a file that is no key file changed the key');
    await commit({ 'services/api/requirements-dev.txt': 'pytest==9\n' });
    const second = await key();
    assert.notEqual(second, first);
    await commit({ 'web/yarn.lock': '# yarn\n' });
    assert.notEqual(await key(), second, 'a new lock file deep in the tree');
  });

  it('reads the index, not the working tree: the sandbox editing a lock file changes nothing', async () => {
    const before = await key();
    await writeFile(join(dir, 'package-lock.json'), '{"v":"edited"}\n');
    assert.equal(await key(), before);
    git(dir, 'checkout', '--', 'package-lock.json');
  });

  it('changes with the command, the network, the secrets’ names and exposures, not their values', async () => {
    const base = await key();
    assert.notEqual(await key({ setup_command: 'npm install' }), base);
    assert.notEqual(await key({ network_setup: 'open' }), base);
    const allow = await key({ network_setup: 'allowlist', network_allow: ['@npm'] });
    assert.notEqual(await key({ network_setup: 'allowlist', network_allow: ['@pypi'] }), allow);
    // Patterns are ignored where the mode does not use them.
    assert.equal(await key({ network_allow: ['@npm'] }), base);
    const token = (value: string, exposure: TurnSecret['exposure'] = 'setup') => [
      { name: 'NPM_TOKEN', value, exposure },
    ];
    const withToken = await key({}, token('value-one-123456'));
    assert.notEqual(withToken, base);
    assert.equal(await key({}, token('value-two-654321')), withToken);
    assert.notEqual(await key({}, token('value-one-123456', 'commands')), withToken);
  });

  it('takes the project’s globs instead of the defaults; none at all keys on the command alone', async () => {
    const own = await key({ environment_key_files: ['services/*/requirements*.txt'] });
    await commit({ 'package-lock.json': '{"v":2}\n' });
    assert.equal(await key({ environment_key_files: ['services/*/requirements*.txt'] }), own);
    const none = await key({ environment_key_files: [] });
    await commit({ 'services/api/requirements-dev.txt': 'pytest==10\n' });
    assert.notEqual(await key({ environment_key_files: ['services/*/requirements*.txt'] }), own);
    assert.equal(await key({ environment_key_files: [] }), none);
  });

  it('makes git pathspecs from the top of the tree; the defaults match at any depth', () => {
    assert.ok(DEFAULT_ENVIRONMENT_KEY_FILES.includes('**/package-lock.json'));
    assert.ok(DEFAULT_ENVIRONMENT_KEY_FILES.includes('**/go.sum'));
    assert.deepEqual(keyFilePathspecs(['yarn.lock', 'a/b.lock', 'x/**/c.lock']), [
      ':(glob,top)yarn.lock',
      ':(glob,top)a/b.lock',
      ':(glob,top)x/**/c.lock',
    ]);
  });
});
