// The dashboard's Evals pages over plain HTTP, as a browser without scripts uses them: the list
// of runs, a run's page (the per-agent table, the chart of pass rate against cost, each result
// with its job and its failure's tail, escaped), a reader without the run's project refused,
// and the cancel button.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getPage, postForm, sessionCookie } from '../../../test/support/dashboard.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { signedInUser } from '../../../test/support/users.ts';
import type { EvalRunRecord } from './types.ts';

describe('dashboard Evals pages', () => {
  let svc: TestService;
  let cookie: string;
  let projectId: string;
  let run: EvalRunRecord;

  before(async () => {
    svc = await startTestService({ worker: false });
    cookie = await sessionCookie(svc, svc.adminKey);
    projectId = (await svc.createProject({ name: 'measured' })).id;
    const res = await svc.request('POST', '/v2/admin/evals', {
      body: {
        name: 'engines <compared>',
        tasks: ['alpha', 'beta'].map((id) => ({
          id,
          project: projectId,
          prompt: id,
          check: 'npm test',
        })),
        agents: [{ model: 'anthropic:claude-sonnet-4-5' }, { model: 'anthropic:claude-haiku-4-5' }],
        repeat: 2,
      },
    });
    assert.equal(res.status, 201, res.text);
    run = JSON.parse(res.text) as EvalRunRecord;
    // Settled by hand: the first agent passes 3 of 4 for $1.00, the second 1 of 4 for $0.10.
    const figures = [
      ['passed', 0.1],
      ['passed', 0.2],
      ['passed', 0.3],
      ['failed', 0.4],
      ['passed', 0.01],
      ['failed', 0.02],
      ['failed', 0.03],
      ['error', 0.04],
    ] as const;
    const order = [1, 2, 5, 6, 3, 4, 7, 8]; // n of (agent, task, repeat) in the suite's order
    for (const [i, [state, cost]] of figures.entries())
      await svc.service.ctx.db
        .updateTable('eval_results')
        .set({
          state,
          cost_usd: cost,
          duration_ms: 60_000,
          steps: 10,
          input_tokens: 1000,
          output_tokens: 100,
          check_exit: state === 'failed' ? 1 : null,
          tail:
            state === 'failed'
              ? 'expected <ok> got <fail>'
              : state === 'error'
                ? 'the job failed'
                : null,
          job_id: `job_${String(i).padStart(20, '0')}`,
        })
        .where('run_id', '=', run.id)
        .where('n', '=', order[i] ?? 0)
        .execute();
  });
  after(() => svc?.close());

  test('the list and a run’s page: tables, chart, jobs, tails escaped', async () => {
    const list = await getPage(svc, cookie, '/evals');
    assert.equal(list.status, 200);
    assert.match(list.text, /<a href="\/evals">Evals<\/a>/, 'the navigation links the page');
    assert.ok(list.text.includes(`href="/evals/${run.id}"`));
    assert.match(list.text, /engines &lt;compared&gt;/);

    const page = await getPage(svc, cookie, `/evals/${run.id}`);
    assert.equal(page.status, 200);
    const text = page.text;
    assert.doesNotMatch(text, /<compared>|<ok>/);
    // The per-agent table: 3/4 with its Wilson interval, $1 in all, and 1/4.
    assert.match(text, /3 \/ 4/);
    assert.match(text, /75\.0\u00a0% <span class="muted">30\.1\u00a0%–95\.4\u00a0%<\/span>/);
    assert.match(text, /\$1\.0000/);
    assert.match(text, /25\.0\u00a0% <span class="muted">4\.6\u00a0%–69\.9\u00a0%<\/span>/);
    assert.match(text, /\$0\.1000/);
    assert.match(text, /60\.0 s/);
    // The chart: one labelled point per agent, with its interval bar.
    assert.match(text, /<svg role="img"/);
    assert.equal(text.match(/<circle /g)?.length, 2);
    assert.equal(text.match(/class="interval"/g)?.length, 2);
    assert.match(text, /<text [^>]*>errand\/anthropic:claude-sonnet-4-5<\/text>/);
    // Each result: its job linked, a failure's tail shown escaped.
    assert.ok(text.includes(`href="/projects/${projectId}/jobs/job_${'0'.repeat(20)}"`));
    assert.match(text, /expected &lt;ok&gt; got &lt;fail&gt;/);
    assert.match(text, /exit 1/);
    assert.match(text, /Cancel run/);
  });

  test('a user without the run’s project: not listed, its page refused', async () => {
    const other = (await svc.createProject({ name: 'elsewhere' })).id;
    const user = await signedInUser(svc.service.ctx.db, { roles: { [other]: 'maintainer' } });
    const list = await getPage(svc, user.cookie, '/evals');
    assert.equal(list.status, 200);
    assert.ok(!list.text.includes(run.id));
    const page = await getPage(svc, user.cookie, `/evals/${run.id}`);
    assert.equal(page.status, 403);
    const viewer = await signedInUser(svc.service.ctx.db, { roles: { [projectId]: 'viewer' } });
    assert.equal((await getPage(svc, viewer.cookie, `/evals/${run.id}`)).status, 200);
    const cancel = await postForm(svc, viewer.cookie, `/evals/${run.id}/cancel`, {});
    assert.equal(cancel.status, 403, 'a viewer may not cancel');
  });

  test('cancel from the page', async () => {
    const cancelled = await postForm(svc, cookie, `/evals/${run.id}/cancel`, {});
    assert.equal(cancelled.status, 303);
    const row = await svc.service.ctx.db
      .selectFrom('eval_runs')
      .select('state')
      .where('id', '=', run.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.state, 'cancelled');
    assert.doesNotMatch((await getPage(svc, cookie, `/evals/${run.id}`)).text, /Cancel run/);
  });
});
