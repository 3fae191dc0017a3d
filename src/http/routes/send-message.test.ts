// POST /v2/agent/{projectId}/job/{id}/message: follow-up turns, reactivation of finished jobs,
// 409 on archived jobs, its own rate limit, Idempotency-Key, prompt validation and the common
// auth cases.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  assertError,
  authCases,
  createJobId,
  createRouteFixture,
  jobIdCases,
  jsonBodyCases,
  promptCases,
  type RouteFixture,
  type RouteSpec,
  SCRIPTED_ENV,
  scriptedRunner,
  turnStarted,
  unchanged,
} from '../../../test/support/route-cases.ts';
import type { RecordingRunner } from '../../../test/support/runners.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import { turnBodyLimit } from '../../jobs/attachments.ts';

const MAX_PROMPT = 50;
const LONG_WINDOW = String(86_400 * 31);

const spec: RouteSpec = {
  method: 'POST',
  scope: 'project',
  bodyLimit: (fx) => turnBodyLimit(fx.svc.service.ctx.config.maxPromptChars),
  path: ({ projectId, jobId }) => `/v2/agent/${projectId}/job/${jobId}/message`,
  body: () => ({ prompt: 'a follow-up from the common cases' }),
};

describe('POST /v2/agent/{projectId}/job/{id}/message', () => {
  // svc runs turns with the scripted runner; limited has no worker and tiny rate limits.
  let svc: TestService;
  let limited: TestService;
  let runner: RecordingRunner;
  let fx: RouteFixture;
  const fixture = () => fx;

  before(async () => {
    runner = scriptedRunner();
    [svc, limited] = await Promise.all([
      startTestService({
        runner,
        env: { ...SCRIPTED_ENV, ERRAND_MAX_PROMPT_CHARS: String(MAX_PROMPT) },
      }),
      startTestService({
        worker: false,
        env: {
          ERRAND_RATE_LIMIT_CREATE: '2',
          ERRAND_RATE_LIMIT_MESSAGE: '2',
          ERRAND_RATE_LIMIT_WINDOW_SECONDS: LONG_WINDOW,
        },
      }),
    ]);
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await Promise.all([svc?.close(), limited?.close()]);
  });

  const message = (
    s: TestService,
    projectId: string,
    jobId: string,
    prompt: string,
    key?: string,
  ) =>
    s.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt },
      ...(key ? { key } : {}),
    });
  const getJob = (s: TestService, projectId: string, jobId: string) =>
    s.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
  const waitForStatus = (projectId: string, jobId: string, status: string) =>
    waitFor(`job ${jobId} to be ${status}`, async () => {
      const res = await getJob(svc, projectId, jobId);
      return res.json.status === status ? res : undefined;
    });
  const turnRows = (s: TestService, jobId: string) =>
    s.service.ctx.db
      .selectFrom('turns')
      .select(['seq', 'prompt', 'state'])
      .where('job_id', '=', jobId)
      .orderBy('seq')
      .execute();
  const archive = (projectId: string, jobId: string) =>
    svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);

  describe('happy path', () => {
    test('200 with the job record; the turn is stored and queued', async () => {
      const project = await svc.createProject({ name: 'message' });
      const { key } = await svc.createProjectKey(project.id);
      const jobId = await createJobId(svc, project.id, 'hold the first turn', key);
      const created = await getJob(svc, project.id, jobId);
      const res = await message(svc, project.id, jobId, 'complete the second turn', key);
      assert.equal(res.status, 200, res.text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const job = res.json;
      assert.equal(job.id, jobId);
      assert.equal(job.status, 'active');
      assert.equal(job.turns, 2);
      for (const field of ['createdAt', 'source', 'model', 'branch', 'projectId'] as const) {
        assert.deepEqual(job[field], created.json[field], field);
      }
      assert.equal(job.prLink, null);
      assert.equal(job.archivedAt, null);
      assert.ok(Date.parse(job.updatedAt ?? '') >= Date.parse(created.json.updatedAt ?? ''));
      // Follow-ups have their own count, apart from creates.
      assert.equal(res.headers.get('ratelimit-limit'), '100');
      assert.equal(res.headers.get('ratelimit-remaining'), '99');
      assert.equal(res.headers.get('ratelimit-policy'), '100;w=3600');

      const turns = await turnRows(svc, jobId);
      assert.deepEqual(
        turns.map((t) => [t.seq, t.prompt]),
        [
          [1, 'hold the first turn'],
          [2, 'complete the second turn'],
        ],
      );
      assert.equal(turns[1]?.state, 'queued');
      assert.equal((await getJob(svc, project.id, jobId)).json.turns, 2);
      await archive(project.id, jobId);
    });

    test("the mode is the turn's and the job's; a follow-up clears a plan's awaitingApproval", async () => {
      const project = await limited.createProject({ name: 'modes' });
      const created = await limited.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'plan it', mode: 'plan' },
      });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json.mode, 'plan');
      const jobId = created.json.id as string;
      // As if the plan had finished: the lifecycle's own transitions are lifecycle.test.ts's.
      await limited.service.ctx.db
        .updateTable('jobs')
        .set({ status: 'completed', awaiting_approval: true })
        .where('id', '=', jobId)
        .execute();
      const asked = await limited.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
        body: { prompt: 'why step 2?', mode: 'ask' },
      });
      assert.equal(asked.status, 200, asked.text);
      assert.equal(asked.json.mode, 'ask');
      assert.equal(asked.json.awaitingApproval, false);
      const plain = await message(limited, project.id, jobId, 'approve');
      assert.equal(plain.json.mode, 'code');
      const modes = await limited.service.ctx.db
        .selectFrom('turns')
        .select(['seq', 'mode'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        modes.map((t) => t.mode),
        ['plan', 'ask', 'code'],
      );
    });

    test('reactivates a failed job', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'fail at once');
      const failed = await waitForStatus(fx.project.id, jobId, 'failed');
      assert.match(failed.json.error ?? '', /not available/);
      const res = await message(svc, fx.project.id, jobId, 'hold the retry', fx.projectKey);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.status, 'active');
      assert.equal(res.json.turns, 2);
      assert.equal((await getJob(svc, fx.project.id, jobId)).json.status, 'active');
      // The worker takes the new turn; starting it clears the old error.
      await waitFor('the second turn to start', async () =>
        runner.calls.find((c) => c.jobId === jobId && c.seq === 2),
      );
      const running = await waitFor('the error to clear', async () => {
        const r = await getJob(svc, fx.project.id, jobId);
        return r.json.error === null ? r : undefined;
      });
      assert.equal(running.json.status, 'active');
      await archive(fx.project.id, jobId);
    });

    test('reactivates a completed job, which then completes again', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'complete one');
      await waitForStatus(fx.project.id, jobId, 'completed');
      const res = await message(svc, fx.project.id, jobId, 'complete two', fx.projectKey);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.status, 'active');
      assert.equal(res.json.turns, 2);
      const done = await waitForStatus(fx.project.id, jobId, 'completed');
      assert.equal(done.json.turns, 2);
      assert.deepEqual(
        (await turnRows(svc, jobId)).map((t) => t.state),
        ['done', 'done'],
      );
    });

    test('parallel follow-ups to one job each get their own turn', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'hold while messages arrive');
      const results = await Promise.all(
        [1, 2, 3, 4].map((i) => message(svc, fx.project.id, jobId, `hold follow-up ${i}`)),
      );
      for (const res of results) assert.equal(res.status, 200, res.text);
      assert.deepEqual(results.map((r) => r.json.turns).sort(), [2, 3, 4, 5]);
      const turns = await turnRows(svc, jobId);
      assert.deepEqual(
        turns.map((t) => t.seq),
        [1, 2, 3, 4, 5],
      );
      assert.deepEqual(
        turns
          .slice(1)
          .map((t) => t.prompt)
          .sort(),
        [1, 2, 3, 4].map((i) => `hold follow-up ${i}`),
      );
      assert.equal((await getJob(svc, fx.project.id, jobId)).json.turns, 5);
      await archive(fx.project.id, jobId);
    });

    test('the admin key may send a follow-up to any project', async () => {
      const res = await message(svc, fx.otherProject.id, fx.otherJobId, 'fail again', svc.adminKey);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.id, fx.otherJobId);
    });
  });

  describe('errors', () => {
    jsonBodyCases(spec, fixture);
    promptCases(spec, fixture, MAX_PROMPT);
    jobIdCases(spec, fixture);

    test('400 for a mode the API does not know, and for ask or plan on a Codex project; nothing is written', async () => {
      const project = await limited.createProject({ name: 'codex modes' });
      const jobId = await createJobId(limited, project.id, 'first');
      const send = (mode: string) =>
        limited.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
          body: { prompt: 'a question', mode },
        });
      const bad = await unchanged(limited, () => send('yolo'));
      assertError(bad, 400, 'bad_request');
      assert.match(bad.json.error ?? '', /"mode" must be one of code, ask, plan/);
      await limited.service.ctx.db
        .updateTable('projects')
        .set({ engine: 'codex' })
        .where('id', '=', project.id)
        .execute();
      for (const mode of ['ask', 'plan']) {
        const res = await unchanged(limited, () => send(mode));
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /not available with the codex engine/);
      }
      const created = await unchanged(limited, () =>
        limited.request('POST', `/v2/agent/${project.id}/job`, {
          body: { prompt: 'a question', mode: 'ask' },
        }),
      );
      assertError(created, 400, 'bad_request');
    });

    test('409 for an archived job; nothing is written', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'hold until archived');
      await turnStarted(runner, jobId);
      const archived = await archive(fx.project.id, jobId);
      assert.equal(archived.status, 200);
      const res = await unchanged(svc, () =>
        message(svc, fx.project.id, jobId, 'too late', fx.projectKey),
      );
      assertError(res, 409, 'conflict');
      const job = await getJob(svc, fx.project.id, jobId);
      assert.equal(job.json.status, 'archived');
      assert.equal(job.json.turns, 1);
      assert.equal((await turnRows(svc, jobId)).length, 1);
      // Still 409 with the admin key, and with a prompt that is fine in every other way.
      assertError(await message(svc, fx.project.id, jobId, 'again', svc.adminKey), 409, 'conflict');
    });

    test("400 model_unavailable when the job's model can no longer be used; nothing is written", async () => {
      // The job was accepted by a service with an OpenAI key; the service that takes the
      // follow-up (same database, restarted) has none.
      const before = await startTestService({
        worker: false,
        env: { OPENAI_API_KEY: 'sk-test-0000000000000000' },
      });
      let after: TestService | undefined;
      try {
        const project = await before.createProject({ model: 'openai:gpt-test' });
        const jobId = await createJobId(before, project.id, 'first turn, while the key was set');
        await before.stop();
        after = await startTestService({
          worker: false,
          database: before.database,
          adminKey: before.adminKey,
        });
        const current = after;
        const res = await unchanged(current, () =>
          message(current, project.id, jobId, 'a follow-up without the key'),
        );
        assertError(res, 400, 'model_unavailable');
        assert.match(res.json.error ?? '', /OPENAI_API_KEY/);
        const job = await getJob(current, project.id, jobId);
        assert.equal(job.json.turns, 1);
        assert.equal(job.json.model, 'openai:gpt-test');
      } finally {
        await after?.stop();
        await before.close();
      }
    });

    test('429 with Retry-After once the follow-ups are used; creates count apart', async () => {
      const project = await limited.createProject({ name: 'limited' });
      const jobId = await createJobId(limited, project.id, 'first');
      for (const remaining of ['1', '0']) {
        const res = await message(limited, project.id, jobId, `follow-up, ${remaining} left`);
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.get('ratelimit-remaining'), remaining);
        assert.equal(res.headers.get('ratelimit-limit'), '2');
      }
      const refused = await unchanged(limited, () =>
        message(limited, project.id, jobId, 'one too many'),
      );
      assertError(refused, 429, 'rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
      assert.equal(refused.headers.get('ratelimit-reset'), String(retryAfter));
      assert.equal(refused.headers.get('ratelimit-remaining'), '0');
      assert.equal((await getJob(limited, project.id, jobId)).json.turns, 3);
      assert.equal((await turnRows(limited, jobId)).length, 3);

      // Creates have their own count: one used, one left.
      const created = await limited.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'second job' },
      });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.headers.get('ratelimit-remaining'), '0');
      // The new job shares its project's follow-up count, which is used up.
      assertError(
        await unchanged(limited, () => message(limited, project.id, created.json.id ?? '', 'x')),
        429,
        'rate_limited',
      );
      // Another project is not affected.
      const other = await limited.createProject({ name: 'other' });
      const otherJob = await createJobId(limited, other.id, 'other');
      assert.equal((await message(limited, other.id, otherJob, 'fine')).status, 200);
    });
  });

  describe('Idempotency-Key', () => {
    // On `limited`: no worker changes the jobs, and its follow-up limit is 2.
    const keyed = (projectId: string, jobId: string, key: string, prompt: string) =>
      limited.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt },
        headers: { 'idempotency-key': key },
      });
    const keyRows = (projectId: string) =>
      limited.service.ctx.db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('project_id', '=', projectId)
        .orderBy('key')
        .execute();

    test('the same follow-up again gets the first response: one turn, no limit used', async () => {
      const project = await limited.createProject({ name: 'idempotent message' });
      const jobId = await createJobId(limited, project.id, 'first');
      const first = await keyed(project.id, jobId, 'follow-once', 'and then this');
      assert.equal(first.status, 200, first.text);
      assert.equal(first.json.turns, 2);
      assert.equal(first.headers.get('ratelimit-remaining'), '1');
      assert.equal(first.headers.get('idempotent-replayed'), null);
      for (const key of ['follow-once', '"follow-once"', 'follow-once']) {
        const again = await unchanged(limited, () =>
          keyed(project.id, jobId, key, 'and then this'),
        );
        assert.equal(again.status, 200, again.text);
        assert.equal(again.text, first.text);
        assert.equal(again.headers.get('idempotent-replayed'), 'true');
        assert.equal(again.headers.get('ratelimit-remaining'), null);
      }
      assert.equal((await turnRows(limited, jobId)).length, 2);
      // The replays used none of the two follow-ups: one is left.
      const second = await message(limited, project.id, jobId, 'one more');
      assert.equal(second.status, 200, second.text);
      assert.equal(second.headers.get('ratelimit-remaining'), '0');
      // The job has moved on; the key still answers as it did the first time.
      const replay = await keyed(project.id, jobId, 'follow-once', 'and then this');
      assert.equal(replay.text, first.text);
      assert.equal((await getJob(limited, project.id, jobId)).json.turns, 3);
    });

    test("the key of a create, or of another job's follow-up, is a 422; nothing is written", async () => {
      const project = await limited.createProject({ name: 'reused message keys' });
      const created = await limited.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'same words' },
        headers: { 'idempotency-key': 'create-key' },
      });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id ?? '';
      const otherJob = await createJobId(limited, project.id, 'another job');
      const sent = await keyed(project.id, jobId, 'message-key', 'same words');
      assert.equal(sent.status, 200, sent.text);
      const stored = await keyRows(project.id);
      for (const [job, key, prompt] of [
        [jobId, 'create-key', 'same words'],
        [otherJob, 'message-key', 'same words'],
        [jobId, 'message-key', 'other words'],
      ] as const) {
        const res = await unchanged(limited, () => keyed(project.id, job, key, prompt));
        assertError(res, 422, 'idempotency_key_reused');
      }
      assert.deepEqual(await keyRows(project.id), stored);
    });

    test('a follow-up refused for an archived job stores nothing; its retry is refused again', async () => {
      const project = await limited.createProject({ name: 'archived, keyed' });
      const jobId = await createJobId(limited, project.id, 'to be archived');
      const archived = await limited.request(
        'POST',
        `/v2/agent/${project.id}/job/${jobId}/archive`,
      );
      assert.equal(archived.status, 200, archived.text);
      for (let i = 0; i < 2; i++) {
        const res = await unchanged(limited, () =>
          keyed(project.id, jobId, 'after-archive', 'too late'),
        );
        assertError(res, 409, 'conflict');
        assert.equal(res.headers.get('idempotent-replayed'), null);
      }
      assert.deepEqual(await keyRows(project.id), []);
    });

    test('a duplicate while the first is in flight is a 409; then the first response is replayed', async () => {
      const project = await limited.createProject({ name: 'in flight' });
      const jobId = await createJobId(limited, project.id, 'first');
      const db = limited.service.ctx.db;
      // The test holds the job's row lock: the keyed follow-up claims its key, then waits.
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = db.transaction().execute(async (trx) => {
        await trx.selectFrom('jobs').select('id').where('id', '=', jobId).forUpdate().execute();
        locked();
        await held;
      });
      try {
        await isLocked;
        const first = keyed(project.id, jobId, 'slow-key', 'slow follow-up');
        await waitFor('the first follow-up to wait for the job row', async () => {
          const { rows } = await sql<{ n: number }>`
                SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(db);
          return (rows[0]?.n ?? 0) > 0 ? true : undefined;
        });
        for (const prompt of ['slow follow-up', 'another prompt']) {
          const started = Date.now();
          const res = await unchanged(limited, () => keyed(project.id, jobId, 'slow-key', prompt));
          assertError(res, 409, 'idempotency_key_in_flight');
          assert.ok(Date.now() - started < 2_000, 'the duplicate waited for the first');
        }
        release();
        await holder;
        const answered = await first;
        assert.equal(answered.status, 200, answered.text);
        const retry = await keyed(project.id, jobId, 'slow-key', 'slow follow-up');
        assert.equal(retry.status, 200);
        assert.equal(retry.text, answered.text);
        assert.equal(retry.headers.get('idempotent-replayed'), 'true');
        assert.equal((await turnRows(limited, jobId)).length, 2);
      } finally {
        release();
        await holder;
      }
    });
  });

  describe('security', () => {
    authCases(spec, fixture);
  });
});
