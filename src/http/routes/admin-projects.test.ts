// The admin project routes: POST /v2/admin/projects, GET /v2/admin/projects,
// GET /v2/admin/projects/{id} and PATCH /v2/admin/projects/{id}. Mostly the validation of what
// a project may name as its repository, ref, model and forge token variable, each refusal
// checked to store nothing; and the common auth and body cases. The other forge fields are
// tested in test/forges and test/cli.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  countRows,
  createRouteFixture,
  isoNear,
  jsonBodyCases,
  PROJECT_ID,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { DEFAULT_LIMITS } from '../../projects/limits.ts';

const HTTPS_REPO = 'https://github.com/acme/widgets.git';

const createSpec: RouteSpec = {
  method: 'POST',
  scope: 'admin',
  path: () => '/v2/admin/projects',
  body: () => ({ name: 'from the common cases', repository: HTTPS_REPO }),
};
const listSpec: RouteSpec = { method: 'GET', scope: 'admin', path: () => '/v2/admin/projects' };
const getSpec: RouteSpec = {
  method: 'GET',
  scope: 'admin',
  path: ({ projectId }) => `/v2/admin/projects/${projectId}`,
};

const patchSpec: RouteSpec = {
  method: 'PATCH',
  scope: 'admin',
  path: ({ projectId }) => `/v2/admin/projects/${projectId}`,
  // Renames the fixture project to its own name: accepted, and changes nothing that matters.
  body: (fx) => ({ name: fx.project.name }),
};

const PROJECT_FIELDS = [
  'autoMerge',
  'autofixAttempts',
  'autofixChecks',
  'checkCommand',
  'commandCpuSeconds',
  'commandDiskMb',
  'commandFileSizeMb',
  'commandMemoryMb',
  'commandProcesses',
  'commandTimeoutSeconds',
  'commandsEnabled',
  'conflictStrategy',
  'createdAt',
  'draftPullRequests',
  'engine',
  'environmentKeyFiles',
  'forge',
  'forgeHandle',
  'forgeLabel',
  'forgeWebhookSecretSet',
  'id',
  'jobBudgetUsd',
  'maintenanceCommand',
  'mcpServers',
  'mergeMethod',
  'model',
  'monthlyBudgetUsd',
  'name',
  'network',
  'ref',
  'repository',
  'setupCommand',
  'setupNetwork',
  'updatedAt',
];

describe('admin project routes', () => {
  // svc allows local repositories; noLocal is a server with ERRAND_ALLOW_LOCAL_REPOS=false
  // whose operator also allows two forge token variables outside ERRAND_FORGE_TOKEN_*.
  let svc: TestService;
  let noLocal: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;

  before(async () => {
    [svc, noLocal] = await Promise.all([
      startTestService({ worker: false }),
      startTestService({
        worker: false,
        env: {
          ERRAND_ALLOW_LOCAL_REPOS: 'false',
          ERRAND_FORGE_TOKEN_ENV_ALLOW: 'GITHUB_TOKEN, GITLAB_TOKEN',
        },
      }),
    ]);
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await Promise.all([svc?.close(), noLocal?.close()]);
  });

  const post = (body: unknown, s: TestService = svc) =>
    s.request('POST', '/v2/admin/projects', { body });

  /** Asserts that creating a project with `fields` is refused with a 400 and stores nothing. */
  const refused = async (fields: Record<string, unknown>, pattern: RegExp, s = svc) => {
    const body = { name: 'refused', repository: HTTPS_REPO, ...fields };
    const res = await unchanged(s, () => post(body, s));
    assertError(res, 400, 'bad_request');
    assert.match(res.json.error ?? '', pattern, JSON.stringify(fields));
  };

  describe('happy path', () => {
    test('POST: 201 with the project record, readable by id and in the list', async () => {
      const res = await post({
        name: '  Widgets  ',
        repository: HTTPS_REPO,
        ref: 'develop',
        model: 'openai:gpt-5',
      });
      assert.equal(res.status, 201, res.text);
      const project = res.json;
      assert.deepEqual(Object.keys(project).sort(), PROJECT_FIELDS);
      assert.match(project.id ?? '', PROJECT_ID);
      assert.equal(project.name, 'Widgets');
      assert.equal(project.repository, HTTPS_REPO);
      assert.equal(project.ref, 'develop');
      assert.equal(project.model, 'openai:gpt-5');
      // Commands: on, no setup, no network, the sandbox's default limits.
      assert.equal(project.commandsEnabled, true);
      assert.equal(project.setupCommand, null);
      assert.equal(project.maintenanceCommand, null);
      assert.equal(project.checkCommand, null);
      assert.equal(project.environmentKeyFiles, null);
      assert.equal(project.setupNetwork, false);
      assert.deepEqual(project.network, { setup: 'none', commands: 'none', allow: [] });
      assert.equal(project.commandTimeoutSeconds, DEFAULT_LIMITS.timeoutSeconds);
      assert.equal(project.commandCpuSeconds, DEFAULT_LIMITS.cpuSeconds);
      assert.equal(project.commandMemoryMb, DEFAULT_LIMITS.memoryMb);
      assert.equal(project.commandProcesses, DEFAULT_LIMITS.processes);
      assert.equal(project.commandFileSizeMb, DEFAULT_LIMITS.fileSizeMb);
      assert.equal(project.commandDiskMb, DEFAULT_LIMITS.diskMb);
      isoNear(project.createdAt);
      isoNear(project.updatedAt);

      const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
      assert.equal(read.status, 200);
      assert.deepEqual(read.json, project);

      const list = await svc.request('GET', '/v2/admin/projects');
      assert.equal(list.status, 200);
      assert.deepEqual(Object.keys(list.json), ['projects']);
      const ids = list.json.projects?.map((p) => p.id) ?? [];
      // Oldest first: the fixture's projects come before this one.
      assert.ok(ids.indexOf(fx.project.id) < ids.indexOf(project.id ?? ''));
      assert.deepEqual(
        list.json.projects?.find((p) => p.id === project.id),
        project,
      );
      assert.equal(ids.length, await countRows(svc, 'projects'));
    });

    test('defaults: ref main, model null', async () => {
      const res = await post({ name: 'defaults', repository: HTTPS_REPO });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json.ref, 'main');
      assert.equal(res.json.model, null);
      const nulls = await post({ name: 'nulls', repository: HTTPS_REPO, ref: null, model: null });
      assert.equal(nulls.status, 201, nulls.text);
      assert.equal(nulls.json.ref, 'main');
      assert.equal(nulls.json.model, null);
    });

    test('accepted repositories: https, ssh://, git@host:path, an existing local directory', async () => {
      const dir = svc.database.dataDir;
      const cases: [string, string][] = [
        [HTTPS_REPO, HTTPS_REPO],
        ['https://gitlab.example.com/group/sub/repo', 'https://gitlab.example.com/group/sub/repo'],
        ['ssh://git@github.com/acme/widgets.git', 'ssh://git@github.com/acme/widgets.git'],
        [
          'ssh://git@git.example.com:2222/acme/widgets.git',
          'ssh://git@git.example.com:2222/acme/widgets.git',
        ],
        ['git@github.com:acme/widgets.git', 'git@github.com:acme/widgets.git'],
        [dir, dir],
        [`file://${dir}`, dir],
      ];
      for (const [repository, stored] of cases) {
        const res = await post({ name: 'repo', repository });
        assert.equal(res.status, 201, `${repository}: ${res.text}`);
        assert.equal(res.json.repository, stored);
      }
    });

    test('accepted refs and model ids', async () => {
      for (const ref of ['main', 'release/1.x', 'v1.2.3', 'feature/foo-bar_baz', 'a+b']) {
        const res = await post({ name: 'ref', repository: HTTPS_REPO, ref });
        assert.equal(res.status, 201, `${ref}: ${res.text}`);
        assert.equal(res.json.ref, ref);
      }
      for (const model of [
        'anthropic:claude-sonnet-4-5',
        'openai:gpt-5',
        'google:gemini-2.5-pro',
        'openai-compatible:meta/llama-3.1@q4',
      ]) {
        const res = await post({ name: 'model', repository: HTTPS_REPO, model });
        assert.equal(res.status, 201, `${model}: ${res.text}`);
        assert.equal(res.json.model, model);
      }
    });

    test('plain http:// to a loopback host, for the repository and the forge API, where local repositories are allowed', async () => {
      for (const repository of [
        'http://127.0.0.1:3000/acme/app.git',
        'http://localhost/acme/app.git',
        'http://[::1]:8080/acme/app.git',
      ]) {
        const res = await post({ name: 'loopback', repository });
        assert.equal(res.status, 201, `${repository}: ${res.text}`);
        assert.equal(res.json.repository, repository);
      }
      const gitea = await post({
        name: 'loopback forge',
        repository: 'http://127.0.0.1:3000/acme/app.git',
        forge: 'gitea',
        forgeUrl: 'http://127.0.0.1:3000/api/v1',
      });
      assert.equal(gitea.status, 201, gitea.text);
      assert.equal(gitea.json.forge?.apiUrl, 'http://127.0.0.1:3000/api/v1');
    });

    test('forgeTokenEnv: any ERRAND_FORGE_TOKEN_* name, and the names the operator allows', async () => {
      const res = await post({
        name: 'token env',
        repository: HTTPS_REPO,
        forgeTokenEnv: 'ERRAND_FORGE_TOKEN_GITHUB',
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json.forge?.credentials, 'token-env');
      assert.equal(res.json.forge?.tokenEnv, 'ERRAND_FORGE_TOKEN_GITHUB');
      const patched = await svc.request('PATCH', `/v2/admin/projects/${res.json.id}`, {
        body: { forgeTokenEnv: 'ERRAND_FORGE_TOKEN_acme_2' },
      });
      assert.equal(patched.status, 200, patched.text);
      assert.equal(patched.json.forge?.tokenEnv, 'ERRAND_FORGE_TOKEN_acme_2');
      for (const name of ['GITHUB_TOKEN', 'GITLAB_TOKEN', 'ERRAND_FORGE_TOKEN_GITLAB']) {
        const allowed = await post(
          { name: 'allowed', repository: HTTPS_REPO, forgeTokenEnv: name },
          noLocal,
        );
        assert.equal(allowed.status, 201, `${name}: ${allowed.text}`);
        assert.equal(allowed.json.forge?.tokenEnv, name);
      }
    });

    test('remote repositories still work where local ones are disabled', async () => {
      for (const repository of [HTTPS_REPO, 'git@github.com:acme/widgets.git']) {
        const res = await post({ name: 'remote', repository }, noLocal);
        assert.equal(res.status, 201, res.text);
      }
    });
  });

  describe('errors', () => {
    jsonBodyCases(createSpec, fixture);

    test('refused repositories: command-running transports and option injection', async () => {
      for (const repository of [
        'ext::sh -c x',
        'ext::sh',
        'fd::17',
        'transport::https://github.com/acme/x',
        '-oProxyCommand=touch /tmp/errand-pwned',
        '--upload-pack=touch /tmp/errand-pwned',
        '-u',
      ]) {
        await refused({ repository }, /repository/);
      }
    });

    test('refused repositories: insecure or credential-bearing URLs', async () => {
      for (const repository of [
        'http://github.com/acme/widgets.git',
        'https://user:pass@github.com/acme/widgets.git',
        'https://ghp_token@github.com/acme/widgets.git',
        'ssh://git:secret@github.com/acme/widgets.git',
        'git://github.com/acme/widgets.git',
        'ftp://example.com/x.git',
      ]) {
        await refused({ repository }, /repository/);
      }
    });

    test('refused repositories: newlines, spaces, control characters, junk', async () => {
      for (const repository of [
        'https://github.com/acme/widgets.git\nfoo',
        'https://github.com/acme/widgets.git\r',
        '\nhttps://github.com/acme/widgets.git',
        'https://github.com/acme/wid gets.git',
        'https://github.com/acme/widgets.git\u0000',
        'relative/path',
        'widgets',
        `https://github.com/${'a'.repeat(2100)}`,
      ]) {
        await refused({ repository }, /repository/);
      }
    });

    test('refused repositories: a local path that does not exist', async () => {
      for (const repository of [
        '/does/not/exist/errand',
        'file:///does/not/exist/errand',
        'file://otherhost/srv/repo',
      ]) {
        await refused({ repository }, /repository/);
      }
    });

    test('refused repositories: local paths and file:// when ERRAND_ALLOW_LOCAL_REPOS=false', async () => {
      const dir = noLocal.database.dataDir;
      for (const repository of [dir, `file://${dir}`, '/tmp']) {
        await refused({ repository }, /local repositories are disabled/, noLocal);
      }
    });

    test('refused: plain http:// to a loopback host where local repositories are disabled', async () => {
      for (const repository of [
        'http://127.0.0.1:3000/acme/app.git',
        'http://localhost/acme/app.git',
      ]) {
        await refused({ repository }, /ERRAND_ALLOW_LOCAL_REPOS/, noLocal);
      }
      await refused(
        { forge: 'gitea', forgeUrl: 'http://127.0.0.1:3000/api/v1' },
        /forgeUrl/,
        noLocal,
      );
      await refused({ forge: 'gitea', forgeUrl: 'http://gitea.example.com/api/v1' }, /forgeUrl/);
    });

    test("forgeTokenEnv: Errand's own settings and secrets, even where the operator allows other names", async () => {
      for (const name of [
        'ERRAND_SECRET_KEY',
        'DATABASE_URL',
        'ANTHROPIC_API_KEY',
        'OPENAI_API_KEY',
        'GOOGLE_GENERATIVE_AI_API_KEY',
        'ERRAND_OPENAI_COMPATIBLE_API_KEY',
        'ERRAND_API_KEY',
        'ERRAND_DATA_DIR',
        'ERRAND_FORGE_TOKEN_ENV_ALLOW',
        'ERRAND_NOT_A_SETTING_YET',
        'PGPASSWORD',
      ]) {
        for (const s of [svc, noLocal]) {
          await refused(
            { forgeTokenEnv: name },
            new RegExp(`${name} is one of Errand's own settings.*ERRAND_FORGE_TOKEN_`),
            s,
          );
        }
        const res = await unchanged(svc, () =>
          svc.request('PATCH', `/v2/admin/projects/${fx.project.id}`, {
            body: { forgeTokenEnv: name },
          }),
        );
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /forgeTokenEnv/);
      }
    });

    test('forgeTokenEnv: other names, with a message naming what is allowed and how to allow more', async () => {
      for (const name of ['GITHUB_TOKEN', 'PATH', 'AWS_SECRET_ACCESS_KEY', 'ERRAND_FORGE_TOKEN_']) {
        await refused(
          { forgeTokenEnv: name },
          new RegExp(
            `${name} is not an allowed forge token variable: use a name starting with ERRAND_FORGE_TOKEN_ .*ERRAND_FORGE_TOKEN_ENV_ALLOW`,
          ),
        );
      }
      await refused(
        { forgeTokenEnv: 'GITEA_TOKEN' },
        /GITEA_TOKEN is not an allowed .* or one of GITHUB_TOKEN, GITLAB_TOKEN;.*ERRAND_FORGE_TOKEN_ENV_ALLOW/,
        noLocal,
      );
      const res = await unchanged(svc, () =>
        svc.request('PATCH', `/v2/admin/projects/${fx.project.id}`, {
          body: { forgeTokenEnv: 'GITHUB_TOKEN' },
        }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /not an allowed forge token variable/);
    });

    test('400 for a missing or non-string repository', async () => {
      for (const repository of [
        undefined,
        '',
        42,
        ['https://github.com/a/b'],
        { url: HTTPS_REPO },
      ]) {
        const res = await unchanged(svc, () => post({ name: 'no repo', repository }));
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /repository/);
      }
    });

    test('400 for a bad ref', async () => {
      for (const ref of [
        '-x',
        '--upload-pack=x',
        'a..b',
        '',
        'a b',
        'a//b',
        '/main',
        'main/',
        'main.',
        'x.lock',
        '.hidden',
        'a@{1}',
        'a~1',
        'a^',
        'a:b',
        'a\\b',
        'a\nb',
        42,
      ]) {
        await refused({ ref }, /ref/);
      }
    });

    test('400 for a bad model id', async () => {
      for (const model of [
        'gpt-4',
        'Anthropic:claude',
        ':claude',
        'anthropic:',
        'anthropic: claude',
        '1abc:model',
        'anthropic:claude\n',
        '',
        42,
      ]) {
        await refused({ model }, /model/);
      }
    });

    test('400 for a missing, empty, too long or non-string name', async () => {
      for (const name of [undefined, '', '   ', 'n'.repeat(201), 42, ['a']]) {
        await refused({ name }, /name/);
      }
      const longest = await post({ name: 'n'.repeat(200), repository: HTTPS_REPO });
      assert.equal(longest.status, 201, longest.text);
    });

    test('GET by id: 404 for an unknown or malformed project id', async () => {
      for (const id of [randomProjectId(), 'not-a-project', `${fx.project.id}x`, fx.jobId]) {
        assertError(await svc.request('GET', `/v2/admin/projects/${id}`), 404, 'not_found');
      }
    });
  });

  describe('PATCH /v2/admin/projects/{id}', () => {
    const patch = (id: string, body: unknown) =>
      svc.request('PATCH', `/v2/admin/projects/${id}`, { body });

    test('200 with the changed record; what the body does not name stays', async () => {
      const project = await svc.createProject({ name: 'before', model: 'openai:gpt-test' });
      const res = await patch(project.id, {
        name: '  after  ',
        ref: 'release/2.0',
        draftPullRequests: false,
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.json).sort(), PROJECT_FIELDS);
      assert.equal(res.json.name, 'after');
      assert.equal(res.json.ref, 'release/2.0');
      assert.equal(res.json.draftPullRequests, false);
      assert.equal(res.json.model, 'openai:gpt-test');
      assert.equal(res.json.repository, project.repository);
      assert.equal(res.json.createdAt, project.createdAt);
      assert.ok((res.json.updatedAt ?? '') > project.updatedAt, 'updatedAt did not move');
      const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
      assert.deepEqual(read.json, res.json);
      const cleared = await patch(project.id, { model: null });
      assert.equal(cleared.status, 200, cleared.text);
      assert.equal(cleared.json.model, null);
    });

    test('a changed repository and ref apply to jobs created afterwards only', async () => {
      const project = await svc.createProject({ name: 'moves' });
      const key = svc.adminKey;
      const first = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'before the move' },
        key,
      });
      assert.equal(first.status, 201, first.text);
      const moved = await patch(project.id, { repository: HTTPS_REPO, ref: 'next' });
      assert.equal(moved.status, 200, moved.text);
      const second = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'after the move' },
        key,
      });
      assert.deepEqual(second.json.source, {
        repository: HTTPS_REPO,
        ref: second.json.branch,
        baseRef: 'next',
      });
      const again = await svc.request('GET', `/v2/agent/${project.id}/job/${first.json.id}`);
      assert.deepEqual(again.json.source, first.json.source);
    });

    test('400 for a bad field, each refusal changing nothing', async () => {
      const id = fx.project.id;
      for (const [body, pattern] of [
        [{ name: '' }, /name/],
        [{ name: 'n'.repeat(201) }, /name/],
        [{ ref: 'bad..ref' }, /ref/],
        [{ model: 'no-provider' }, /model/],
        [{ repository: 'ext::sh -c touch% /tmp/pwned' }, /repository/],
        [{ colour: 'blue' }, /unknown field "colour"/],
      ] as const) {
        const res = await unchanged(svc, () => patch(id, body));
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', pattern, JSON.stringify(body));
      }
    });

    test('budgets: set, changed and removed; none by default', async () => {
      const project = await svc.createProject({ name: 'budgeted' });
      assert.equal(project.jobBudgetUsd, null);
      assert.equal(project.monthlyBudgetUsd, null);
      // The server's default model (anthropic:claude-sonnet-4-5) has known prices.
      const set = await patch(project.id, { jobBudgetUsd: 2.5, monthlyBudgetUsd: 100 });
      assert.equal(set.status, 200, set.text);
      assert.equal(set.json.jobBudgetUsd, 2.5);
      assert.equal(set.json.monthlyBudgetUsd, 100);
      const renamed = await patch(project.id, { name: 'still budgeted' });
      assert.equal(renamed.json.monthlyBudgetUsd, 100);
      const removed = await patch(project.id, { jobBudgetUsd: null });
      assert.equal(removed.status, 200, removed.text);
      assert.equal(removed.json.jobBudgetUsd, null);
      assert.equal(removed.json.monthlyBudgetUsd, 100);
      const created = await post({
        name: 'budgeted at birth',
        repository: HTTPS_REPO,
        model: 'openai:gpt-4o',
        jobBudgetUsd: 0.5,
      });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json.jobBudgetUsd, 0.5);
    });

    test('400 for a budget a model without a known price could not keep, and for a bad amount; nothing is written', async () => {
      // No price is known for a model of an OpenAI-compatible server unless the operator gives one.
      const unpriced = 'openai-compatible:local-coder';
      const project = await svc.createProject({ name: 'local model', model: unpriced });
      for (const body of [{ monthlyBudgetUsd: 10 }, { jobBudgetUsd: 1 }]) {
        const res = await unchanged(svc, () => patch(project.id, body));
        assertError(res, 400, 'bad_request');
        assert.match(
          res.json.error ?? '',
          /cannot hold model 'openai-compatible:local-coder': its prices are unknown.*ERRAND_MODEL_CATALOG/,
        );
      }
      await refused(
        { model: unpriced, monthlyBudgetUsd: 10 },
        /"monthlyBudgetUsd" cannot hold model 'openai-compatible:local-coder'/,
      );
      // A project with a budget cannot move to such a model either.
      const budgeted = await svc.createProject({ name: 'budgeted' });
      assert.equal((await patch(budgeted.id, { jobBudgetUsd: 3 })).status, 200);
      const moved = await unchanged(svc, () => patch(budgeted.id, { model: unpriced }));
      assertError(moved, 400, 'bad_request');
      assert.match(moved.json.error ?? '', /"jobBudgetUsd" cannot hold model/);
      // Removing the budget with the move is fine.
      const both = await patch(budgeted.id, { model: unpriced, jobBudgetUsd: null });
      assert.equal(both.status, 200, both.text);
      for (const amount of [0, -1, '5', 2_000_000_000]) {
        const res = await unchanged(svc, () => patch(budgeted.id, { monthlyBudgetUsd: amount }));
        assertError(res, 400, 'bad_request');
        assert.match(
          res.json.error ?? '',
          /"monthlyBudgetUsd" must be a number of US dollars above 0/,
        );
      }
    });

    test('404 for an unknown or malformed project id; nothing is written', async () => {
      for (const id of [randomProjectId(), 'not-a-project', fx.jobId]) {
        const res = await unchanged(svc, () => patch(id, { name: 'ghost' }));
        assertError(res, 404, 'not_found');
      }
    });

    describe('body', () => jsonBodyCases(patchSpec, fixture));
  });

  describe('security', () => {
    describe('PATCH /v2/admin/projects/{id}', () => authCases(patchSpec, fixture));
    describe('POST /v2/admin/projects', () => authCases(createSpec, fixture));
    describe('GET /v2/admin/projects', () => authCases(listSpec, fixture));
    describe('GET /v2/admin/projects/{id}', () => authCases(getSpec, fixture));

    test("a project key cannot read even its own project's admin record", async () => {
      const res = await svc.request('GET', `/v2/admin/projects/${fx.project.id}`, {
        key: fx.projectKey,
      });
      assertError(res, 403, 'forbidden');
      assert.doesNotMatch(res.text, new RegExp(fx.project.repository.replaceAll('/', '\\/')));
    });
  });
});
