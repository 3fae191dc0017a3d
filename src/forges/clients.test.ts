// The context's forges: one client per project version, remade when the project changes, and
// a repository checked at save time without any credentials.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import { Metrics } from '../metrics/metrics.ts';
import { seal } from '../secrets/box.ts';
import { Forges } from './clients.ts';
import { ForgeError } from './types.ts';

const SECRET_KEY = 'test-secret-key-for-errand-forges';
const config = loadConfig({
  ERRAND_DATA_DIR: '/tmp/errand-forges-test',
  ERRAND_SECRET_KEY: SECRET_KEY,
});

// Sealed once: sealing again gives another ciphertext, which is another setting.
const SEALED = `token:${seal(SECRET_KEY, JSON.stringify({ token: 'ghp_test' }))}`;

function project(fields: Partial<ProjectRow> = {}): ProjectRow {
  return {
    id: 'prj_forges0000000000000',
    name: 'p',
    repository: 'https://github.com/octo/repo.git',
    ref: 'main',
    model: null,
    forge_kind: null,
    forge_api_url: null,
    forge_token_env: null,
    forge_secret: SEALED,
    draft_pull_requests: false,
    commands_enabled: true,
    setup_command: null,
    maintenance_command: null,
    environment_key_files: null,
    network_setup: 'none',
    network_commands: 'none',
    network_allow: [],
    command_timeout_seconds: null,
    command_cpu_seconds: null,
    command_memory_mb: null,
    command_processes: null,
    command_file_size_mb: null,
    command_disk_mb: null,
    job_budget_usd: null,
    monthly_budget_usd: null,
    forge_webhook_secret: null,
    forge_handle: 'errand',
    forge_label: 'errand',
    autofix_attempts: 2,
    autofix_checks: null,
    auto_merge: 'off',
    merge_method: 'merge',
    conflict_strategy: 'merge',
    mcp_servers: null,
    check_command: null,
    engine: 'errand',
    created_at: new Date('2026-01-01T00:00:00Z'),
    updated_at: new Date('2026-01-01T00:00:00Z'),
    ...fields,
  };
}

describe('Forges', () => {
  it('gives every turn of a project the same client until its forge settings change', () => {
    const forges = new Forges(config, new Metrics());
    const first = forges.client(project(), 'https://github.com/octo/repo.git');
    assert.equal(first.kind, 'github');
    assert.ok(first.client);
    assert.deepEqual(first.credentials, { token: 'ghp_test' });
    assert.equal(forges.client(project(), 'https://github.com/octo/repo.git').client, first.client);
    // Other changes of the project keep the client; a change of its forge settings does not.
    const renamed = project({ name: 'q', updated_at: new Date('2026-01-02T00:00:00Z') });
    assert.equal(forges.client(renamed, 'https://github.com/octo/repo.git').client, first.client);
    const changes: Partial<ProjectRow>[] = [
      { forge_secret: `token:${seal(SECRET_KEY, JSON.stringify({ token: 'ghp_other' }))}` },
      { forge_api_url: 'https://ghe.example.com/api/v3' },
      { forge_kind: 'gitea', forge_api_url: 'https://github.com/api/v1' },
    ];
    for (const change of changes) {
      const remade = forges.client(project(change), 'https://github.com/octo/repo.git');
      assert.notEqual(remade.client, first.client, JSON.stringify(change));
    }
    // A job created before the project's repository changed keeps its own.
    assert.notEqual(
      forges.client(project(), 'https://github.com/octo/old.git').client,
      first.client,
    );
  });

  it('has no client for a plain git remote', () => {
    const forges = new Forges(config, new Metrics());
    const git = forges.client(
      project({ repository: 'https://git.example.com/r.git' }),
      'https://git.example.com/r.git',
    );
    assert.deepEqual(git, {
      kind: 'git',
      provider: undefined,
      client: undefined,
      credentials: undefined,
    });
  });

  it('remakes nothing for missing credentials: the error comes back each time', () => {
    const forges = new Forges(config, new Metrics());
    const bare = project({ forge_secret: null });
    for (let i = 0; i < 2; i++)
      assert.throws(
        () => forges.client(bare, bare.repository),
        (err) => err instanceof ForgeError && /no github credentials/.test(err.message),
      );
  });

  it('checks a repository for each forge without credentials', () => {
    const forges = new Forges(config, new Metrics());
    forges.check('github', 'https://api.github.com', 'https://github.com/octo/repo.git');
    forges.check(
      'gitlab',
      'https://gitlab.example.com/api/v4',
      'https://gitlab.example.com/group/sub/project.git',
    );
    forges.check(
      'gitea',
      'https://gitea.example.com/api/v1',
      'https://gitea.example.com/owner/repo.git',
    );
    forges.check('git', '', 'https://git.example.com/anything');
    const refused: [Parameters<Forges['check']>, RegExp][] = [
      [
        ['github', 'https://api.github.com', 'https://github.com/only-owner'],
        /not a GitHub repository URL/,
      ],
      [['github', 'ftp://api.github.com', 'https://github.com/octo/repo.git'], /GitHub API URL/],
      [
        ['gitlab', 'https://gitlab.example.com/api/v4', 'https://gitlab.example.com/project'],
        /not a GitLab project URL/,
      ],
      [
        ['gitea', 'https://gitea.example.com/api/v1', 'https://gitea.example.com/a/b/c'],
        /not a Gitea repository URL/,
      ],
    ];
    for (const [args, message] of refused)
      assert.throws(
        () => forges.check(...args),
        (err) => err instanceof ForgeError && message.test(err.message),
        args.join(' '),
      );
  });
});
