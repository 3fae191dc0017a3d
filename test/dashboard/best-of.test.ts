// Best-of-N on the dashboard (docs/eval.md), against a real service without a worker: the
// project form's check command (saved, shown again, cleared), the new-job form's count of
// attempts and each attempt's agent (stored with the turn; a count or mode the API refuses is refused in its words,
// nothing made), and the job page's attempts (each attempt's agent, outcome, check, cost, diff
// and branch, the winner marked, a failed check's output tail escaped; none for a plain job).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AttemptResult } from '../../src/db/schema.ts';
import { getPage, postForm, sessionCookie } from '../support/dashboard.ts';
import { startTestService, type TestService } from '../support/service.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;

describe('dashboard: best-of-N', () => {
  let svc: TestService;
  let admin: string;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ worker: false });
    admin = await sessionCookie(svc, svc.adminKey);
    projectId = (await svc.createProject({ name: 'best of' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const project = async () =>
    (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json as {
      name: string;
      repository: string;
      ref: string;
      checkCommand: string | null;
    };
  /** The settings form as the page fills it in, with `over` changed. */
  const settingsForm = async (over: Record<string, string>) => {
    const p = await project();
    return {
      name: p.name,
      repository: p.repository,
      ref: p.ref,
      commandsEnabled: '1',
      ...over,
    };
  };
  const countJobs = async () =>
    Number(
      (
        await svc.service.ctx.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  test('the project form: the check command saved, shown again (escaped), and cleared', async () => {
    const settings = `/projects/${projectId}/settings`;
    const saved = await postForm(
      svc,
      admin,
      settings,
      await settingsForm({ checkCommand: `  npm test -- ${HOSTILE}  ` }),
    );
    assert.equal(saved.status, 303, saved.text);
    assert.equal((await project()).checkCommand, `npm test -- ${HOSTILE}`);
    const page = await getPage(svc, admin, settings);
    assert.match(page.text, /<label for="checkCommand">Check command<\/label>/);
    assert.match(
      page.text,
      /id="checkCommand"[^>]*value="npm test -- &lt;script&gt;alert\(1\)&lt;\/script&gt;&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;"/,
    );
    assert.ok(!page.text.includes(HOSTILE), 'the command was written into the page as HTML');

    const cleared = await postForm(svc, admin, settings, await settingsForm({ checkCommand: '' }));
    assert.equal(cleared.status, 303, cleared.text);
    assert.equal((await project()).checkCommand, null);
    await postForm(svc, admin, settings, await settingsForm({ checkCommand: 'npm test' }));
    assert.equal((await project()).checkCommand, 'npm test');
  });

  test('the new-job form: a count of attempts goes with the first turn; one is the usual job; a bad count or mode is refused', async () => {
    const jobs = `/projects/${projectId}/jobs`;
    const list = await getPage(svc, admin, jobs);
    assert.match(list.text, /<select id="attempts" name="attempts"/);
    assert.match(list.text, /<option value="4" >4<\/option>/);
    assert.match(list.text, /the check command <code>npm test<\/code> judges them/);

    const made = await postForm(svc, admin, jobs, { prompt: 'try thrice', attempts: '3' });
    assert.equal(made.status, 303, made.text);
    const id = /created=(job_\w+)/.exec(made.location ?? '')?.[1] ?? '';
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(turn.best_of, { count: 3, agents: [] });

    const single = await postForm(svc, admin, jobs, { prompt: 'just once', attempts: '1' });
    assert.equal(single.status, 303, single.text);
    const plain = /created=(job_\w+)/.exec(single.location ?? '')?.[1] ?? '';
    const plainTurn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', plain)
      .executeTakeFirstOrThrow();
    assert.equal(plainTurn.best_of, null);

    const before = await countJobs();
    const five = await postForm(svc, admin, jobs, { prompt: 'too many', attempts: '5' });
    assert.equal(five.status, 400, five.text);
    assert.match(five.text, /&quot;count&quot; must be a whole number from 1 to 4/);
    // The form keeps what was typed.
    assert.match(five.text, />too many<\/textarea>/);
    assert.match(five.text, /<option value="5"|<option value="4" >4/);
    const asked = await postForm(svc, admin, jobs, {
      prompt: 'a question',
      mode: 'ask',
      attempts: '2',
    });
    assert.equal(asked.status, 400, asked.text);
    assert.match(asked.text, /&quot;attempts&quot; needs mode &quot;code&quot;/);
    assert.match(asked.text, /<option value="2" selected>2<\/option>/);
    assert.equal(await countJobs(), before, 'a refused form made a job');
  });

  test("the new-job form: each attempt's agent (engine, model) goes with the count; an agent past the count or one the API refuses is refused", async () => {
    const jobs = `/projects/${projectId}/jobs`;
    const list = await getPage(svc, admin, jobs);
    for (const n of [1, 2, 3, 4]) {
      assert.match(list.text, new RegExp(`<select id="engine${n}" name="engine${n}"`));
      assert.match(list.text, new RegExp(`<input id="model${n}" name="model${n}" value=""`));
    }
    assert.match(list.text, /<option value="" selected>the project's \(errand\)<\/option>/);
    assert.match(list.text, /<option value="claude-code" >claude-code<\/option>/);

    const bestOf = async (location: string | null | undefined) => {
      const id = /created=(job_\w+)/.exec(location ?? '')?.[1] ?? '';
      return (
        await svc.service.ctx.db
          .selectFrom('turns')
          .select('best_of')
          .where('job_id', '=', id)
          .executeTakeFirstOrThrow()
      ).best_of;
    };
    const made = await postForm(svc, admin, jobs, {
      prompt: 'two agents, three attempts',
      attempts: '3',
      engine1: 'claude-code',
      model1: '',
      engine2: '',
      model2: ' anthropic:claude-sonnet-4-5 ',
      engine3: '',
      model3: '',
    });
    assert.equal(made.status, 303, made.text);
    assert.deepEqual(await bestOf(made.location), {
      count: 3,
      agents: [{ engine: 'claude-code' }, { model: 'anthropic:claude-sonnet-4-5' }, {}],
    });

    const before = await countJobs();
    const past = await postForm(svc, admin, jobs, {
      prompt: 'one attempt, two agents',
      attempts: '1',
      engine2: 'codex',
    });
    assert.equal(past.status, 400, past.text);
    assert.match(past.text, /attempt 2 has an agent, but the job makes 1 attempt/);
    // The form keeps what was chosen, and opens the agents.
    assert.match(past.text, /<option value="codex" selected>codex<\/option>/);
    assert.match(past.text, /<details class="attempt-agents" open>/);
    const badModel = await postForm(svc, admin, jobs, {
      prompt: 'a bad model',
      attempts: '2',
      model1: 'no-provider',
    });
    assert.equal(badModel.status, 400, badModel.text);
    assert.match(badModel.text, /&quot;model&quot; must look like provider:model/);
    assert.match(badModel.text, /<input id="model1" name="model1" value="no-provider"/);
    assert.equal(await countJobs(), before, 'a refused form made a job');
  });

  test("the job page: each attempt's agent, outcome, check, cost, diff and branch; the winner marked; a failed check's tail escaped", async () => {
    const made = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: {
        prompt: 'two agents',
        attempts: { count: 3, agents: [{ engine: 'claude-code' }, {}] },
      },
    });
    assert.equal(made.status, 201, made.text);
    const jobId = made.json.id ?? '';
    const attempts: AttemptResult[] = [
      {
        n: 1,
        engine: 'claude-code',
        model: 'anthropic:claude-sonnet-4-5',
        branch: `errand/${jobId}-1`,
        outcome: 'failed',
        check: { exitCode: 1, outputTail: `not ok 1 - answer\n${HOSTILE}\n`, durationMs: 1250 },
        costUsd: 0.0123,
        diff: { files: 2, lines: 14 },
        commitSha: 'a'.repeat(40),
        error: null,
        winner: false,
      },
      {
        n: 2,
        engine: 'errand',
        model: 'anthropic:claude-sonnet-4-5',
        branch: `errand/${jobId}-2`,
        outcome: 'passed',
        check: { exitCode: 0, outputTail: 'ok 1 - answer\n', durationMs: 900 },
        costUsd: 0.5,
        diff: { files: 1, lines: 3 },
        commitSha: 'b'.repeat(40),
        error: null,
        winner: true,
      },
      {
        n: 3,
        engine: 'claude-code',
        model: 'anthropic:claude-sonnet-4-5',
        branch: `errand/${jobId}-3`,
        outcome: 'error',
        check: null,
        costUsd: null,
        diff: { files: 0, lines: 0 },
        commitSha: null,
        error: `the engine stopped: ${HOSTILE}`,
        winner: false,
      },
    ];
    await svc.service.ctx.db
      .updateTable('jobs')
      .set({ attempts: JSON.stringify(attempts) })
      .where('id', '=', jobId)
      .execute();

    const page = await getPage(svc, admin, `/projects/${projectId}/jobs/${jobId}`);
    assert.equal(page.status, 200, page.text);
    assert.ok(!page.text.includes(HOSTILE), 'an attempt text was written into the page as HTML');
    assert.match(page.text, /<h2 id="attempts">Attempts<\/h2>/);
    assert.match(page.text, /Attempt 2 won: its branch became the job&#39;s branch\./);
    const row = (n: number) => {
      const found = new RegExp(`<tr id="attempt-${n}"[^>]*>([\\s\\S]*?)</tr>`).exec(page.text);
      assert.ok(found, `attempt ${n}'s row`);
      return found[0].replace(/\s+/g, ' ');
    };
    const first = row(1);
    assert.match(first, /claude-code \/ anthropic:claude-sonnet-4-5/);
    assert.match(first, /failed the check/);
    assert.match(first, /exit 1 <span class="muted">in 1.3 s<\/span>/);
    assert.match(first, /\$0\.0123/);
    assert.match(first, /2 files, 14 lines/);
    assert.match(first, new RegExp(`errand/${jobId}-1`));
    assert.doesNotMatch(first, /winner/);
    const second = row(2);
    assert.match(second, /^<tr id="attempt-2" class="winner">/);
    assert.match(second, /2 <strong class="badge completed">winner<\/strong>/);
    assert.match(second, /errand \/ anthropic:claude-sonnet-4-5/);
    assert.match(second, />passed</);
    assert.match(second, /exit 0/);
    assert.match(second, /\$0\.5000/);
    assert.match(second, /1 file, 3 lines/);
    const third = row(3);
    assert.match(third, /did not finish/);
    assert.match(third, /the engine stopped: &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(third, />none</);
    assert.match(third, />unknown</);

    // The failed check's last lines, folded, escaped; none for the one that passed.
    const tail = /<details class="attempt-tail" id="attempt-1-tail">([\s\S]*?)<\/details>/.exec(
      page.text,
    );
    assert.ok(tail, "the failed attempt's tail");
    assert.match(tail[1] ?? '', /Attempt 1: the check's last lines \(exit 1\)/);
    assert.match(
      tail[1] ?? '',
      /<pre class="output">not ok 1 - answer\n&lt;script&gt;alert\(1\)&lt;\/script&gt;&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;\n<\/pre>/,
    );
    assert.doesNotMatch(page.text, /id="attempt-2-tail"/);
    assert.doesNotMatch(page.text, /id="attempt-3-tail"/);

    // A job that made no attempts has no such section.
    const other = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'the usual way' },
    });
    const plain = await getPage(svc, admin, `/projects/${projectId}/jobs/${other.json.id}`);
    assert.equal(plain.status, 200);
    assert.doesNotMatch(plain.text, /id="attempts"/);
  });
});
