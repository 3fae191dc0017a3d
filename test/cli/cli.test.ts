// The `errand` CLI as a user runs it: a real process talking to a running service.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mintKey } from '../../src/keys/format.ts';
import { type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService } from '../support/service.ts';

describe('errand CLI', () => {
  let svc: TestService;

  before(async () => {
    svc = await startTestService({ worker: false });
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
    runCli(svc, args, env);

  const json = (run: Run) => {
    assert.equal(run.code, 0, run.stderr);
    return JSON.parse(run.stdout) as Record<string, unknown>;
  };

  test('project create and list print exactly one JSON document with --json', async () => {
    const created = json(
      await cli(['project', 'create', '--name', 'cli', '--repo', '.', '--ref', 'main', '--json']),
    );
    assert.match(String(created.id), /^prj_/);
    assert.equal(created.repository, svc.database.dataDir, 'a relative path is made absolute');
    assert.equal(created.ref, 'main');
    const list = JSON.parse((await cli(['project', 'list', '--json'])).stdout) as Array<{
      id: string;
    }>;
    assert.ok(list.some((p) => p.id === created.id));
    const text = await cli(['project', 'list']);
    assert.match(text.stdout, new RegExp(String(created.id)));
  });

  test('key create prints the key once; a revoked key stops working', async () => {
    const project = json(
      await cli(['project', 'create', '--name', 'keys', '--repo', svc.database.dataDir, '--json']),
    );
    const key = json(
      await cli(['key', 'create', '--project', String(project.id), '--name', 'ci', '--json']),
    );
    assert.match(String(key.key), /^errand_/);
    assert.equal(key.projectId, project.id);
    const admin = json(await cli(['key', 'create', '--admin', '--json']));
    assert.equal(admin.admin, true);
    const listed = JSON.parse((await cli(['key', 'list', '--json'])).stdout) as Array<
      Record<string, unknown>
    >;
    assert.ok(listed.some((k) => k.id === key.id));
    assert.ok(!JSON.stringify(listed).includes(String(key.key)), 'key list shows a key');
    const jobs = `/v2/agent/${project.id}/jobs`;
    assert.equal((await svc.request('GET', jobs, { key: String(key.key) })).status, 200);
    json(await cli(['key', 'revoke', String(key.id), '--json']));
    assert.equal((await svc.request('GET', jobs, { key: String(key.key) })).status, 401);
    // The new admin key works for the CLI too.
    assert.equal(
      (await cli(['project', 'list', '--json'], { ERRAND_API_KEY: String(admin.key) })).code,
      0,
    );
  });

  test('project update sets the forge; a token is refused without ERRAND_SECRET_KEY', async () => {
    const project = json(
      await cli(['project', 'create', '--name', 'forge', '--repo', svc.database.dataDir, '--json']),
    );
    assert.deepEqual((project.forge as { kind: string }).kind, 'git');
    const updated = json(
      await cli([
        'project',
        'update',
        String(project.id),
        '--repo',
        'https://github.com/acme/app.git',
        '--forge-token-env',
        'ERRAND_FORGE_TOKEN_GITHUB',
        '--draft-prs',
        'false',
        '--json',
      ]),
    );
    assert.deepEqual(updated.forge, {
      kind: 'github',
      apiUrl: 'https://api.github.com',
      inferred: true,
      credentials: 'token-env',
      tokenEnv: 'ERRAND_FORGE_TOKEN_GITHUB',
    });
    assert.equal(updated.draftPullRequests, false);
    const refused = await cli([
      'project',
      'update',
      String(project.id),
      '--forge-token',
      'ghp_abcdefghijklmnop',
    ]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /ERRAND_SECRET_KEY/);
    assert.doesNotMatch(refused.stderr, /ghp_abcdefghijklmnop/);
  });

  test('project create and update set the budgets; default or an empty value removes one', async () => {
    const created = await cli([
      'project',
      'create',
      '--name',
      'budgets',
      '--repo',
      svc.database.dataDir,
      '--job-budget',
      '2.50',
      '--monthly-budget',
      '$100',
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /; budget \$2\.50 per job, \$100\.00 per month\)\n$/);
    const id = /created project (prj_\w+)/.exec(created.stdout)?.[1] ?? '';
    const stored = await svc.request('GET', `/v2/admin/projects/${id}`);
    assert.equal(stored.json.jobBudgetUsd, 2.5);
    assert.equal(stored.json.monthlyBudgetUsd, 100);
    const updated = json(
      await cli([
        'project',
        'update',
        id,
        '--job-budget',
        'default',
        '--monthly-budget',
        '',
        '--json',
      ]),
    );
    assert.equal(updated.jobBudgetUsd, null);
    assert.equal(updated.monthlyBudgetUsd, null);
    // A bad amount is the command line's fault: exit 2, nothing sent.
    const bad = await cli(['project', 'update', id, '--job-budget', 'lots']);
    assert.equal(bad.code, 2);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr, /--job-budget must be an amount of US dollars above 0/);
    // A model without a known price cannot be held to a budget: the server says so.
    const unpriced = await cli([
      'project',
      'update',
      id,
      '--model',
      'openai-compatible:local-coder',
      '--monthly-budget',
      '5',
    ]);
    assert.equal(unpriced.code, 1);
    assert.match(
      unpriced.stderr,
      /cannot hold model 'openai-compatible:local-coder': its prices are unknown/,
    );
    assert.equal((await svc.request('GET', `/v2/admin/projects/${id}`)).json.model, null);
  });

  test("project create, update and show: the pull request watch's settings", async () => {
    const created = await cli([
      'project',
      'create',
      '--name',
      'watched',
      '--repo',
      svc.database.dataDir,
      '--autofix-attempts',
      '3',
      '--autofix-checks',
      'ci/*, build (ubuntu-latest), test {22,24},lint',
      '--auto-merge',
      'green-and-approved',
      '--merge-method',
      'squash',
      '--conflict-strategy',
      'rebase',
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /; merges its pull requests when green and approved\)\n$/);
    const id = /created project (prj_\w+)/.exec(created.stdout)?.[1] ?? '';
    const stored = (await svc.request('GET', `/v2/admin/projects/${id}`)).json;
    assert.equal(stored.autofixAttempts, 3);
    // Commas split the globs, except inside braces; spaces are the check names' own.
    assert.deepEqual(stored.autofixChecks, [
      'ci/*',
      'build (ubuntu-latest)',
      'test {22,24}',
      'lint',
    ]);
    assert.equal(stored.autoMerge, 'green-and-approved');
    assert.equal(stored.mergeMethod, 'squash');
    assert.equal(stored.conflictStrategy, 'rebase');

    const shown = await cli(['project', 'show', id]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`^${id} \\(watched\\)\n`));
    assert.match(
      shown.stdout,
      /\n {2}autofix: {2}up to 3 turns in a row for failing checks \(ci\/\*, build \(ubuntu-latest\), test \{22,24\}, lint\)\n {2}merge: {4}when green and approved, method squash\n {2}conflict: a turn rebases the branch onto the base\n/,
    );
    assert.deepEqual(json(await cli(['project', 'show', id, '--json'])), stored);

    const updated = json(
      await cli([
        'project',
        'update',
        id,
        '--autofix-attempts',
        '0',
        '--autofix-checks',
        'all',
        '--auto-merge',
        'off',
        '--json',
      ]),
    );
    assert.equal(updated.autofixAttempts, 0);
    assert.equal(updated.autofixChecks, null);
    assert.equal(updated.autoMerge, 'off');
    assert.equal(updated.mergeMethod, 'squash', 'a setting not given is kept');
    const off = await cli(['project', 'show', id]);
    assert.match(off.stdout, /\n {2}autofix: {2}off\n {2}merge: {4}by a person \(auto-merge off\)/);

    // A choice the flag does not take, or a count that is no number: exit 2, nothing sent.
    for (const [flag, value, message] of [
      ['--auto-merge', 'always', /--auto-merge/],
      ['--merge-method', 'fast-forward', /--merge-method/],
      ['--conflict-strategy', 'squash', /--conflict-strategy/],
      ['--autofix-attempts', 'two', /--autofix-attempts must be a whole number/],
    ] as const) {
      const bad = await cli(['project', 'update', id, flag, value]);
      assert.equal(bad.code, 2, `${flag} ${value}: ${bad.stderr}`);
      assert.equal(bad.stdout, '');
      assert.match(bad.stderr, message);
    }
    // The range is the server's to check: it names the field.
    const many = await cli(['project', 'update', id, '--autofix-attempts', '11']);
    assert.equal(many.code, 1);
    assert.match(many.stderr, /"autofixAttempts" must be a whole number from 0 to 10/);
    assert.equal((await svc.request('GET', `/v2/admin/projects/${id}`)).json.autofixAttempts, 0);
  });

  test('project create, update and show: the check command of best-of-N attempts', async () => {
    const created = await cli([
      'project',
      'create',
      '--name',
      'checked',
      '--repo',
      svc.database.dataDir,
      '--check-command',
      "npm test -- --grep 'the fix'",
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /; attempts checked by a command/);
    const id = /created project (prj_\w+)/.exec(created.stdout)?.[1] ?? '';
    const read = async () => (await svc.request('GET', `/v2/admin/projects/${id}`)).json;
    assert.equal((await read()).checkCommand, "npm test -- --grep 'the fix'");

    const shown = await cli(['project', 'show', id]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /\n {2}check: {4}npm test -- --grep 'the fix'\n/);

    const updated = json(
      await cli(['project', 'update', id, '--check-command', 'make check', '--json']),
    );
    assert.equal(updated.checkCommand, 'make check');
    const renamed = json(await cli(['project', 'update', id, '--name', 'renamed', '--json']));
    assert.equal(renamed.checkCommand, 'make check', 'a setting not given is kept');

    // Only spaces is the server's to refuse, naming the field; nothing changes.
    const blank = await cli(['project', 'update', id, '--check-command', '   ']);
    assert.equal(blank.code, 1, blank.stderr);
    assert.equal(blank.stdout, '');
    assert.match(blank.stderr, /"checkCommand" must be a command of at most 4000 characters/);
    assert.equal((await read()).checkCommand, 'make check');

    // '' removes it; show then leaves the line out.
    const removed = json(await cli(['project', 'update', id, '--check-command', '', '--json']));
    assert.equal(removed.checkCommand, null);
    assert.doesNotMatch((await cli(['project', 'show', id])).stdout, /\n {2}check:/);
    const help = await cli(['help', 'project']);
    assert.match(help.stdout, /\[--check-command CMD\]/);
  });

  test('errors go to stderr with a non-zero exit and nothing on stdout', async () => {
    const cases: Array<[string[], RegExp, Record<string, string>?]> = [
      [['project', 'create', '--repo', '/tmp', '--json'], /--name is required/],
      [
        ['project', 'create', '--name', 'x', '--repo', 'ext::sh -c touch% /tmp/pwned', '--json'],
        /invalid "repository".*HTTP 400/,
      ],
      [['key', 'create', '--json'], /exactly one of --project ID or --admin/],
      [['key', 'revoke', 'key_nope'], /not found.*HTTP 404/],
      [['project', 'list'], /unknown API key.*HTTP 401/, { ERRAND_API_KEY: mintKey() }],
      [['project', 'list'], /cannot reach Errand/, { ERRAND_URL: 'http://127.0.0.1:9' }],
      [['worker'], /needs DATABASE_URL/],
      [['frobnicate'], /unknown command/],
      [
        ['project', 'list', '--bogus'],
        /^errand project: unknown option --bogus\b.*\n\nUsage: errand project /,
      ],
    ];
    for (const [args, message, env] of cases) {
      const run = await cli(args, env);
      assert.notEqual(run.code, 0, `${args.join(' ')} exited 0`);
      assert.equal(run.stdout, '', `${args.join(' ')} wrote to stdout`);
      assert.match(run.stderr, message, args.join(' '));
      assert.doesNotMatch(run.stderr, /\n\s+at /, `${args.join(' ')} printed a stack trace`);
    }
  });
});
