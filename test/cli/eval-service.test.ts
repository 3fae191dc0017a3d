// `errand eval run`, show, list, compare and cancel against the real service and its eval API,
// with a scripted TurnRunner standing in for the turn pipeline (the queue, the job core, the eval
// runner and the database are the real ones): the pass rate, its interval and the costs the CLI
// prints are those worked out by hand. Needs the eval routes (src/features/eval/, branch eval):
// on branch cli alone its requests meet 404s; it passed on cli merged with eval at f884016.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { EvalRun } from '../../src/client/index.ts';
import type { AttemptResult } from '../../src/db/schema.ts';
import { TurnFailedError, type TurnOutput } from '../../src/jobs/runner.ts';
import { runCli } from '../support/process.ts';
import { RecordingRunner, work } from '../support/runners.ts';
import { startTestService, type TestService } from '../support/service.ts';

const MODEL = 'anthropic:claude-sonnet-4-5';

/** A prompt starting "pass" passes its check at $0.10; "fail" fails it at $0.20; "hold" waits. */
const runner = new RecordingRunner(async (input): Promise<TurnOutput> => {
  const prompt = input.turn.prompt;
  if (prompt.startsWith('hold')) {
    await work(120_000, input.signal);
    return { summary: 'held' };
  }
  const passes = prompt.startsWith('pass');
  if (!passes && !prompt.startsWith('fail')) throw new TurnFailedError(`no script for ${prompt}`);
  await work(100, input.signal);
  const costUsd = passes ? 0.1 : 0.2;
  const tokens = { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 };
  for (const step of [1, 2])
    await input.emit('model.step', { step, usage: { ...tokens, costUsd: null } });
  const attempt: AttemptResult = {
    n: 1,
    engine: 'errand',
    model: input.job.model,
    branch: `errand/${input.job.id}-1`,
    outcome: passes ? 'passed' : 'failed',
    check: {
      exitCode: passes ? 0 : 1,
      outputTail: passes ? 'ok' : 'not ok 1 - beta keeps order\n1 test failed',
      durationMs: 40,
    },
    costUsd,
    diff: { files: 1, lines: 3 },
    commitSha: null,
    error: null,
    winner: passes,
  };
  return {
    summary: 'attempted',
    usage: tokens,
    spent: { ...tokens, costUsd },
    attempts: [attempt],
  };
});

describe('errand eval against the service', () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ runner });
    projectId = (await svc.createProject({ name: 'measured' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[]) => runCli(svc, args);
  const file = (name: string) => join(svc.database.dataDir, name);

  test('run: each result as it settles, then the table as worked out by hand', async () => {
    await writeFile(
      file('suite.yaml'),
      [
        'name: by hand',
        'tasks:',
        `  - { id: alpha, project: ${projectId}, prompt: "pass: alpha", check: "npm test" }`,
        `  - { id: beta, project: ${projectId}, prompt: "fail: beta", check: "npm test" }`,
        'agents:',
        `  - { model: "${MODEL}" }`,
        'repeat: 2',
        '',
      ].join('\n'),
    );
    const out = await cli([
      'eval',
      'run',
      'suite.yaml',
      '--json',
      'run.json',
      '--markdown',
      'run.md',
    ]);
    assert.equal(out.code, 0, out.stderr + out.stdout);
    const record = JSON.parse(await readFile(file('run.json'), 'utf8')) as EvalRun;
    assert.equal(record.state, 'finished');
    const agent = record.agents[0]?.agent ?? '';
    assert.match(agent, new RegExp(`/${MODEL}$`));
    const lines = out.stdout.split('\n');
    assert.match(
      lines[0] ?? '',
      new RegExp(`^started ${record.id} by hand: 4 results \\(2 tasks × 1 agents × 2\\)$`),
    );
    // In the order they settle: two of each.
    const settled = lines.slice(1, 5).sort();
    assert.equal(settled.length, 4);
    for (const line of settled.slice(0, 2))
      assert.match(line, new RegExp(`^alpha ${agent} #[12] passed \\d+\\.\\ds \\$0\\.1000$`));
    for (const line of settled.slice(2))
      assert.match(
        line,
        new RegExp(
          `^beta ${agent} #[12] failed \\(exit 1\\) \\d+\\.\\ds \\$0\\.2000: 1 test failed$`,
        ),
      );
    // 2 of 4: 50 %, Wilson [0.1500, 0.8500]; costs 0.1, 0.1, 0.2, 0.2: median 0.15, total 0.6;
    // 2 steps each; 1000 and 100 tokens a job.
    const row = lines.find((l) => l.startsWith(`${agent}  `)) ?? '';
    const cells = row.split(/ {2,}/);
    // The median time is the scripted turns' own: seconds, whatever they took.
    assert.match(cells.splice(4, 1)[0] ?? '', /^\d+\.\ds$/);
    assert.deepEqual(cells, [agent, '50% [15–85] (2/4)', '$0.1500', '$0.6000', '2', '4.0k/400']);
    assert.match(
      out.stdout,
      /Failures:\n {2}beta\n {4}\S+ #[12] failed: 1 test failed\n {4}\S+ #[12] failed: 1 test failed\n/,
    );
    const md = await readFile(file('run.md'), 'utf8');
    assert.ok(md.includes(`| ${agent} | 50% [15–85] (2/4) | $0.1500 | $0.6000 |`), md);

    const listed = await cli(['eval', 'list']);
    assert.match(
      listed.stdout,
      new RegExp(`^${record.id} {2}finished {2}\\S+ {2}by hand {2}${agent} 50%$`, 'm'),
    );
    const shown = await cli(['eval', 'show', record.id]);
    assert.match(shown.stdout, new RegExp(`^${record.id} by hand \\(finished, 4/4 results\\)`));
    const compared = await cli(['eval', 'compare', record.id, record.id]);
    assert.equal(compared.code, 0, compared.stderr);
    assert.match(compared.stdout, /^2 same$/m);
  });

  test('a refused suite: the field named, exit 1, nothing started', async () => {
    await writeFile(
      file('bad.json'),
      JSON.stringify({ tasks: [{ id: 'x', project: projectId, prompt: 'p' }] }),
    );
    const before = (await cli(['eval', 'list', '--json'])).stdout;
    const out = await cli(['eval', 'run', 'bad.json']);
    assert.equal(out.code, 1);
    assert.match(out.stderr, /check/);
    assert.match(out.stderr, /\(HTTP 400\)/);
    assert.equal((await cli(['eval', 'list', '--json'])).stdout, before);
  });

  test('run --no-wait, then cancel', async () => {
    await writeFile(
      file('hold.yaml'),
      `tasks:\n  - { id: held, project: ${projectId}, prompt: "hold on", check: "true" }\n`,
    );
    const out = await cli(['eval', 'run', 'hold.yaml', '--no-wait']);
    assert.equal(out.code, 0, out.stderr);
    const id = /^started (evr_\S+)/.exec(out.stdout)?.[1] ?? '';
    assert.match(out.stdout, new RegExp(`follow it: errand eval show ${id} --wait`));
    const cancelled = await cli(['eval', 'cancel', id, '--json']);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    assert.equal((JSON.parse(cancelled.stdout) as EvalRun).state, 'cancelled');
  });
});
