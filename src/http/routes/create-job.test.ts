// POST /v2/agent/{projectId}/job: the job record, its model and source, prompt validation,
// rate limits (also under 50 parallel requests) and the common auth cases; Idempotency-Key in
// create-job-idempotency.test.ts.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { sql } from 'kysely';
import {
  assertError,
  authCases,
  createRouteFixture,
  isoNear,
  JOB_FIELDS,
  JOB_ID,
  jsonBodyCases,
  promptCases,
  type RouteFixture,
  type RouteSpec,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { turnBodyLimit } from '../../jobs/attachments.ts';

const MAX_PROMPT = 50;
// The documented default when neither the project nor ERRAND_MODEL names a model.
const DEFAULT_MODEL_ID = 'anthropic:claude-sonnet-4-5';
const ENV_MODEL = 'openai-compatible:env-default-model';
const CONFIGURED_CREATE_LIMIT = 20;
// A window far longer than the test run, so no count resets half-way through a test.
const LONG_WINDOW = String(86_400 * 31);
// Model vendors are never called by these tests: a key only makes a provider usable.
const FAKE_KEY = 'test-key-not-used-0000';

const spec: RouteSpec = {
  method: 'POST',
  scope: 'project',
  bodyLimit: (fx) => turnBodyLimit(fx.svc.service.ctx.config.maxPromptChars),
  path: ({ projectId }) => `/v2/agent/${projectId}/job`,
  body: () => ({ prompt: 'a prompt from the common cases' }),
};

describe('POST /v2/agent/{projectId}/job', () => {
  // svc: defaults, except a small prompt limit. configured: ERRAND_MODEL and a create limit.
  // Neither runs workers, so every job stays as the API wrote it.
  let svc: TestService;
  let configured: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;

  before(async () => {
    [svc, configured] = await Promise.all([
      startTestService({
        worker: false,
        // The test environment has an Anthropic key; OpenAI gets one here, Google none.
        env: { ERRAND_MAX_PROMPT_CHARS: String(MAX_PROMPT), OPENAI_API_KEY: FAKE_KEY },
      }),
      startTestService({
        worker: false,
        env: {
          ERRAND_MODEL: ENV_MODEL,
          ERRAND_OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
          GOOGLE_GENERATIVE_AI_API_KEY: FAKE_KEY,
          ERRAND_RATE_LIMIT_CREATE: String(CONFIGURED_CREATE_LIMIT),
          ERRAND_RATE_LIMIT_MESSAGE: '2',
          ERRAND_RATE_LIMIT_WINDOW_SECONDS: LONG_WINDOW,
        },
      }),
    ]);
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await Promise.all([svc?.close(), configured?.close()]);
  });

  const create = (s: TestService, projectId: string, prompt: string, key?: string) =>
    s.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt },
      ...(key ? { key } : {}),
    });

  describe('happy path', () => {
    test('201 with every field of the job record, stored as returned', async () => {
      const project = await svc.createProject({ name: 'record', ref: 'develop' });
      const { key, id: keyId } = await svc.createProjectKey(project.id);
      const res = await create(svc, project.id, 'Fix the failing test', key);
      assert.equal(res.status, 201, res.text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const job = res.json;
      assert.deepEqual(Object.keys(job).sort(), JOB_FIELDS);
      assert.match(job.id ?? '', JOB_ID);
      assert.equal(job.status, 'active');
      // The published interface's source.ref is the branch the agent works on; the ref the
      // job started from is baseRef, and a local repository is a file:// URL.
      assert.deepEqual(job.source, {
        repository: pathToFileURL(project.repository).href,
        ref: `errand/${job.id}`,
        baseRef: 'develop',
      });
      assert.equal(job.model, DEFAULT_MODEL_ID);
      assert.equal(job.prLink, null);
      isoNear(job.createdAt);
      assert.equal(job.archivedAt, null);
      assert.equal(job.projectId, project.id);
      assert.equal(job.branch, `errand/${job.id}`);
      assert.equal(job.error, null);
      assert.equal(job.turns, 1);
      // Made through the API, not from a forge issue.
      assert.equal(job.origin, null);
      // Who created it: the key, by id (never the key).
      assert.deepEqual(job.createdBy, { kind: 'key', id: keyId });
      isoNear(job.updatedAt);
      // No pull request yet: nothing the forge said.
      assert.equal(job.pr, null);
      // A code turn, the default; no summary before a turn finished, no plan waiting.
      assert.equal(job.mode, 'code');
      assert.equal(job.summary, null);
      assert.equal(job.awaitingApproval, false);

      const read = await svc.request('GET', `/v2/agent/${project.id}/job/${job.id}`, { key });
      assert.equal(read.status, 200);
      assert.deepEqual(read.json, job);
      const list = await svc.request('GET', `/v2/agent/${project.id}/jobs`, { key });
      assert.deepEqual(list.json.jobs, [job]);

      const turns = await svc.service.ctx.db
        .selectFrom('turns')
        .selectAll()
        .where('job_id', '=', job.id ?? '')
        .execute();
      assert.equal(turns.length, 1);
      assert.equal(turns[0]?.seq, 1);
      assert.equal(turns[0]?.prompt, 'Fix the failing test');
      assert.equal(turns[0]?.state, 'queued');
      assert.ok(turns[0]?.queue_id, 'the turn has no queue entry');
    });

    test('the job.created event holds the record sent back; the queue entry is the one pg-boss writes', async () => {
      const project = await svc.createProject({ name: 'event record' });
      const db = svc.service.ctx.db;
      // The statement writes the event's times itself: twenty creates meet every kind of
      // microsecond, which it must cut to milliseconds as the response does.
      for (let i = 0; i < 20; i++) {
        const res = await create(svc, project.id, `job ${i}`);
        assert.equal(res.status, 201, res.text);
        const events = await db
          .selectFrom('events')
          .select(['type', 'turn', 'data'])
          .where('job_id', '=', res.json.id ?? '')
          .execute();
        assert.deepEqual(events, [{ type: 'job.created', turn: null, data: { job: res.json } }]);
      }
      // A follow-up's entry is sent by pg-boss's send on the transaction: the create's entry,
      // written inside the create's own statement, must be the same row but for its identity.
      const job = await create(svc, project.id, 'first');
      const followUp = await svc.request(
        'POST',
        `/v2/agent/${project.id}/job/${job.json.id}/message`,
        { body: { prompt: 'second' } },
      );
      assert.equal(followUp.status, 200, followUp.text);
      const { rows } = await sql<{
        seq: number;
        data: unknown;
        keep_for: string;
        rest: { state?: string };
      }>`
          SELECT t.seq, q.data, (q.keep_until - q.start_after)::text AS keep_for,
            to_jsonb(q) - ARRAY['id', 'data', 'created_on', 'start_after', 'keep_until'] AS rest
          FROM turns t JOIN pgboss.job q ON q.id::text = t.queue_id
          WHERE t.job_id = ${job.json.id ?? ''} ORDER BY t.seq`.execute(db);
      assert.deepEqual(
        rows.map((r) => [r.seq, r.data]),
        [
          [1, { jobId: job.json.id, seq: 1 }],
          [2, { jobId: job.json.id, seq: 2 }],
        ],
      );
      assert.equal(rows[0]?.keep_for, rows[1]?.keep_for);
      assert.deepEqual(rows[0]?.rest, rows[1]?.rest);
      assert.equal(rows[0]?.rest.state, 'created');
    });

    test('a webhook endpoint that wants job.created gets its delivery with the job; others none', async () => {
      const project = await svc.createProject({ name: 'with endpoints' });
      const db = svc.service.ctx.db;
      const endpoint = (id: string, events: string[], enabled: boolean) =>
        sql`INSERT INTO webhooks (id, project_id, url, events, enabled, secret)
            VALUES (${id}, ${project.id}, 'https://receiver.example.test/', ${events}, ${enabled}, 'not used')`.execute(
          db,
        );
      const deliveries = async (jobId: string) =>
        (
          await sql<{ webhook_id: string; type: string; payload: { data: { job: unknown } } }>`
              SELECT webhook_id, type, payload FROM webhook_deliveries WHERE job_id = ${jobId}
              ORDER BY webhook_id`.execute(db)
        ).rows;
      // Endpoints that want other events, or are disabled: the create writes no delivery.
      await endpoint(`wh_${project.id}_a`, ['job.completed'], true);
      await endpoint(`wh_${project.id}_b`, ['job.created'], false);
      const quiet = await create(svc, project.id, 'no delivery');
      assert.equal(quiet.status, 201, quiet.text);
      assert.deepEqual(await deliveries(quiet.json.id ?? ''), []);
      await endpoint(`wh_${project.id}_c`, ['job.created', 'job.failed'], true);
      const heard = await create(svc, project.id, 'one delivery');
      assert.equal(heard.status, 201, heard.text);
      const [delivery, ...more] = await deliveries(heard.json.id ?? '');
      assert.deepEqual(more, []);
      assert.equal(delivery?.webhook_id, `wh_${project.id}_c`);
      assert.equal(delivery?.type, 'job.created');
      assert.deepEqual(delivery?.payload.data.job, heard.json);
      const events = await db
        .selectFrom('events')
        .select('type')
        .where('job_id', '=', heard.json.id ?? '')
        .execute();
      assert.deepEqual(events, [{ type: 'job.created' }]);
    });

    test('parallel creates for projects with and without a job.created endpoint: deliveries for exactly the former', async () => {
      const [heard, quiet] = await Promise.all([
        svc.createProject({ name: 'heard in parallel' }),
        svc.createProject({ name: 'quiet in parallel' }),
      ]);
      const db = svc.service.ctx.db;
      await sql`INSERT INTO webhooks (id, project_id, url, events, enabled, secret)
          VALUES (${`wh_${heard.id}`}, ${heard.id}, 'https://receiver.example.test/', ${['job.created']}, true, 'not used')`.execute(
        db,
      );
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          create(svc, (i % 2 === 0 ? heard : quiet).id, `parallel ${i}`),
        ),
      );
      for (const res of results) assert.equal(res.status, 201, res.text);
      const ids = (project: { id: string }) =>
        results
          .filter((r) => r.json.projectId === project.id)
          .map((r) => r.json.id ?? '')
          .sort();
      const delivered = await sql<{ job_id: string }>`
          SELECT d.job_id FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id
          WHERE j.project_id IN (${heard.id}, ${quiet.id}) AND d.type = 'job.created'
          ORDER BY d.job_id COLLATE "C"`.execute(db);
      assert.deepEqual(
        delivered.rows.map((r) => r.job_id),
        ids(heard),
      );
      const entries = await sql<{ job_id: string }>`
          SELECT t.job_id FROM turns t JOIN pgboss.job q ON q.id::text = t.queue_id
          WHERE t.job_id = ANY (${[...ids(heard), ...ids(quiet)]}) ORDER BY t.job_id COLLATE "C"`.execute(
        db,
      );
      assert.deepEqual(
        entries.rows.map((r) => r.job_id),
        [...ids(heard), ...ids(quiet)].sort(),
      );
    });

    test('the prompt is stored exactly as sent', async () => {
      const prompt = '  Fix "the" bug\n\tin ünïcødé ✓ 🚀 \\n <b>  ';
      const res = await create(svc, fx.project.id, prompt, fx.projectKey);
      assert.equal(res.status, 201, res.text);
      const turn = await svc.service.ctx.db
        .selectFrom('turns')
        .select('prompt')
        .where('job_id', '=', res.json.id ?? '')
        .executeTakeFirstOrThrow();
      assert.equal(turn.prompt, prompt);
    });

    test("the model is the project's, else ERRAND_MODEL, else the built-in default", async () => {
      const cases: [TestService, string | undefined, string][] = [
        [svc, undefined, DEFAULT_MODEL_ID],
        [svc, 'openai:gpt-5', 'openai:gpt-5'],
        [configured, undefined, ENV_MODEL],
        [configured, 'google:gemini-2.5-pro', 'google:gemini-2.5-pro'],
      ];
      for (const [s, model, expected] of cases) {
        const project = await s.createProject({ name: 'model', ...(model ? { model } : {}) });
        const res = await create(s, project.id, 'which model?');
        assert.equal(res.status, 201, res.text);
        assert.equal(res.json.model, expected);
        assert.equal(res.json.source?.repository, pathToFileURL(project.repository).href);
        assert.equal(res.json.source?.ref, res.json.branch);
        assert.equal(res.json.source?.baseRef, 'main');
      }
    });

    test("a model and a ref to start from, given on create, are the job's", async () => {
      const project = await svc.createProject({ name: 'options', ref: 'develop' });
      const res = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'with options', model: 'openai:gpt-5', baseRef: 'v1.2.3' },
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json.model, 'openai:gpt-5');
      assert.equal(res.json.source?.baseRef, 'v1.2.3');
      const row = await svc.service.ctx.db
        .selectFrom('jobs')
        .select(['model', 'ref'])
        .where('id', '=', res.json.id ?? '')
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { model: 'openai:gpt-5', ref: 'v1.2.3' });
    });

    test('RateLimit headers count down per project', async () => {
      const project = await svc.createProject({ name: 'headers' });
      const first = await create(svc, project.id, 'one');
      const second = await create(svc, project.id, 'two');
      for (const res of [first, second]) {
        assert.equal(res.status, 201);
        assert.equal(res.headers.get('ratelimit-policy'), '100;w=3600');
        assert.equal(res.headers.get('ratelimit-limit'), '100');
        const reset = Number(res.headers.get('ratelimit-reset'));
        assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= 3600, `reset ${reset}`);
        assert.equal(res.headers.get('retry-after'), null);
      }
      assert.equal(first.headers.get('ratelimit-remaining'), '99');
      // The fixed window may end between the two requests; then the count starts again.
      const rolled =
        Number(second.headers.get('ratelimit-reset')) >
        Number(first.headers.get('ratelimit-reset'));
      assert.equal(second.headers.get('ratelimit-remaining'), rolled ? '99' : '98');
      // Another project has its own count.
      const other = await svc.createProject({ name: 'headers 2' });
      const third = await create(svc, other.id, 'three');
      assert.equal(third.headers.get('ratelimit-remaining'), '99');
    });

    test('each request makes a new job; the admin key may create for any project', async () => {
      const a = await create(svc, fx.project.id, 'same prompt', fx.projectKey);
      const b = await create(svc, fx.project.id, 'same prompt', fx.projectKey);
      const c = await create(svc, fx.project.id, 'same prompt', svc.adminKey);
      for (const res of [a, b, c]) assert.equal(res.status, 201, res.text);
      assert.equal(new Set([a.json.id, b.json.id, c.json.id]).size, 3);
      assert.equal(new Set([a.json.branch, b.json.branch, c.json.branch]).size, 3);
    });
  });

  describe('errors', () => {
    jsonBodyCases(spec, fixture);
    promptCases(spec, fixture, MAX_PROMPT);

    test('400 for a model or baseRef that is malformed or cannot be used; nothing is written', async () => {
      const cases: [Record<string, unknown>, number, string, RegExp][] = [
        [
          { model: 'google:gemini-2.5-pro' },
          400,
          'model_unavailable',
          /GOOGLE_GENERATIVE_AI_API_KEY/,
        ],
        [{ model: 'mistral:large-latest' }, 400, 'model_unavailable', /unknown provider 'mistral'/],
        [{ model: 'no-provider' }, 400, 'bad_request', /"model" must look like provider:model/],
        [{ model: 7 }, 400, 'bad_request', /"model" must be a string/],
        [{ baseRef: 'a..b' }, 400, 'bad_request', /invalid "baseRef"/],
        [{ baseRef: '-x' }, 400, 'bad_request', /invalid "baseRef"/],
        [{ baseRef: ['main'] }, 400, 'bad_request', /"baseRef" must be a string/],
      ];
      for (const [extra, status, code, message] of cases) {
        const res = await unchanged(svc, () =>
          svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
            body: { prompt: 'with options', ...extra },
            key: fx.projectKey,
          }),
        );
        assertError(res, status, code);
        assert.match(res.json.error ?? '', message, JSON.stringify(extra));
      }
    });

    test('400 model_unavailable when the model cannot be used; nothing is written', async () => {
      const cases: [string, RegExp][] = [
        ['google:gemini-2.5-pro', /GOOGLE_GENERATIVE_AI_API_KEY/],
        ['mistral:large-latest', /unknown provider 'mistral'/],
      ];
      for (const [model, message] of cases) {
        const project = await svc.createProject({ name: 'unusable model', model });
        const res = await unchanged(svc, () => create(svc, project.id, 'which model?'));
        assertError(res, 400, 'model_unavailable');
        assert.match(res.json.error ?? '', message);
        assert.doesNotMatch(res.text, new RegExp(FAKE_KEY));
      }
    });

    test('429 with Retry-After once the limit is used; nothing is written', async () => {
      const project = await configured.createProject({ name: 'limited' });
      const ids: string[] = [];
      for (let i = 0; i < CONFIGURED_CREATE_LIMIT; i++) {
        const res = await create(configured, project.id, `job ${i}`);
        assert.equal(res.status, 201, res.text);
        assert.equal(
          res.headers.get('ratelimit-remaining'),
          String(CONFIGURED_CREATE_LIMIT - 1 - i),
        );
        ids.push(res.json.id ?? '');
      }
      const written = async () =>
        (
          await sql<{ events: string; entries: string }>`
              SELECT (SELECT count(*) FROM events) AS events,
                (SELECT count(*) FROM pgboss.job WHERE name = 'turns') AS entries`.execute(
            configured.service.ctx.db,
          )
        ).rows[0];
      const before = await written();
      const refused = await unchanged(configured, () =>
        create(configured, project.id, 'one too many'),
      );
      assertError(refused, 429, 'rate_limited');
      // Nor an event or a queue entry, which the create's statement writes with the job.
      assert.deepEqual(await written(), before);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
      assert.ok(retryAfter <= Number(LONG_WINDOW));
      assert.equal(refused.headers.get('ratelimit-limit'), String(CONFIGURED_CREATE_LIMIT));
      assert.equal(refused.headers.get('ratelimit-remaining'), '0');
      assert.equal(refused.headers.get('ratelimit-reset'), String(retryAfter));
      assert.equal(
        refused.headers.get('ratelimit-policy'),
        `${CONFIGURED_CREATE_LIMIT};w=${LONG_WINDOW}`,
      );
      // Still refused: a refusal does not free a slot.
      assertError(await create(configured, project.id, 'again'), 429, 'rate_limited');
      const list = await configured.request('GET', `/v2/agent/${project.id}/jobs?limit=100`);
      assert.deepEqual(
        list.json.jobs?.map((j) => j.id),
        [...ids].reverse(),
      );

      // Follow-up messages have their own count; other projects have their own too.
      const message = await configured.request(
        'POST',
        `/v2/agent/${project.id}/job/${ids[0]}/message`,
        { body: { prompt: 'a follow-up' } },
      );
      assert.equal(message.status, 200, message.text);
      assert.equal(message.headers.get('ratelimit-limit'), '2');
      assert.equal(message.headers.get('ratelimit-remaining'), '1');
      const other = await configured.createProject({ name: 'not limited' });
      assert.equal((await create(configured, other.id, 'fine')).status, 201);
    });

    test("429 budget_exhausted once the project's month is spent, with Retry-After to the month's end; nothing is written", async () => {
      const project = await svc.createProject({ name: 'spent', monthlyBudgetUsd: 1 });
      const { db } = svc.service.ctx;
      const first = await create(svc, project.id, 'within the budget');
      assert.equal(first.status, 201, first.text);
      // The month (UTC) as the worker's transitions would have left it: $1.25 of $1.
      const now = new Date();
      const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
      await db
        .insertInto('project_spend')
        .values({
          project_id: project.id,
          month: month.toISOString().slice(0, 10),
          input_tokens: 300_000,
          output_tokens: 20_000,
          cost_usd: 1.25,
        })
        .execute();
      const written = async () =>
        (
          await sql<{ events: string; entries: string }>`
              SELECT (SELECT count(*) FROM events) AS events,
                (SELECT count(*) FROM pgboss.job WHERE name = 'turns') AS entries`.execute(db)
        ).rows[0];
      const before = await written();
      const refused = await unchanged(svc, () => create(svc, project.id, 'one more'));
      assertError(refused, 429, 'budget_exhausted');
      assert.match(
        refused.json.error ?? '',
        new RegExp(
          `project ${project.id} has spent \\$1\\.25 of its monthly budget of \\$1\\.00 \\(monthlyBudgetUsd\\) in ${month.toISOString().slice(0, 7)} \\(UTC\\)`,
        ),
      );
      assert.deepEqual(await written(), before);
      const retryAfter = Number(refused.headers.get('retry-after'));
      const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
      assert.ok(retryAfter <= Math.ceil((monthEnd - now.getTime()) / 1000) + 1);
      // A follow-up to the job made before is refused too: the month is the project's.
      const followUp = await unchanged(svc, () =>
        svc.request('POST', `/v2/agent/${project.id}/job/${first.json.id}/message`, {
          body: { prompt: 'and more' },
        }),
      );
      assertError(followUp, 429, 'budget_exhausted');
      // Another project is not held to it; raising the budget lets this one work again.
      const other = await svc.createProject({ name: 'not spent', monthlyBudgetUsd: 1 });
      assert.equal((await create(svc, other.id, 'fine')).status, 201);
      const raised = await svc.request('PATCH', `/v2/admin/projects/${project.id}`, {
        body: { monthlyBudgetUsd: 2 },
      });
      assert.equal(raised.status, 200, raised.text);
      assert.equal((await create(svc, project.id, 'after the raise')).status, 201);
    });

    test('400 model_unavailable for a model without a known price on a project with a budget; nothing is written', async () => {
      const project = await svc.createProject({ name: 'held', jobBudgetUsd: 5 });
      const res = await unchanged(svc, () =>
        svc.request('POST', `/v2/agent/${project.id}/job`, {
          body: { prompt: 'on a model no catalog prices', model: 'openai:gpt-unpriced-test' },
        }),
      );
      assertError(res, 400, 'model_unavailable');
      assert.match(
        res.json.error ?? '',
        /model 'openai:gpt-unpriced-test' has no known price, and project prj_\w+ has a budget \(jobBudgetUsd\).*ERRAND_MODEL_CATALOG/,
      );
      // Without a budget, the same model is taken: its cost is simply unknown.
      const free = await svc.createProject({ name: 'free' });
      const taken = await svc.request('POST', `/v2/agent/${free.id}/job`, {
        body: { prompt: 'unpriced is fine here', model: 'openai:gpt-unpriced-test' },
      });
      assert.equal(taken.status, 201, taken.text);
      assert.equal(taken.json.usage?.costUsd, 0);
    });

    test(`50 parallel creates with a limit of ${CONFIGURED_CREATE_LIMIT}: exactly ${CONFIGURED_CREATE_LIMIT} jobs`, async () => {
      const project = await configured.createProject({ name: 'parallel' });
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => create(configured, project.id, `parallel ${i}`)),
      );
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status !== 201);
      assert.equal(created.length, CONFIGURED_CREATE_LIMIT);
      assert.equal(refused.length, 50 - CONFIGURED_CREATE_LIMIT);
      for (const res of refused) {
        assertError(res, 429, 'rate_limited');
        assert.ok(Number(res.headers.get('retry-after')) >= 1);
      }
      // Every slot was handed out exactly once.
      assert.deepEqual(
        created.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort((a, b) => a - b),
        Array.from({ length: CONFIGURED_CREATE_LIMIT }, (_, i) => i),
      );
      const list = await configured.request('GET', `/v2/agent/${project.id}/jobs?limit=100`);
      assert.equal(list.status, 200);
      assert.deepEqual(
        new Set(list.json.jobs?.map((j) => j.id)),
        new Set(created.map((r) => r.json.id)),
      );
      const db = configured.service.ctx.db;
      const jobs = await db
        .selectFrom('jobs')
        .select('id')
        .where('project_id', '=', project.id)
        .execute();
      assert.equal(jobs.length, CONFIGURED_CREATE_LIMIT);
      const turns = await db
        .selectFrom('turns')
        .select('job_id')
        .where(
          'job_id',
          'in',
          jobs.map((j) => j.id),
        )
        .execute();
      assert.equal(turns.length, CONFIGURED_CREATE_LIMIT);
    });
  });

  describe('security', () => {
    authCases(spec, fixture);
  });
});
