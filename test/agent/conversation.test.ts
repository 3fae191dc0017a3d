// The agent's conversation end to end: jobs on a real repository of large files, through the API and
// real workers, with a scripted model that enforces a 40k-token context window and caches
// prompts as the vendors do. A job reads far more than the window and completes; it recovers
// from a refusal for length; ten follow-ups keep working; consecutive requests share their
// prefix (OpenAI) or carry cache breakpoints (Anthropic).
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import {
  countTokens,
  type FakeLlm,
  type RecordedRequest,
  type ReplyItem,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { type ApiBody, startTestService, type TestService } from '../support/service.ts';

const OPENAI_KEY = 'sk-test-context-7d1e4b9a';
const ANTHROPIC_KEY = 'sk-ant-test-context-2f8c6a';
const WINDOW = 40_000;
const FILES = 24;

/** A source file of about 18 KB (some 5,000 tokens once read_file numbers its lines). */
function bigFile(n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < 300; i++) {
    lines.push(`export const value_${n}_${i} = compute(${i}, 'module ${n}', ${i * n});`);
  }
  return `${lines.join('\n')}\n`;
}

const fileName = (n: number) => `src/module-${String(n).padStart(2, '0')}.ts`;

const isSummary = (r: RecordedRequest) =>
  JSON.stringify(r.body).includes('You write the working notes of a software engineering agent');

/** Words the model thinks aloud with: text no masking can shorten, only a summary. */
const musing = (n: number, chars: number) => `Step ${n}: `.padEnd(chars, 'thinking. ');

describe("the agent's conversation", () => {
  let openai: FakeLlm;
  let anthropic: FakeLlm;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('conversation');
    const files: Record<string, string> = { 'README.md': '# Big\n' };
    for (let n = 1; n <= FILES; n++) files[fileName(n)] = bigFile(n);
    origin = await makeOrigin(tmp, files);
    const catalog = path.join(tmp, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify({
        'openai:gpt-test': { contextTokens: WINDOW },
        'openai:gpt-small': { contextTokens: WINDOW },
        'anthropic:claude-test': { contextTokens: WINDOW },
      }),
    );
    openai = await startFakeLlm({
      apiKey: OPENAI_KEY,
      models: ['gpt-test', 'gpt-small'],
      contextWindow: { 'gpt-test': WINDOW, 'gpt-small': 30_000 },
    });
    anthropic = await startFakeLlm({
      apiKey: ANTHROPIC_KEY,
      models: ['claude-test'],
      contextWindow: WINDOW,
    });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${openai.url}/v1`,
        ANTHROPIC_API_KEY: ANTHROPIC_KEY,
        ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_MODEL_CATALOG: catalog,
        ERRAND_MAX_OUTPUT_TOKENS: '4000',
        ERRAND_TURN_RETRIES: '0',
      },
    });
    projectId = (await svc.createProject({ repository: origin.url, ref: 'main' })).id;
  });
  after(async () => {
    await svc?.close();
    await openai?.close();
    await anthropic?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      openai.assertDone();
      anthropic.assertDone();
    } finally {
      openai.reset();
      anthropic.reset();
    }
  });

  /**
   * Scripts the model's side of a job: each answer in order, and a summary whenever Errand asks
   * for one (how many times depends on the window). Returns how many answers are left.
   */
  const scriptAgent = (llm: FakeLlm, answers: ReplyItem[]): (() => number) => {
    const queue = [...answers];
    llm.scriptAll((r) =>
      isSummary(r)
        ? reply('Notes: the modules were read; the notes files are written.')
        : queue.shift(),
    );
    return () => queue.length;
  };
  const until = (jobId: string, status: string, project = projectId) =>
    untilStatus(svc, project, jobId, status, { failFast: true, timeoutMs: 60_000 });
  const events = async (jobId: string, project = projectId) =>
    ((await svc.request('GET', `/v2/agent/${project}/job/${jobId}/events`)).json.events ??
      []) as Array<{ type: string; data: Record<string, unknown> }>;
  const agentRequests = (llm: FakeLlm) => llm.requests.filter((r) => !isSummary(r));
  /** The request's tokens and its reply's room: what the vendor holds against the window. */
  const held = (r: RecordedRequest) =>
    (r.promptTokens ?? 0) + ((r.body as { max_tokens?: number }).max_tokens ?? 0);

  test('a job that reads far more than the window completes, every request under the window', async () => {
    const reads = Array.from({ length: 20 }, (_, i) =>
      toolCalls([{ name: 'read_file', input: { path: fileName(i + 1) } }], {
        text: `Reading module ${i + 1}.`,
      }),
    );
    const left = scriptAgent(openai, [
      ...reads,
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'read all\n' } }]),
      reply('Write notes on the modules\n\nRead twenty modules.'),
    ]);
    const jobId = await createJob(svc, projectId, 'Read every module and write notes');
    const job = await until(jobId, 'completed');
    assert.equal(left(), 0);
    // 20 files of some 4,600 tokens each (5,000 with line numbers): 2.3 windows were read.
    const read = Array.from({ length: 20 }, (_, i) => countTokens(bigFile(i + 1))).reduce(
      (a, b) => a + b,
    );
    assert.ok(read > 2 * WINDOW, `${read} tokens read`);
    assert.equal(openai.requests.filter((r) => r.overflow).length, 0);
    for (const r of openai.requests)
      assert.ok(held(r) <= WINDOW, `request #${r.index}: ${held(r)}`);
    assert.equal(git(origin.bare, 'show', `errand/${jobId}:NOTES.md`), 'read all');
    // Old results were masked, in a few batches, saying how to get them again.
    const last = JSON.stringify(agentRequests(openai).at(-1)?.body);
    assert.match(
      last,
      /\[Output removed to save context: read_file src\/module-01\.ts \([\d,]+ characters\); read the file again if you need it\.\]/,
    );
    assert.ok(last.includes('value_20_299'), 'the latest read is whole');
    // The turn's usage is the sum of its requests, cache reads included.
    const usage = job.usage as { inputTokens: number; cacheReadTokens: number };
    const sum = (k: 'promptTokens' | 'cacheReadTokens') =>
      openai.requests.reduce((n, r) => n + (r[k] ?? 0), 0);
    assert.equal(usage.inputTokens, sum('promptTokens'));
    assert.equal(usage.cacheReadTokens, sum('cacheReadTokens'));
  });

  test('consecutive requests share their prefix: the cache serves most of the input', async () => {
    // The first 120 lines of each (some 2,000 tokens): under the 20k tokens where masking starts.
    const reads = Array.from({ length: 8 }, (_, i) =>
      toolCalls([
        { name: 'read_file', input: { path: fileName(i + 1), startLine: 1, endLine: 120 } },
      ]),
    );
    scriptAgent(openai, [...reads, reply('Nothing to change'), reply('Still nothing')]);
    const jobId = await createJob(svc, projectId, 'Read eight modules');
    await until(jobId, 'completed');
    // A follow-up starts from the conversation as the last request sent it.
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'Anything else?' },
    });
    assert.equal(res.status, 200, res.text);
    await until(jobId, 'completed');
    const sent = agentRequests(openai);
    assert.equal(sent.length, 10);
    // Each request carries the job as its cache key, and repeats the one before it byte for
    // byte, the follow-up's too.
    let batches = 0;
    for (const [i, r] of sent.entries()) {
      const body = r.body as { prompt_cache_key?: string; messages: unknown[] };
      assert.equal(body.prompt_cache_key, jobId);
      if (i === 0) continue;
      const before = sent[i - 1]?.body as { messages: unknown[] };
      const extends_ = JSON.stringify(body.messages).startsWith(
        JSON.stringify(before.messages).slice(0, -1),
      );
      if (!extends_) {
        batches++;
        continue;
      }
      // OpenAI's cache: the previous request's tokens, in steps of 128 past 1,024.
      assert.ok(r.cacheReadTokens >= (sent[i - 1]?.promptTokens ?? 0) - 128, `request ${i}`);
    }
    assert.equal(batches, 0);
    const input = sent.reduce((n, r) => n + (r.promptTokens ?? 0), 0);
    const cached = sent.reduce((n, r) => n + r.cacheReadTokens, 0);
    assert.ok(cached / input > 0.7, `${cached} of ${input} input tokens from the cache`);
    // What the job record says it used is what the provider reported.
    const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json as {
      usage: { inputTokens: number; cacheReadTokens: number };
    };
    assert.deepEqual([job.usage.inputTokens, job.usage.cacheReadTokens], [input, cached]);
  });

  test('a refusal for length is answered by compacting and sending the step again', async () => {
    // The catalog says 40k tokens; the server holds 30k for this model (a local one, say).
    const project = await svc.createProject({
      repository: origin.url,
      ref: 'main',
      model: 'openai:gpt-small',
    });
    openai.expectOverflows(1);
    const reads = Array.from({ length: 10 }, (_, i) =>
      toolCalls([{ name: 'read_file', input: { path: fileName(i + 1) } }], {
        text: musing(i, 10_000),
      }),
    );
    const left = scriptAgent(openai, [...reads, reply('Read ten modules')]);
    const jobId = await createJob(svc, project.id, 'Read ten modules');
    await until(jobId, 'completed', project.id);
    assert.equal(left(), 0);
    assert.equal(openai.requests.filter((r) => r.overflow).length, 1);
    const compacted = (await events(jobId, project.id)).filter(
      (e) => e.type === 'context.compacted',
    );
    assert.equal(compacted[0]?.data.reason, 'overflow');
    // After the refusal, every request fits what the server holds.
    const refused = openai.requests.findIndex((r) => r.overflow);
    for (const r of openai.requests.slice(refused + 1)) assert.ok(held(r) <= 30_000, `${held(r)}`);
  });

  test('a job of ten follow-ups keeps working: its history is masked and compacted, every prompt kept', async () => {
    const turns = 11;
    const answers: ReplyItem[] = [];
    for (let t = 1; t <= turns; t++) {
      for (let s = 0; s < 3; s++) {
        const n = ((t * 3 + s) % FILES) + 1;
        answers.push(
          toolCalls([{ name: 'read_file', input: { path: fileName(n) } }], {
            text: musing(t * 10 + s, 3_000),
          }),
        );
      }
      answers.push(
        toolCalls([
          { name: 'write_file', input: { path: `notes/turn-${t}.md`, content: `${t}\n` } },
        ]),
        reply(`Add notes for turn ${t}`),
      );
    }
    const left = scriptAgent(openai, answers);
    const prompt = (t: number) => `Turn ${t}: read three modules and note them «${t}»`;
    const jobId = await createJob(svc, projectId, prompt(1));
    await until(jobId, 'completed');
    for (let t = 2; t <= turns; t++) {
      const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt: prompt(t) },
      });
      assert.equal(res.status, 200, res.text);
      await until(jobId, 'completed');
    }
    assert.equal(left(), 0);
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..errand/${jobId}`), String(turns));
    for (const r of openai.requests)
      assert.ok(held(r) <= WINDOW, `request #${r.index}: ${held(r)}`);
    assert.equal(openai.requests.filter((r) => r.overflow).length, 0);
    const log = await events(jobId);
    assert.ok(
      log.some((e) => e.type === 'context.compacted' && e.data.reason === 'threshold'),
      'the history was compacted',
    );
    // The last request still holds every prompt of the job, word for word.
    const last = JSON.stringify(agentRequests(openai).at(-1)?.body);
    for (let t = 1; t <= turns; t++) assert.ok(last.includes(prompt(t)), `prompt ${t}`);
  });

  test('Anthropic requests carry cache breakpoints, and the cache serves the prefix', async () => {
    const project = await svc.createProject({
      repository: origin.url,
      ref: 'main',
      model: 'anthropic:claude-test',
    });
    const reads = Array.from({ length: 6 }, (_, i) =>
      toolCalls([{ name: 'read_file', input: { path: fileName(i + 1) } }]),
    );
    scriptAgent(anthropic, [...reads, reply('Nothing to change')]);
    const jobId = await createJob(svc, project.id, 'Read six modules');
    const job = (await until(jobId, 'completed', project.id)) as ApiBody & {
      usage: { inputTokens: number; cacheReadTokens: number; cacheWriteTokens: number };
    };
    type Block = { cache_control?: unknown };
    for (const r of anthropic.requests) {
      const body = r.body as { system: Block[]; messages: Array<{ content: Block[] }> };
      assert.deepEqual(body.system.at(-1)?.cache_control, { type: 'ephemeral' });
      const marks = body.messages.flatMap((m) => m.content).filter((b) => b.cache_control);
      assert.ok(marks.length >= 1 && marks.length <= 3, `${marks.length} breakpoints`);
    }
    assert.ok(job.usage.cacheReadTokens > job.usage.inputTokens / 2, JSON.stringify(job.usage));
    assert.ok(job.usage.cacheWriteTokens > 0);
  });
});
