// The three coding engines measured on one sample repository (docs/eval.md's walk-through): one
// suite whose agents are Claude Code, Codex and OpenCode, each the real CLI in the real sandbox
// against a fake of its vendor's API over loopback, on a project whose own engine is Errand's
// loop. The task: add.sh is missing and the repository's test.sh says so. Claude Code and Codex
// are scripted to write the right add.sh, OpenCode a wrong one: the run's results, the check's
// words for the failure, each agent's pass rate and interval come out as worked out by hand, and
// nothing is pushed. Skipped, with the command that installs it, when an engine is not installed.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { InstallableEngine } from '../../src/engines/catalog.ts';
import type { EvalRunRecord } from '../../src/features/eval/types.ts';
import { isRecord } from '../../src/json.ts';
import { ENGINE_MODELS, ENGINES_DIR, engineSkip } from '../engines/inside.ts';
import {
  type FakeLlm,
  type FakeToolCall,
  type ReplyItem,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const ENGINES: InstallableEngine[] = ['claude-code', 'codex', 'opencode'];

/** The repository's test: add.sh must define add, and add 2 3 must say 5. */
const TEST_SH = `#!/bin/sh
[ -f add.sh ] || { echo 'add.sh is missing'; exit 1; }
. ./add.sh
got=$(add 2 3)
[ "$got" = 5 ] || { echo "add 2 3: expected 5, got $got"; exit 1; }
echo 'add: ok'
`;
const RIGHT = 'add() { echo $(( $1 + $2 )); }\n';
const WRONG = 'add() { echo $(( $1 * $2 )); }\n';

/** Each engine's own tool call that creates `file` (relative to the checkout) with `content`. */
const CREATE: Record<InstallableEngine, (file: string, content: string) => FakeToolCall> = {
  'claude-code': (file, content) => ({
    name: 'Write',
    input: { file_path: `/workspace/${file}`, content },
  }),
  codex: (file, content) => ({
    name: 'apply_patch',
    input: `*** Begin Patch\n*** Add File: ${file}\n${content
      .trimEnd()
      .split('\n')
      .map((line) => `+${line}`)
      .join('\n')}\n*** End Patch\n`,
  }),
  opencode: (file, content) => ({
    name: 'write',
    input: { filePath: `/workspace/${file}`, content },
  }),
};

/** Every model call reports this usage: its cost is what the model's prices make of it. */
const USAGE = { usage: { input: 10_000, output: 1_000 } };

const skips = await Promise.all(ENGINES.map((engine) => engineSkip(engine, 'eval')));
const skip = skips.find((reason) => reason !== false) ?? false;

describe('an eval of the three engines on a sample repository', { skip }, () => {
  const key = 'sk-eval-engines-5e6f7a8b9c0d';
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('eval-engines');
    origin = await makeOrigin(tmp, { 'README.md': '# calc\n', 'test.sh': TEST_SH });
    llm = await startFakeLlm({
      apiKey: key,
      models: ENGINES.map((engine) => ENGINE_MODELS[engine].vendorModel),
    });
    // Codex's model is newer than the price list the package knows.
    const catalog = path.join(tmp, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify({ 'openai:gpt-5.5': { inputUsdPerMTok: 5, outputUsdPerMTok: 30 } }),
    );
    svc = await startTestService({
      env: {
        ...ENGINE_MODELS['claude-code'].env(llm.url, key),
        ...ENGINE_MODELS.codex.env(llm.url, key),
        ERRAND_MODEL: ENGINE_MODELS['claude-code'].model,
        ERRAND_MODEL_CATALOG: catalog,
        ERRAND_ENGINES_DIR: ENGINES_DIR,
        ERRAND_TURN_RETRIES: '0',
      },
    });
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'calc',
        repository: origin.url,
        // OpenCode does not start with less.
        commandMemoryMb: 2048,
      },
    });
    assert.equal(created.status, 201, created.text);
    projectId = created.json.id as string;
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await removeDir(tmp);
  });

  test('Claude Code and Codex pass, OpenCode fails the check; the table as worked out by hand', async () => {
    // Each engine's conversation: create add.sh, then say what it did. The three run at once, so
    // each request is answered by the script of the engine whose model it names.
    const scripts = new Map<string, ReplyItem[]>(
      ENGINES.map((engine) => [
        ENGINE_MODELS[engine].vendorModel,
        [
          toolCalls([CREATE[engine]('add.sh', engine === 'opencode' ? WRONG : RIGHT)], USAGE),
          reply(`Added add.sh (${engine}).`, USAGE),
        ],
      ]),
    );
    llm.scriptAll((request) => {
      const model = isRecord(request.body) ? String(request.body.model) : '';
      return scripts.get(model)?.shift();
    });

    const started = await svc.request('POST', '/v2/admin/evals', {
      body: {
        name: 'three engines on calc',
        tasks: [
          {
            id: 'add',
            project: projectId,
            prompt: 'test.sh fails: add.sh is missing. Write add.sh so that `sh test.sh` passes.',
            check: 'sh test.sh',
          },
        ],
        agents: ENGINES.map((engine) => ({ engine, model: ENGINE_MODELS[engine].model })),
        concurrency: 3,
      },
    });
    assert.equal(started.status, 201, started.text);
    const runId = (JSON.parse(started.text) as EvalRunRecord).id;
    const run = await waitFor(
      'the run to finish',
      async () => {
        const res = await svc.request('GET', `/v2/admin/evals/${runId}`);
        const record = JSON.parse(res.text) as EvalRunRecord;
        return record.state === 'finished' ? record : undefined;
      },
      170_000,
    );
    assert.deepEqual(llm.unexpected, []);
    for (const [model, left] of scripts) assert.equal(left.length, 0, `${model}: answers left`);

    const byAgent = new Map(run.results.map((r) => [r.agent, r]));
    const label = (engine: InstallableEngine) => `${engine}/${ENGINE_MODELS[engine].model}`;
    for (const engine of ['claude-code', 'codex'] as const) {
      const result = byAgent.get(label(engine));
      assert.equal(result?.state, 'passed', `${engine}: ${result?.tail}`);
      assert.equal(result?.checkExit, 0);
    }
    const opencode = byAgent.get(label('opencode'));
    assert.equal(opencode?.state, 'failed', opencode?.tail ?? '');
    assert.equal(opencode?.checkExit, 1);
    assert.match(opencode?.tail ?? '', /add 2 3: expected 5, got 6/);

    // One finished result each: 1/1 passes is the Wilson interval [0.2065, 1], 0/1 [0, 0.7935].
    const round4 = (n: number | undefined) => Math.round((n ?? Number.NaN) * 1e4) / 1e4;
    const table = Object.fromEntries(
      run.agents.map((a) => [
        a.engine,
        [a.passed, a.finished, round4(a.interval?.low), round4(a.interval?.high)],
      ]),
    );
    assert.deepEqual(table, {
      'claude-code': [1, 1, 0.2065, 1],
      codex: [1, 1, 0.2065, 1],
      opencode: [0, 1, 0, 0.7935],
    });
    // Two model calls each, priced at the agent's own model: Codex's 10k in and 1k out at
    // $5 and $30 per million are $0.08 a call.
    const codex = byAgent.get(label('codex'));
    assert.equal(codex?.steps, 2);
    assert.equal(codex?.costUsd, 0.16);
    for (const r of run.results) assert.ok((r.costUsd ?? 0) > 0, `${r.agent}: no cost`);

    // An eval pushes nothing: the origin has its main branch only.
    assert.equal(git(origin.bare, 'for-each-ref', '--format=%(refname)'), 'refs/heads/main');
  });
});
