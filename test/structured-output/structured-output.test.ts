// Structured output end to end through the HTTP API (docs/structured-output.md): the real
// service, a real git server over loopback HTTP, the fake of GitHub's API, and the fake model
// vendors (OpenAI chat and Anthropic messages), which refuse a response format the vendor would
// refuse. A turn given an outputSchema ends with a value valid against it in the job record and
// its turn.finished event; an invalid answer is told its errors and asked once more; invalid
// twice fails the turn with the validation errors. Refused schemas change nothing.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { isRecord } from '../../src/json.ts';
import { reply, toolCalls } from '../support/fake-llm.ts';
import { git } from '../support/git.ts';
import { useGitHubStand } from '../support/github-stand.ts';
import { untilStatus } from '../support/jobs.ts';
import { assertError, unchanged } from '../support/route-cases.ts';

const MODEL_KEY = 'sk-test-output-8c2f1e0b';

/** A closed schema, as both vendors' structured outputs take it. */
const VERDICT = {
  type: 'object',
  properties: {
    verdict: { type: 'string', enum: ['yes', 'no'] },
    files: { type: 'array', items: { type: 'string' } },
  },
  required: ['verdict', 'files'],
  additionalProperties: false,
};

/** The request's response_format (OpenAI chat). */
function responseFormat(body: unknown): unknown {
  return isRecord(body) ? body.response_format : undefined;
}

function lastUserText(body: unknown): string {
  const messages = isRecord(body) && Array.isArray(body.messages) ? body.messages : [];
  const last = messages.filter((m) => isRecord(m) && m.role === 'user').at(-1);
  return JSON.stringify(isRecord(last) ? last.content : '');
}

describe('structured output', () => {
  const stand = useGitHubStand({
    name: 'output',
    modelKey: MODEL_KEY,
    models: ['gpt-test', 'claude-sonnet-4-5'],
    env: {
      ERRAND_MODEL: 'openai:gpt-test',
      ERRAND_SECRET_KEY: 'test-secret-key-for-errand-output',
    },
  });

  const until = (jobId: string, status: string) =>
    untilStatus(stand.svc, stand.projectId, jobId, status, { failFast: status !== 'failed' });
  const events = async (jobId: string) =>
    (await stand.svc.request('GET', `/v2/agent/${stand.projectId}/job/${jobId}/events`)).json
      .events ?? [];
  const create = (body: Record<string, unknown>) =>
    stand.svc.request('POST', `/v2/agent/${stand.projectId}/job`, { body });
  /** An ask job on an Anthropic model, its model calls answered by `answers` in turn. */
  const askClaude = async (outputSchema: Record<string, unknown>, answers: string[]) => {
    stand.llm.script(
      ...answers.map((text) => ({ ...reply(text), protocol: 'anthropic' as const })),
    );
    const created = await create({
      prompt: 'Is it broken?',
      mode: 'ask',
      model: 'anthropic:claude-sonnet-4-5',
      outputSchema,
    });
    assert.equal(created.status, 201, created.text);
    return until(created.json.id as string, 'completed');
  };

  describe('refused schemas', () => {
    const cases: [string, unknown, RegExp][] = [
      ['an array', [{ type: 'string' }], /"outputSchema" must be a JSON Schema object/],
      ['a string', '{"type":"object"}', /"outputSchema" must be a JSON Schema object/],
      [
        'over 16 KB',
        { type: 'object', description: 'x'.repeat(16 * 1024) },
        /"outputSchema" is \d+ bytes as JSON; the maximum is 16384/,
      ],
      [
        'not compiling',
        { type: 'object', properties: { a: { type: 'nope' } } },
        /"outputSchema" is not a valid JSON Schema 2020-12/,
      ],
      [
        'a remote $ref',
        { type: 'object', properties: { a: { $ref: 'https://example.com/a.json' } } },
        /"outputSchema" refers to "https:\/\/example.com\/a.json": only references inside the schema/,
      ],
      [
        'another draft',
        { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' },
        /"outputSchema" names another draft in "\$schema": only JSON Schema 2020-12 \(https:\/\/json-schema.org\/draft\/2020-12\/schema\) is taken/,
      ],
      [
        'a dangling local $ref',
        { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
        /"outputSchema" is not a valid JSON Schema 2020-12: can't resolve reference/,
      ],
    ];
    // A finished job, for the messages.
    let jobId: string;
    before(async () => {
      stand.llm.script(reply('Nothing to see.'));
      const created = await create({ prompt: 'look', mode: 'ask' });
      assert.equal(created.status, 201, created.text);
      jobId = created.json.id as string;
      await until(jobId, 'completed');
    });

    for (const [what, schema, message] of cases) {
      test(`400 on create and on a message for ${what}; nothing is written`, async () => {
        const refused = await unchanged(stand.svc, () =>
          create({ prompt: 'answer', mode: 'ask', outputSchema: schema }),
        );
        assertError(refused, 400, 'bad_request');
        assert.match(refused.json.error ?? '', message);
        const message_ = await unchanged(stand.svc, () =>
          stand.svc.request('POST', `/v2/agent/${stand.projectId}/job/${jobId}/message`, {
            body: { prompt: 'again', mode: 'ask', outputSchema: schema },
          }),
        );
        assertError(message_, 400, 'bad_request');
        assert.match(message_.json.error ?? '', message);
      });
    }
  });

  test("an ask job's output is valid against its schema, in the record and in turn.finished; sent as OpenAI's json_schema response format", async () => {
    const value = { verdict: 'yes', files: ['src/main.ts'] };
    stand.llm.script(
      toolCalls([{ name: 'list_files', input: {} }]),
      reply('Yes: src/main.ts starts it.'),
      reply(JSON.stringify(value)),
    );
    const created = await create({
      prompt: 'Does src/main.ts start the service?',
      mode: 'ask',
      outputSchema: VERDICT,
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.output, null);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'completed');
    assert.deepEqual(job.output, value);
    assert.equal(job.summary, 'Yes: src/main.ts starts it.');

    // The loop's requests ask for no format; the last one asks for the schema, not strict.
    const requests = stand.llm.requests;
    assert.equal(requests.length, 3);
    assert.equal(responseFormat(requests[0]?.body), undefined);
    assert.deepEqual(responseFormat(requests[2]?.body), {
      type: 'json_schema',
      json_schema: { schema: VERDICT, strict: false, name: 'output' },
    });
    assert.match(lastUserText(requests[2]?.body), /JSON Schema/);

    const log = await events(jobId);
    const finished = log.find((e) => e.type === 'turn.finished');
    assert.ok(isRecord(finished?.data));
    assert.deepEqual(finished.data.output, value);
    // Its call is a model step of the turn like the others, counted in the job's usage.
    assert.equal(log.filter((e) => e.type === 'model.step').length, 3);
    const stored = await stand.svc.service.ctx.db
      .selectFrom('turns')
      .select(['output', 'output_schema'])
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(stored.output, value);
    assert.deepEqual(stored.output_schema, VERDICT);
  });

  test('an invalid answer is told its errors and asked once more; the valid one is the output', async () => {
    stand.llm.script(
      reply('Done looking.'),
      reply(JSON.stringify({ verdict: 'maybe' })),
      reply(JSON.stringify({ verdict: 'no', files: [] })),
    );
    const created = await create({ prompt: 'Is there a bug?', mode: 'ask', outputSchema: VERDICT });
    assert.equal(created.status, 201, created.text);
    const job = await until(created.json.id as string, 'completed');
    assert.deepEqual(job.output, { verdict: 'no', files: [] });
    const retry = lastUserText(stand.llm.requests[2]?.body);
    assert.match(retry, /does not satisfy the required JSON Schema/);
    assert.match(retry, /must have required property 'files'/);
    assert.match(retry, /\/verdict: must be equal to one of the allowed values/);
  });

  test('an answer still invalid after the retry fails the turn with the validation errors', async () => {
    stand.llm.script(
      reply('Done.'),
      reply('not json at all'),
      reply(JSON.stringify({ verdict: 1 })),
    );
    const created = await create({ prompt: 'Is there a bug?', mode: 'ask', outputSchema: VERDICT });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'failed');
    assert.equal(job.output, null);
    const error = String(job.error);
    assert.match(error, /not valid against the outputSchema, after one retry/);
    assert.match(error, /\/verdict: must be string/);
    assert.match(error, /must have required property 'files'/);
    assert.match(lastUserText(stand.llm.requests[2]?.body), /the answer is not JSON/);
    const failed = (await events(jobId)).find((e) => e.type === 'turn.failed');
    assert.ok(isRecord(failed?.data));
    assert.equal(failed.data.error, job.error);
  });

  test('a code job commits and pushes its change, and its output comes with it; a later turn without a schema keeps it', async () => {
    const value = { verdict: 'yes', files: ['NOTES.md'] };
    stand.llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'notes\n' } }]),
      reply('Add NOTES.md'),
      reply(JSON.stringify(value)),
    );
    const created = await create({ prompt: 'Add notes', outputSchema: VERDICT });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'completed');
    assert.deepEqual(job.output, value);
    assert.ok(job.prLink, 'the code turn opened no pull request');
    const branch = String(job.branch);
    assert.equal(git(stand.bare, 'show', `refs/heads/${branch}:NOTES.md`), 'notes');

    stand.llm.script(reply('Nothing more to do.'));
    const followed = await stand.svc.request(
      'POST',
      `/v2/agent/${stand.projectId}/job/${jobId}/message`,
      {
        body: { prompt: 'anything else?', mode: 'ask' },
      },
    );
    assert.equal(followed.status, 200, followed.text);
    const after = await until(jobId, 'completed');
    assert.equal(after.summary, 'Nothing more to do.');
    assert.deepEqual(after.output, value);
    // The follow-up's conversation holds the value the earlier turn gave.
    assert.match(JSON.stringify(stand.llm.requests.at(-1)?.body), /NOTES\.md/);
  });

  test('a job on an Anthropic model gets its output through output_config.format', async () => {
    const value = { verdict: 'no', files: [] };
    const job = await askClaude(VERDICT, ['Looked.', JSON.stringify(value)]);
    assert.deepEqual(job.output, value);
    const body = stand.llm.requests[1]?.body;
    assert.ok(isRecord(body) && isRecord(body.output_config));
    assert.deepEqual(body.output_config.format, { type: 'json_schema', schema: VERDICT });
  });

  test('a schema whose root is not an object is sent wrapped in one, and its value unwrapped', async () => {
    const schema = { type: 'array', items: { type: 'string' }, minItems: 1 };
    stand.llm.script(reply('Two files.'), reply(JSON.stringify({ value: ['a.ts', 'b.ts'] })));
    const created = await create({ prompt: 'Which files?', mode: 'ask', outputSchema: schema });
    assert.equal(created.status, 201, created.text);
    const job = await until(created.json.id as string, 'completed');
    assert.deepEqual(job.output, ['a.ts', 'b.ts']);
    assert.deepEqual(responseFormat(stand.llm.requests[1]?.body), {
      type: 'json_schema',
      json_schema: {
        schema: {
          type: 'object',
          properties: { value: { type: 'array', items: { type: 'string' }, minItems: 1 } },
          required: ['value'],
          additionalProperties: false,
        },
        strict: false,
        name: 'output',
      },
    });
  });

  test('on an Anthropic model an empty answer is retried in a conversation the vendor takes; objects are sent closed', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    const job = await askClaude(schema, ['Counted.', '', '{"n": 3}']);
    assert.deepEqual(job.output, { n: 3 });
    const body = stand.llm.requests[2]?.body;
    assert.ok(isRecord(body) && isRecord(body.output_config));
    // Anthropic takes only closed objects: the SDK closes them; the answer is checked against
    // the client's own schema.
    assert.deepEqual(body.output_config.format, {
      type: 'json_schema',
      schema: { ...schema, additionalProperties: false },
    });
    assert.match(lastUserText(body), /the answer is not JSON/);
  });
});
