// The admin eval routes under /v2/admin/evals: start a run, list, get, cancel. The service runs
// no worker here, so a run's results stay as the routes leave them; each refusal is checked to
// write nothing, and each change's audit row. How runs move on is runner.test.ts's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  createRouteFixture,
  jsonBodyCases,
  type RouteFixture,
  type RouteSpec,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { newId } from '../../ids.ts';
import type { EvalRunRecord } from './types.ts';

const RUN_ID = /^evr_[0-9A-Za-z]{20}$/;
const HTTPS_REPO = 'https://example.test/acme/eval-target.git';

describe('admin eval routes', () => {
  let svc: TestService;
  let fx: RouteFixture;
  /** The one project whose repository is HTTPS_REPO. */
  let byRepo: { id: string };
  const fixture = () => fx;
  /** The model of an agent that names none: the projects' (none), else the server's. */
  const model = () => fx.project.model ?? svc.service.ctx.models.defaultId;
  const parse = (text: string): EvalRunRecord => JSON.parse(text) as EvalRunRecord;
  const task = (id: string, over: Record<string, unknown> = {}) => ({
    id,
    project: fx.project.id,
    prompt: `do ${id}`,
    check: 'npm test',
    ...over,
  });
  const start = async (body: Record<string, unknown>) => {
    const res = await svc.request('POST', '/v2/admin/evals', { body });
    assert.equal(res.status, 201, res.text);
    return parse(res.text);
  };

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
    byRepo = await svc.createProject({ name: 'by repository', repository: HTTPS_REPO });
  });
  after(() => svc.close());

  describe('happy path', () => {
    test('start, get, list, cancel', async () => {
      const run = await start({
        name: 'first',
        tasks: [
          task('fix-a'),
          task('fix-b', { project: undefined, repository: HTTPS_REPO, ref: 'main' }),
        ],
        agents: [{ engine: 'errand' }, { engine: 'errand', model: 'anthropic:claude-haiku-4-5' }],
        repeat: 2,
        concurrency: 3,
      });
      assert.match(run.id, RUN_ID);
      assert.equal(run.name, 'first');
      assert.equal(run.state, 'running');
      assert.equal(run.finishedAt, null);
      assert.equal(run.createdBy?.kind, 'key');
      assert.deepEqual(run.suite.tasks[1], {
        id: 'fix-b',
        project: byRepo.id,
        repository: HTTPS_REPO,
        ref: 'main',
        prompt: 'do fix-b',
        check: 'npm test',
      });
      assert.equal(run.suite.repeat, 2);
      assert.equal(run.suite.concurrency, 3);
      // Two tasks × two agents × two repeats, in the suite's order, all pending.
      assert.equal(run.results.length, 8);
      assert.deepEqual(
        run.results.map((r) => `${r.task} ${r.agent} ${r.repeat} ${r.projectId === byRepo.id}`),
        [
          `fix-a errand/${model()} 1 false`,
          `fix-a errand/${model()} 2 false`,
          'fix-a errand/anthropic:claude-haiku-4-5 1 false',
          'fix-a errand/anthropic:claude-haiku-4-5 2 false',
          `fix-b errand/${model()} 1 true`,
          `fix-b errand/${model()} 2 true`,
          'fix-b errand/anthropic:claude-haiku-4-5 1 true',
          'fix-b errand/anthropic:claude-haiku-4-5 2 true',
        ],
      );
      for (const r of run.results) {
        assert.equal(r.state, 'pending');
        assert.equal(r.jobId, null);
      }
      assert.deepEqual(
        run.agents.map((a) => [a.engine, a.runs, a.finished, a.passRate, a.interval]),
        [
          ['errand', 4, 0, null, null],
          ['errand', 4, 0, null, null],
        ],
      );

      const got = await svc.request('GET', `/v2/admin/evals/${run.id}`);
      assert.equal(got.status, 200, got.text);
      assert.deepEqual(parse(got.text), run);
      const list = await svc.request('GET', '/v2/admin/evals');
      assert.equal(list.status, 200);
      const runs = (JSON.parse(list.text) as { runs: Record<string, unknown>[] }).runs;
      assert.equal(runs[0]?.id, run.id);
      assert.equal('results' in (runs[0] ?? {}), false, 'a list shows no results');

      const cancelled = await svc.request('POST', `/v2/admin/evals/${run.id}/cancel`);
      assert.equal(cancelled.status, 200, cancelled.text);
      const after = parse(cancelled.text);
      assert.equal(after.state, 'cancelled');
      assert.notEqual(after.finishedAt, null);
      assert.ok(after.results.every((r) => r.state === 'cancelled'));
      // Cancelling a run that is over changes nothing.
      const again = await svc.request('POST', `/v2/admin/evals/${run.id}/cancel`);
      assert.equal(again.status, 200);
      assert.deepEqual(parse(again.text), after);

      const actions = await svc.service.ctx.db
        .selectFrom('audit_log')
        .select(['action', 'outcome'])
        .where('target_id', '=', run.id)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        actions.map((a) => `${a.action} ${a.outcome}`),
        ['eval.create success', 'eval.cancel success', 'eval.cancel success'],
      );
    });

    test('an agent may run an engine other than the project’s, with a model that engine speaks', async () => {
      assert.equal(fx.project.engine, 'errand');
      const run = await start({
        tasks: [task('other-engine')],
        agents: [{ engine: 'claude-code', model: 'anthropic:claude-haiku-4-5' }],
      });
      assert.deepEqual(
        run.agents.map((a) => [a.engine, a.model]),
        [['claude-code', 'anthropic:claude-haiku-4-5']],
      );
    });

    test('defaults: a name, one agent (the project’s), repeat 1, concurrency 2', async () => {
      const run = await start({ tasks: [task('only')] });
      assert.match(run.name, /^eval \d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
      assert.deepEqual(run.suite.agents, [{}]);
      assert.equal(run.suite.repeat, 1);
      assert.equal(run.suite.concurrency, 2);
      assert.equal(run.results.length, 1);
      assert.equal(run.results[0]?.agent, `${fx.project.engine}/${model()}`);
    });
  });

  describe('errors', () => {
    const refused = async (
      method: string,
      path: string,
      body: unknown,
      status: number,
      code: string,
      words?: RegExp,
      key?: string,
    ) => {
      const res = await unchanged(svc, () =>
        svc.request(method, path, {
          ...(body === undefined ? {} : { body }),
          ...(key ? { key } : {}),
        }),
      );
      assertError(res, status, code);
      if (words) assert.match(res.json.error ?? '', words);
    };

    test('400 for a suite of the wrong shape, naming the field; nothing written', async () => {
      const cases: [unknown, RegExp][] = [
        [{}, /tasks/],
        [{ tasks: [] }, /"tasks" must list at least one task/],
        [{ tasks: [task('a'), task('a')] }, /'a' names two tasks/],
        [{ tasks: [task('bad id')] }, /"id"/],
        [
          { tasks: [task('a', { repository: HTTPS_REPO })] },
          /exactly one of "project" and "repository"/,
        ],
        [
          { tasks: [task('a', { project: undefined })] },
          /exactly one of "project" and "repository"/,
        ],
        [{ tasks: [task('a', { check: '  ' })] }, /"check"/],
        [{ tasks: [task('a', { prompt: '' })] }, /"prompt"/],
        [{ tasks: [task('a')], agents: [] }, /"agents"/],
        [{ tasks: [task('a')], agents: [{ engine: 'cursor' }] }, /"engine" must be one of/],
        [{ tasks: [task('a')], agents: [{ model: 'gpt' }] }, /provider:model/],
        [{ tasks: [task('a')], repeat: 0 }, /"repeat"/],
        [{ tasks: [task('a')], repeat: 21 }, /"repeat"/],
        [{ tasks: [task('a')], concurrency: 17 }, /"concurrency"/],
        [{ tasks: [task('a')], every: 'day' }, /every/],
      ];
      for (const [body, words] of cases)
        await refused('POST', '/v2/admin/evals', body, 400, 'bad_request', words);
    });

    test('400 for a project that is not there, ambiguous, or an agent that cannot run there', async () => {
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a', { project: newId('prj') })] },
        400,
        'bad_request',
        /tasks\[0\]\.project/,
      );
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a', { project: 'nope' })] },
        400,
        'bad_request',
        /not found/,
      );
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a', { project: undefined, repository: 'https://example.test/none.git' })] },
        400,
        'bad_request',
        /no project has the repository/,
      );
      // Both fixture projects have the test's repository.
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a', { project: undefined, repository: fx.project.repository })] },
        400,
        'bad_request',
        /several projects/,
      );
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('ok'), task('b')], agents: [{}, { model: 'nosuch:model' }] },
        400,
        'model_unavailable',
        /agents\[1\]/,
      );
      // Codex speaks OpenAI's API only.
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a')], agents: [{ engine: 'codex', model: 'anthropic:claude-haiku-4-5' }] },
        400,
        'model_unavailable',
        /agents\[0\].*engine codex cannot run model/,
      );
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a')], agents: [{}, { engine: fx.project.engine }] },
        400,
        'bad_request',
        /same agent/,
      );
    });

    test('403 for a key without the role on a project the suite names; nothing written', async () => {
      // A project key is a member of its own project: starting a run needs a maintainer.
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a')] },
        403,
        'forbidden',
        undefined,
        fx.projectKey,
      );
      await refused(
        'POST',
        '/v2/admin/evals',
        { tasks: [task('a', { project: fx.otherProject.id })] },
        403,
        'forbidden',
        undefined,
        fx.projectKey,
      );
    });

    test('403 to read or cancel a run of another project; it is not listed', async () => {
      const run = await start({ tasks: [task('mine')] });
      await refused(
        'GET',
        `/v2/admin/evals/${run.id}`,
        undefined,
        403,
        'forbidden',
        undefined,
        fx.otherProjectKey,
      );
      await refused(
        'POST',
        `/v2/admin/evals/${run.id}/cancel`,
        undefined,
        403,
        'forbidden',
        undefined,
        fx.projectKey,
      );
      const own = await svc.request('GET', `/v2/admin/evals/${run.id}`, { key: fx.projectKey });
      assert.equal(own.status, 200, 'a member of its project reads it');
      const listed = await svc.request('GET', '/v2/admin/evals', { key: fx.otherProjectKey });
      assert.equal(listed.status, 200);
      const ids = (JSON.parse(listed.text) as { runs: { id: string }[] }).runs.map((r) => r.id);
      assert.ok(!ids.includes(run.id));
    });

    test('404 for a run that does not exist or a malformed id', async () => {
      for (const id of [newId('evr'), 'nope', newId('job')]) {
        await refused('GET', `/v2/admin/evals/${id}`, undefined, 404, 'not_found');
        await refused('POST', `/v2/admin/evals/${id}/cancel`, undefined, 404, 'not_found');
      }
    });
  });

  describe('security', () => {
    const spec: RouteSpec = {
      method: 'POST',
      scope: 'admin',
      path: () => '/v2/admin/evals',
      body: (f) => ({
        name: 'security',
        tasks: [{ id: 'a', project: f.project.id, prompt: 'x', check: 'true' }],
      }),
    };
    authCases(spec, fixture);
    jsonBodyCases(spec, fixture);
  });
});
