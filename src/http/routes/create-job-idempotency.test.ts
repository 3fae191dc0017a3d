// POST /v2/agent/{projectId}/job with an Idempotency-Key: a retry gets the first answer, a
// reuse with another body or by another project is refused, a duplicate in flight waits or is
// refused, and nothing is written twice.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertError, unchanged } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';

/** A create sent with node:http, which can send a header twice; fetch would join them. */
function postRaw(
  base: string,
  path: string,
  key: string,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; text: string }> {
  const body = JSON.stringify({ prompt: 'sent with two keys' });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const MAX_PROMPT = 50;
// Model vendors are never called by these tests: a key only makes a provider usable.
const FAKE_KEY = 'test-key-not-used-0000';

describe('POST /v2/agent/{projectId}/job: Idempotency-Key', () => {
  // Defaults, except a small prompt limit, as create-job.test.ts's service; no workers, so every
  // job stays as the API wrote it.
  let svc: TestService;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_MAX_PROMPT_CHARS: String(MAX_PROMPT), OPENAI_API_KEY: FAKE_KEY },
    });
  });
  after(async () => {
    await svc?.close();
  });

  const create = (s: TestService, projectId: string, prompt: string, key?: string) =>
    s.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt },
      ...(key ? { key } : {}),
    });

  const keyed = (
    s: TestService,
    projectId: string,
    key: string,
    body: Record<string, unknown> | string,
  ) =>
    s.request('POST', `/v2/agent/${projectId}/job`, {
      ...(typeof body === 'string'
        ? {
            rawBody: body,
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
          }
        : { body, headers: { 'idempotency-key': key } }),
    });
  const jobsOf = (projectId: string) =>
    svc.service.ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('project_id', '=', projectId)
      .execute();
  const keyRows = () =>
    svc.service.ctx.db
      .selectFrom('idempotency_keys')
      .selectAll()
      .orderBy('project_id')
      .orderBy('key')
      .execute();

  test('the same request again gets the first response; one job, one turn, no limit used', async () => {
    const project = await svc.createProject({ name: 'idempotent create' });
    const first = await keyed(svc, project.id, 'create-once', {
      prompt: 'Fix the flaky test',
      model: 'openai:gpt-5',
    });
    assert.equal(first.status, 201, first.text);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.equal(first.headers.get('ratelimit-remaining'), '99');
    // The same JSON in another spelling, and the key as an sf-string: the same request.
    const retries = [
      await unchanged(svc, () =>
        keyed(
          svc,
          project.id,
          '"create-once"',
          '{ "model" : "openai:gpt-5",\n  "prompt": "Fix the flaky test" }',
        ),
      ),
      await unchanged(svc, () =>
        keyed(svc, project.id, 'create-once', {
          model: 'openai:gpt-5',
          prompt: 'Fix the flaky test',
        }),
      ),
    ];
    for (const again of retries) {
      assert.equal(again.status, 201, again.text);
      assert.equal(again.text, first.text, 'the replay is not the first body byte for byte');
      assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      // A replay counts against no limit, and has no RateLimit headers of its own.
      assert.equal(again.headers.get('ratelimit-remaining'), null);
      assert.notEqual(again.headers.get('x-request-id'), first.headers.get('x-request-id'));
    }
    const jobs = await jobsOf(project.id);
    assert.deepEqual(
      jobs.map((j) => j.id),
      [first.json.id],
    );
    const turns = await svc.service.ctx.db
      .selectFrom('turns')
      .select('seq')
      .where('job_id', '=', first.json.id ?? '')
      .execute();
    assert.equal(turns.length, 1);
    const events = await svc.service.ctx.db
      .selectFrom('events')
      .select('type')
      .where('job_id', '=', first.json.id ?? '')
      .execute();
    assert.deepEqual(
      events.map((e) => e.type),
      ['job.created'],
    );
    // Without the key, the same body is a new job as ever.
    const plain = await create(svc, project.id, 'Fix the flaky test');
    assert.equal(plain.status, 201);
    assert.equal(plain.headers.get('ratelimit-remaining'), '98');
  });

  test('20 parallel duplicates: one job; each answer is its 201 or a 409 in flight', async () => {
    const project = await svc.createProject({ name: 'parallel duplicates' });
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        keyed(svc, project.id, 'parallel-key', { prompt: 'only once' }),
      ),
    );
    const created = results.filter((r) => r.status === 201);
    assert.ok(created.length >= 1, 'no request created the job');
    for (const res of results) {
      if (res.status === 201) assert.equal(res.text, created[0]?.text);
      else assertError(res, 409, 'idempotency_key_in_flight');
    }
    assert.equal(created.filter((r) => r.headers.get('idempotent-replayed') === null).length, 1);
    assert.deepEqual(
      (await jobsOf(project.id)).map((j) => j.id),
      [created[0]?.json.id],
    );
  });

  test('the same key with another body is a 422; nothing is written', async () => {
    const project = await svc.createProject({ name: 'reused key' });
    const first = await keyed(svc, project.id, 'reused', { prompt: 'one thing' });
    assert.equal(first.status, 201, first.text);
    const stored = await keyRows();
    for (const body of [
      { prompt: 'another thing' },
      { prompt: 'one thing ' },
      { prompt: 'one thing', model: 'openai:gpt-5' },
      { prompt: 'one thing', baseRef: 'main' },
    ]) {
      const res = await unchanged(svc, () => keyed(svc, project.id, 'reused', body));
      assertError(res, 422, 'idempotency_key_reused');
      assert.match(res.json.error ?? '', /Idempotency-Key was used for another request/);
    }
    assert.deepEqual(await keyRows(), stored);
    assert.equal((await jobsOf(project.id)).length, 1);
  });

  test('a malformed key, or two of them, is a 400 naming the header; nothing is written', async () => {
    const project = await svc.createProject({ name: 'bad keys' });
    const stored = await keyRows();
    for (const key of ['', '""', 'k'.repeat(256), 'two words', '"unterminated', 'a, b']) {
      const res = await unchanged(svc, () => keyed(svc, project.id, key, { prompt: 'x' }));
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /^"Idempotency-Key" /, key);
    }
    // Two header lines, as a client sends them.
    const twice = await unchanged(svc, () =>
      postRaw(svc.url, `/v2/agent/${project.id}/job`, svc.adminKey, {
        'idempotency-key': ['first-key', 'second-key'],
      }),
    );
    assert.equal(twice.status, 400, twice.text);
    const refusal = JSON.parse(twice.text) as { code: string; error: string };
    assert.equal(refusal.code, 'bad_request');
    assert.match(refusal.error, /^"Idempotency-Key" must be one value/);
    assert.deepEqual(await keyRows(), stored);
    assert.equal((await jobsOf(project.id)).length, 0);
    // The longest key is accepted.
    const longest = await keyed(svc, project.id, 'k'.repeat(255), { prompt: 'x' });
    assert.equal(longest.status, 201, longest.text);
  });

  test("keys are per project: another project's request with the same key makes its job", async () => {
    const a = await svc.createProject({ name: 'key in A' });
    const b = await svc.createProject({ name: 'key in B' });
    const inA = await keyed(svc, a.id, 'shared-key', { prompt: 'same' });
    const inB = await keyed(svc, b.id, 'shared-key', { prompt: 'same' });
    for (const res of [inA, inB]) {
      assert.equal(res.status, 201, res.text);
      assert.equal(res.headers.get('idempotent-replayed'), null);
    }
    assert.notEqual(inA.json.id, inB.json.id);
    assert.equal(inB.json.projectId, b.id);
    assert.equal((await jobsOf(b.id)).length, 1);
  });

  test('after 24 hours the key is forgotten: the same request makes a new job', async () => {
    const project = await svc.createProject({ name: 'expired key' });
    const first = await keyed(svc, project.id, 'expiring', { prompt: 'again tomorrow' });
    assert.equal(first.status, 201, first.text);
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 second' WHERE project_id = ${project.id}`.execute(
      svc.service.ctx.db,
    );
    const later = await keyed(svc, project.id, 'expiring', { prompt: 'again tomorrow' });
    assert.equal(later.status, 201, later.text);
    assert.equal(later.headers.get('idempotent-replayed'), null);
    assert.notEqual(later.json.id, first.json.id);
    // The key now answers with the new job.
    const replay = await keyed(svc, project.id, 'expiring', { prompt: 'again tomorrow' });
    assert.equal(replay.text, later.text);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal((await jobsOf(project.id)).length, 2);
  });

  test('a request that fails stores nothing: its retry runs', async () => {
    // Google has no key on this service: the create is refused inside its transaction.
    const project = await svc.createProject({
      name: 'unusable model',
      model: 'google:gemini-2.5-pro',
    });
    const refused = await unchanged(svc, () =>
      keyed(svc, project.id, 'after-a-failure', { prompt: 'try me' }),
    );
    assertError(refused, 400, 'model_unavailable');
    assert.equal((await keyRows()).filter((r) => r.project_id === project.id).length, 0);
    const fixed = await svc.request('PATCH', `/v2/admin/projects/${project.id}`, {
      body: { model: 'openai:gpt-5' },
    });
    assert.equal(fixed.status, 200, fixed.text);
    const retried = await keyed(svc, project.id, 'after-a-failure', { prompt: 'try me' });
    assert.equal(retried.status, 201, retried.text);
    assert.equal(retried.headers.get('idempotent-replayed'), null);
    assert.equal(retried.json.model, 'openai:gpt-5');
  });

  test('the OpenAPI document describes the header and the 409 and 422 answers', async () => {
    const res = await svc.request('GET', '/openapi.json', { key: null });
    const doc = JSON.parse(res.text) as {
      paths: Record<
        string,
        Record<
          string,
          { parameters?: { name: string; in: string }[]; responses: Record<string, unknown> }
        >
      >;
    };
    for (const path of ['/v2/agent/{projectId}/job', '/v2/agent/{projectId}/job/{id}/message']) {
      const op = doc.paths[path]?.post;
      assert.ok(op, path);
      const header = op.parameters?.find((p) => p.in === 'header');
      assert.equal(header?.name, 'idempotency-key', path);
      for (const status of ['409', '422']) assert.ok(op.responses[status], `${path} ${status}`);
    }
  });
});
