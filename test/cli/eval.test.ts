// `errand eval …` as a user runs it. from-git on a generated repository (real git, the real
// sandbox): its fix commits become tasks, the ones it should drop are dropped, the start
// branches hold the tests without the fix, and a scripted fix passes the check while a wrong
// one fails it; with --project, the fixed issue's text read from the fake GitHub through the
// real service lands in the prompt. run, show, list and compare against a loopback server that answers as the eval
// API's contract says; the rendering of a fixed run record and the comparison, by hand.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { compareRuns, comparisonMarkdown, comparisonText } from '../../src/cli/eval/compare.ts';
import { checkCommand, shellQuote } from '../../src/cli/eval/from-git.ts';
import { resultLine, runMarkdown, runText } from '../../src/cli/eval/report.ts';
import type { EvalResult, EvalRun } from '../../src/client/index.ts';
import { type FakeGitHub, startFakeGitHub } from '../support/fake-github.ts';
import { git, makeTempDir, removeDir, writeFiles } from '../support/git.ts';
import { captureOutput, type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService } from '../support/service.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;

const CHECK = 'for f in {files}; do sh "$f" || exit 1; done';

/** A test script of the generated repository: `fn a b` must print `want`. */
function shTest(lib: string, fn: string, cases: Array<[number, number, number]>): string {
  return [
    `. ./lib/${lib}.sh`,
    ...cases.map(
      ([a, b, want]) =>
        `[ "$(${fn} ${a} ${b})" = ${want} ] || { echo "${fn} ${a} ${b} gave $(${fn} ${a} ${b}), not ${want}"; exit 1; }`,
    ),
    '',
  ].join('\n');
}

const ADD_BUGGY = 'add() { echo $(( $1 - $2 )); }\n';
const ADD_FIXED = 'add() { echo $(( $1 + $2 )); }\n';
const ADD_TEST = shTest('add', 'add', [
  [2, 3, 5],
  [1, 1, 2],
]);

interface History {
  dir: string;
  origin: string;
  /** The commits by role. */
  root: string;
  addFix: string;
  mulPasses: string;
  subStillFails: string;
  docs: string;
  divMerge: string;
}

/**
 * A repository of shell functions with bugs, and a history: a fix of add with its test (a task),
 * a test of mul that passes already (dropped), a change of sub whose test still fails (dropped),
 * a docs change (ignored), and a pull request merged with --no-ff that fixes div across two
 * commits (one task: the merge).
 */
async function makeHistory(): Promise<History> {
  const dir = await makeTempDir('eval-repo');
  const origin = await makeTempDir('eval-origin');
  git(origin, 'init', '--bare', '-q');
  git(dir, 'init', '-q');
  await writeFiles(dir, {
    'README.md': '# Arithmetic in sh\n',
    'lib/add.sh': ADD_BUGGY,
    'lib/mul.sh': 'mul() { echo $(( $1 * $2 )); }\n',
    'lib/sub.sh': 'sub() { echo $(( $2 - $1 )); }\n',
    'lib/div.sh': 'div() { echo $(( $1 * $2 )); }\n',
  });
  const commit = (message: string): string => {
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', message);
    return git(dir, 'rev-parse', 'HEAD');
  };
  const root = commit('Arithmetic functions');
  await writeFiles(dir, { 'lib/add.sh': ADD_FIXED, 'tests/add_test.sh': ADD_TEST });
  const addFix = commit(
    "Fix add: it subtracted\n\nadd 2 3 gave -1. Fixes #7, and it's tested now.",
  );
  await writeFiles(dir, {
    'lib/mul.sh': '# mul A B: the product\nmul() { echo $(( $1 * $2 )); }\n',
    'tests/mul_test.sh': shTest('mul', 'mul', [[2, 3, 6]]),
  });
  const mulPasses = commit('Document mul and test it');
  await writeFiles(dir, {
    'lib/sub.sh': 'sub() { echo $(( $2 - $1 + 0 )); }\n',
    'tests/sub_test.sh': shTest('sub', 'sub', [[5, 3, 2]]),
  });
  const subStillFails = commit('Try to fix sub');
  await writeFiles(dir, { 'README.md': '# Arithmetic in sh\n\nSource lib/*.sh.\n' });
  const docs = commit('Say how to use it');
  git(dir, 'checkout', '-q', '-b', 'fix-div');
  await writeFiles(dir, { 'lib/div.sh': 'div() { echo $(( $1 / $2 )); }\n' });
  commit('div divides');
  await writeFiles(dir, { 'tests/div_test.sh': shTest('div', 'div', [[6, 3, 2]]) });
  commit('Test div');
  git(dir, 'checkout', '-q', 'main');
  git(dir, 'merge', '-q', '--no-ff', '-m', 'Merge pull request #12: div multiplied', 'fix-div');
  const divMerge = git(dir, 'rev-parse', 'HEAD');
  git(dir, 'remote', 'add', 'origin', origin);
  git(dir, 'push', '-q', 'origin', 'main');
  return { dir, origin, root, addFix, mulPasses, subStillFails, docs, divMerge };
}

/** Runs a shell command in `dir` and answers its exit code. */
function sh(dir: string, command: string): number {
  try {
    execFileSync('sh', ['-c', command], { cwd: dir, stdio: 'ignore' });
    return 0;
  } catch (err) {
    return (err as { status: number }).status;
  }
}

/** `errand …` as a user runs it, with no service: from-git needs none. */
function errand(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runCli({ url: 'http://127.0.0.1:9', database: { dataDir: cwd } }, args, env);
}

describe('errand eval from-git', () => {
  let h: History;
  let work: string;
  let run: Run;
  let suite: { name: string; tasks: Array<Record<string, string>> };

  before(async () => {
    h = await makeHistory();
    work = await makeTempDir('eval-work');
    run = await errand(work, [
      'eval',
      'from-git',
      h.dir,
      '--test-cmd',
      CHECK,
      '--push',
      'origin',
      '--out',
      'suite.yaml',
    ]);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    suite = parse(await readFile(join(work, 'suite.yaml'), 'utf8'));
  });
  after(async () => {
    await removeDir(h?.dir);
    await removeDir(h?.origin);
    await removeDir(work);
  });

  const short = (sha: string) => sha.slice(0, 12);

  test('the merged pull request and the fix commit become tasks, newest first', () => {
    assert.deepEqual(
      suite.tasks.map((t) => t.id),
      [short(h.divMerge), short(h.addFix)],
    );
    const [div, add] = suite.tasks;
    assert.deepEqual(add, {
      id: short(h.addFix),
      repository: h.origin,
      ref: `errand-eval/${short(h.addFix)}`,
      prompt:
        "Fix add: it subtracted\n\nadd 2 3 gave -1. Fixes #7, and it's tested now.\n\n(The issue this is about: #7.)",
      check: 'for f in tests/add_test.sh; do sh "$f" || exit 1; done',
    });
    assert.equal(div?.prompt, 'Merge pull request #12: div multiplied');
    assert.equal(div?.check, 'for f in tests/div_test.sh; do sh "$f" || exit 1; done');
    assert.match(suite.name, /^from-git errand-ws-eval-repo-\w+ last 6 commits$/);
  });

  test('says which commits were dropped and why, and that the commands ran sandboxed', () => {
    assert.match(run.stdout, /run in the sandbox \(no network/);
    // Without --project no forge is asked: the fixed issue is named, its text not read.
    assert.match(
      run.stdout,
      /^ {2}#7: its text was not read: no --project \(issues are read from the project's forge\); the prompt names it only$/m,
    );
    const dropped = (sha: string) =>
      run.stdout.split('\n').find((l) => l.startsWith(`  dropped ${short(sha)}`)) ?? '';
    assert.match(dropped(h.mulPasses), /the check passes at the start/);
    assert.match(
      dropped(h.subStillFails),
      /the check still fails with the real fix \(exit 1\): sub 5 3 gave -2, not 2$/,
    );
    // The docs commit and the root are no candidates; the fix-div branch's own commits are not
    // walked (first parent only).
    assert.match(run.stdout, /walked 6 commits: 2 tasks, 2 dropped, 2 without both code and test/);
    assert.doesNotMatch(run.stdout, new RegExp(short(h.docs)));
  });

  test('the start branches hold the tests without the fix, on the parent, here and pushed', () => {
    for (const sha of [h.addFix, h.divMerge]) {
      const branch = `errand-eval/${short(sha)}`;
      assert.equal(git(h.dir, 'rev-parse', `${branch}^`), git(h.dir, 'rev-parse', `${sha}^1`));
      assert.equal(git(h.origin, 'rev-parse', branch), git(h.dir, 'rev-parse', branch));
    }
    const add = `errand-eval/${short(h.addFix)}`;
    assert.equal(`${git(h.dir, 'show', `${add}:lib/add.sh`)}\n`, ADD_BUGGY);
    assert.equal(`${git(h.dir, 'show', `${add}:tests/add_test.sh`)}\n`, ADD_TEST);
    // Only the test changed against the parent.
    assert.equal(git(h.dir, 'diff', '--name-only', `${add}^`, add), 'tests/add_test.sh');
    const div = `errand-eval/${short(h.divMerge)}`;
    assert.equal(git(h.dir, 'diff', '--name-only', `${div}^`, div), 'tests/div_test.sh');
    // No branch for a dropped commit; the user's checkout is as it was.
    assert.throws(() => git(h.dir, 'rev-parse', '--verify', `errand-eval/${short(h.mulPasses)}`));
    assert.equal(git(h.dir, 'status', '--porcelain'), '');
    assert.equal(git(h.dir, 'worktree', 'list').split('\n').length, 1);
  });

  test("a scripted fix passes the task's check and a wrong one fails it", async () => {
    const task = suite.tasks.find((t) => t.id === short(h.addFix));
    assert.ok(task);
    const clone = await makeTempDir('eval-clone');
    try {
      git(clone, 'clone', '-q', '--branch', String(task.ref), h.origin, '.');
      assert.notEqual(sh(clone, String(task.check)), 0, 'the check fails at the start');
      await writeFile(join(clone, 'lib/add.sh'), 'add() { echo $(( $1 * $2 )); }\n');
      assert.notEqual(sh(clone, String(task.check)), 0, 'a wrong fix fails the check');
      await writeFile(join(clone, 'lib/add.sh'), 'add() { echo $(( $2 + $1 )); }\n');
      assert.equal(sh(clone, String(task.check)), 0, 'a right fix passes it');
    } finally {
      await removeDir(clone);
    }
  });

  test('--max, --tests, --project and --setup: what is kept, what names a test, what the task names, what runs first', async () => {
    const out = await errand(work, [
      'eval',
      'from-git',
      h.dir,
      '--setup',
      'echo ok > .ready',
      '--test-cmd',
      'test -f .ready && sh {files} # {dirs}',
      '--tests',
      'tests/add_*.sh',
      '--project',
      'prj_demo',
      // No service here: the project's forge is not asked for the issue's text.
      '--no-issues',
      '--max',
      '1',
      '--out',
      'one.yaml',
    ]);
    assert.equal(out.code, 0, out.stderr + out.stdout);
    assert.match(
      out.stdout,
      /^ {2}#7: its text was not read: --no-issues; the prompt names it only$/m,
    );
    const one = parse(await readFile(join(work, 'one.yaml'), 'utf8'));
    // With only tests/add_*.sh as tests, the merge (tests/div_test.sh) is code only.
    assert.deepEqual(
      one.tasks.map((t: Record<string, string>) => [t.id, t.project, t.check]),
      [[short(h.addFix), 'prj_demo', 'test -f .ready && sh tests/add_test.sh # ./tests']],
    );
  });

  test('a path that is not a repository, a range git does not know, a missing --test-cmd', async () => {
    const notRepo = await errand(work, ['eval', 'from-git', work, '--test-cmd', CHECK]);
    assert.equal(notRepo.code, 1);
    assert.match(notRepo.stderr, /is not a git repository/);
    const range = await errand(work, [
      'eval',
      'from-git',
      h.dir,
      '--test-cmd',
      CHECK,
      '--range',
      'nope..HEAD',
    ]);
    assert.equal(range.code, 1);
    assert.match(range.stderr, /git rev-list failed: .*nope/);
    const usage = await errand(work, ['eval', 'from-git', h.dir]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--test-cmd is required/);
  });
});

test('checks quote the test files for sh, and {dirs} names their folders', () => {
  assert.equal(shellQuote('tests/a_test.py'), 'tests/a_test.py');
  assert.equal(shellQuote("it's here.py"), `'it'\\''s here.py'`);
  assert.equal(
    checkCommand('go test {dirs} && pytest {files}', [
      'pkg/x/a_test.go',
      'pkg/x/b_test.go',
      'top_test.go',
      'a b/c;d.py',
    ]),
    "go test ./pkg/x . './a b' && pytest pkg/x/a_test.go pkg/x/b_test.go top_test.go 'a b/c;d.py'",
  );
});

// ---- A fixed run record, and the eval API's answers ------------------------------------------

const AGENT = 'errand/fake:model';
const OTHER = 'codex/openai:gpt-5';

function result(
  task: string,
  agent: string,
  state: EvalResult['state'],
  extra: Partial<EvalResult> = {},
) {
  return {
    task,
    agent,
    repeat: 1,
    projectId: 'prj_1',
    jobId: 'job_1',
    state,
    checkExit: state === 'failed' ? 1 : state === 'passed' ? 0 : null,
    tail: null,
    costUsd: null,
    durationMs: null,
    steps: null,
    inputTokens: null,
    outputTokens: null,
    startedAt: null,
    finishedAt: null,
    ...extra,
  } satisfies EvalResult;
}

/** The 95 % Wilson score interval (z = 1.96) of `passed` out of `n`, as the contract defines it. */
function wilson(passed: number, n: number): { low: number; high: number } {
  const z = 1.96;
  const p = passed / n;
  const denominator = 1 + (z * z) / n;
  const centre = (p + (z * z) / (2 * n)) / denominator;
  const margin = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / denominator;
  return { low: centre - margin, high: centre + margin };
}

/**
 * Four tasks, one agent: three passed, one failed. By hand: pass rate 3/4 = 75 %, its interval
 * [0.3006, 0.9544]; costs 0.01, 0.02, 0.03, 0.04: median 0.025, total 0.10; times 10, 12, 14,
 * 20 s: median 13 s; steps 3, 5, 7, 9: median 6; tokens 10 000 in, 2 000 out.
 */
function fixedRun(id: string, states: Array<EvalResult['state']>): EvalRun {
  const results = states.map((state, i) =>
    result(`task-${i + 1}`, AGENT, state, {
      costUsd: [0.01, 0.02, 0.03, 0.04][i] ?? null,
      durationMs: [10_000, 12_000, 14_000, 20_000][i] ?? null,
      steps: [3, 5, 7, 9][i] ?? null,
      inputTokens: 2500,
      outputTokens: 500,
      ...(state === 'failed'
        ? { tail: 'running tests\nAssertionError: expected 5, got -1\n\n' }
        : {}),
    }),
  );
  const finished = results.filter((r) => r.state !== 'pending' && r.state !== 'running');
  const passed = results.filter((r) => r.state === 'passed').length;
  return {
    id,
    name: `nightly ${id}`,
    state: 'finished',
    createdBy: { kind: 'key', id: 'key_1' },
    createdAt: '2026-11-29T07:00:00.000Z',
    finishedAt: '2026-11-29T07:30:00.000Z',
    suite: {
      name: `nightly ${id}`,
      tasks: results.map((r) => ({ id: r.task, project: 'prj_1', prompt: 'p', check: 'c' })),
      agents: [{ engine: 'errand', model: 'fake:model' }],
      repeat: 1,
      concurrency: 2,
    },
    agents: [
      {
        agent: AGENT,
        engine: 'errand',
        model: 'fake:model',
        runs: results.length,
        finished: finished.length,
        passed,
        passRate: passed / finished.length,
        interval: wilson(passed, finished.length),
        medianCostUsd: 0.025,
        totalCostUsd: 0.1,
        medianDurationMs: 13_000,
        medianSteps: 6,
        inputTokens: 10_000,
        outputTokens: 2000,
      },
    ],
    results,
  };
}

describe('the run in words', () => {
  const run = fixedRun('evr_a', ['passed', 'failed', 'passed', 'passed']);

  test('a line per result: passed with its time and cost, a failure with its last line', () => {
    assert.equal(
      resultLine(run.results[0] as EvalResult),
      `task-1 ${AGENT} #1 passed 10.0s $0.0100`,
    );
    assert.equal(
      resultLine(run.results[1] as EvalResult),
      `task-2 ${AGENT} #1 failed (exit 1) 12.0s $0.0200: AssertionError: expected 5, got -1`,
    );
    const error = result('t', AGENT, 'error', { tail: 'the job failed: budget exceeded' });
    assert.equal(resultLine(error), `t ${AGENT} #1 error – ?: the job failed: budget exceeded`);
  });

  test('the table: pass rate and interval, median and total cost, median time, steps, tokens', () => {
    const text = runText(run);
    const lines = text.split('\n');
    assert.equal(lines[0], 'evr_a nightly evr_a (finished, 4/4 results)');
    assert.match(
      lines[2] ?? '',
      /^agent +pass +median cost +total cost +median time +median steps +tokens in\/out$/,
    );
    assert.deepEqual(lines[3]?.split(/ {2,}/), [
      AGENT,
      '75% [30–95] (3/4)',
      '$0.0250',
      '$0.1000',
      '13.0s',
      '6',
      '10.0k/2.0k',
    ]);
    assert.deepEqual(lines.slice(5), [
      'Failures:',
      '  task-2',
      `    ${AGENT} #1 failed: AssertionError: expected 5, got -1`,
    ]);
  });

  test('the Markdown: the same table and the failures by task', () => {
    const md = runMarkdown(run);
    assert.ok(md.startsWith('# Eval nightly evr_a\n'));
    assert.ok(
      md.includes(
        `| agent | pass | median cost | total cost | median time | median steps | tokens in/out |\n|---|---|---|---|---|---|---|\n| ${AGENT} | 75% [30–95] (3/4) | $0.0250 | $0.1000 | 13.0s | 6 | 10.0k/2.0k |\n`,
      ),
      md,
    );
    assert.ok(
      md.includes(
        `## Failures\n\n### task-2\n\n- ${AGENT} #1 failed: AssertionError: expected 5, got -1\n`,
      ),
      md,
    );
  });
});

describe('compare', () => {
  test('a task that failed in A and passes in B is fixed; one that passed and fails, broke', () => {
    const a = fixedRun('evr_a', ['passed', 'failed', 'passed', 'passed']);
    const b = fixedRun('evr_b', ['passed', 'passed', 'failed', 'passed']);
    b.results.push(result('task-5', OTHER, 'passed'));
    const c = compareRuns(a, b);
    assert.deepEqual(
      c.tasks.map((t) => [
        t.task,
        t.agent,
        t.a && `${t.a.passed}/${t.a.finished}`,
        t.b && `${t.b.passed}/${t.b.finished}`,
        t.change,
      ]),
      [
        ['task-1', AGENT, '1/1', '1/1', 'same'],
        ['task-2', AGENT, '0/1', '1/1', 'fixed'],
        ['task-3', AGENT, '1/1', '0/1', 'broke'],
        ['task-4', AGENT, '1/1', '1/1', 'same'],
        ['task-5', OTHER, null, '1/1', 'only-b'],
      ],
    );
    const text = comparisonText(c);
    assert.match(text, /^task-2 +errand\/fake:model +0\/1 +1\/1 +fixed$/m);
    assert.match(text, /2 same, 1 fixed, 1 broke, 1 only-b$/);
    assert.match(
      comparisonMarkdown(c),
      /\| task-3 \| errand\/fake:model \| 1\/1 \| 0\/1 \| broke \|/,
    );
  });

  test('per agent: the pass rate and the cost change', () => {
    const a = fixedRun('evr_a', ['passed', 'failed', 'failed', 'passed']);
    const b = fixedRun('evr_b', ['passed', 'passed', 'failed', 'passed']);
    const agentB = b.agents[0];
    assert.ok(agentB);
    agentB.medianCostUsd = 0.02;
    const [agent] = compareRuns(a, b).agents;
    assert.equal(agent?.passRateA, 0.5);
    assert.equal(agent?.passRateB, 0.75);
    assert.equal(agent?.passRateDelta, 0.25);
    assert.ok(Math.abs((agent?.medianCostDelta ?? 0) + 0.005) < 1e-12);
    assert.match(
      comparisonText(compareRuns(a, b)),
      /^errand\/fake:model +50% +75% +\+25 points +\$0\.0250 +\$0\.0200 +-\$0\.0050 +\$0\.1000 +\$0\.1000$/m,
    );
  });
});

// ---- run, show, list, cancel, compare against the API's answers ---------------------------

const KEY = 'test-admin-key';

/**
 * A loopback eval API as the contract describes it: a suite with no tasks is refused (400); a
 * run created is running with its results pending, and each read of it settles two more, the
 * last read finishing it.
 */
async function fakeEvalApi(): Promise<{
  url: string;
  server: Server;
  seen: { posted: unknown[]; cancelled: number; reads: number };
}> {
  const seen = { posted: [] as unknown[], cancelled: 0, reads: 0 };
  const runs = new Map<string, { run: EvalRun; reads: number }>();
  const done = fixedRun('evr_1', ['passed', 'failed', 'passed', 'passed']);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${KEY}`)
      return send(401, { error: 'unauthorized', code: 'unauthorized', requestId: 'req_1' });
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const url = req.url ?? '';
      if (req.method === 'POST' && url === '/v2/admin/evals') {
        const suite = JSON.parse(body) as { name?: string; tasks: unknown[] };
        seen.posted.push(suite);
        if (suite.tasks.length === 0)
          return send(400, {
            error: 'tasks: at least one task',
            code: 'invalid_request',
            requestId: 'req_2',
          });
        // A run named "forever" (evr_2) never settles a result.
        const forever = suite.name === 'forever';
        const run = { ...done, id: forever ? 'evr_2' : 'evr_1' };
        runs.set(run.id, { run, reads: forever ? -1_000_000 : 0 });
        const pending: EvalRun = {
          ...run,
          state: 'running',
          finishedAt: null,
          results: run.results.map((r) => ({ ...r, state: 'pending' })),
        };
        return send(201, pending);
      }
      if (req.method === 'GET' && url === '/v2/admin/evals')
        return send(200, { runs: [{ ...done, results: undefined }] });
      const match = /^\/v2\/admin\/evals\/([^/]+)(\/cancel)?$/.exec(url);
      const entry = match ? runs.get(match[1] ?? '') : undefined;
      if (!match || !entry)
        return send(404, { error: 'no such eval run', code: 'not_found', requestId: 'req_3' });
      if (match[2]) {
        seen.cancelled += 1;
        return send(200, { ...entry.run, state: 'cancelled' });
      }
      entry.reads += 1;
      seen.reads += 1;
      const settled = Math.max(0, Math.min(entry.reads * 2, entry.run.results.length));
      const finished = settled === entry.run.results.length;
      return send(200, {
        ...entry.run,
        state: finished ? 'finished' : 'running',
        finishedAt: finished ? entry.run.finishedAt : null,
        results: entry.run.results.map((r, i) => (i < settled ? r : { ...r, state: 'running' })),
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server, seen };
}

describe('errand eval run, show, list, cancel, compare', () => {
  let api: Awaited<ReturnType<typeof fakeEvalApi>>;
  let work: string;
  const cli = (args: string[]) =>
    runCli({ url: api.url, database: { dataDir: work } }, args, { ERRAND_API_KEY: KEY });

  before(async () => {
    api = await fakeEvalApi();
    work = await makeTempDir('eval-api');
  });
  after(async () => {
    api?.server.close();
    await removeDir(work);
  });

  test('run: posts the YAML suite, prints each result as it settles, then the table; writes the files', async () => {
    await writeFile(
      join(work, 'suite.yaml'),
      'name: nightly\ntasks:\n  - id: task-1\n    project: prj_1\n    prompt: fix it\n    check: npm test\nagents:\n  - engine: errand\n    model: fake:model\nrepeat: 1\n',
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
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(api.seen.posted.at(-1), {
      name: 'nightly',
      tasks: [{ id: 'task-1', project: 'prj_1', prompt: 'fix it', check: 'npm test' }],
      agents: [{ engine: 'errand', model: 'fake:model' }],
      repeat: 1,
    });
    const lines = out.stdout.split('\n');
    assert.match(lines[0] ?? '', /^started evr_1 nightly evr_1: 4 results/);
    assert.deepEqual(lines.slice(1, 5), [
      `task-1 ${AGENT} #1 passed 10.0s $0.0100`,
      `task-2 ${AGENT} #1 failed (exit 1) 12.0s $0.0200: AssertionError: expected 5, got -1`,
      `task-3 ${AGENT} #1 passed 14.0s $0.0300`,
      `task-4 ${AGENT} #1 passed 20.0s $0.0400`,
    ]);
    assert.match(out.stdout, /75% \[30–95\] \(3\/4\)/);
    const record = JSON.parse(await readFile(join(work, 'run.json'), 'utf8')) as EvalRun;
    assert.equal(record.state, 'finished');
    assert.equal(record.results.length, 4);
    assert.equal(await readFile(join(work, 'run.md'), 'utf8'), runMarkdown(record));
  });

  test('run --no-wait: the run as started, and how to follow it', async () => {
    const out = await cli(['eval', 'run', 'suite.yaml', '--no-wait', '--json', 'started.json']);
    assert.equal(out.code, 0, out.stderr);
    assert.match(
      out.stdout,
      /^started evr_1 .*\nfollow it: errand eval show evr_1 --wait\nwrote started.json\n$/,
    );
    const record = JSON.parse(await readFile(join(work, 'started.json'), 'utf8')) as EvalRun;
    assert.equal(record.state, 'running');
  });

  test('run: Ctrl-C stops the waiting, not the run, and says how to follow it again', async () => {
    await writeFile(
      join(work, 'forever.yaml'),
      'name: forever\ntasks: [{id: t, project: prj_1, prompt: p, check: c}]\n',
    );
    const reads = api.seen.reads;
    const child = spawn(
      process.execPath,
      [MAIN, 'eval', 'run', 'forever.yaml', '--json', 'forever.json'],
      {
        cwd: work,
        env: {
          PATH: process.env.PATH ?? '',
          ERRAND_URL: api.url,
          ERRAND_API_KEY: KEY,
          ERRAND_DATA_DIR: work,
        },
      },
    );
    const output = captureOutput(child);
    // Once it has read the run, it is waiting (and minds Ctrl-C).
    while (api.seen.reads === reads) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    const done = await output.done;
    assert.equal(done.code, 130, done.stderr);
    assert.match(
      done.stdout,
      /stopped waiting; the run goes on\. Follow it again: errand eval show evr_2 --wait\nwrote forever\.json\n$/,
    );
    assert.equal(api.seen.cancelled, 0, 'the run was not cancelled');
    // The file asked for holds the run as last read.
    const record = JSON.parse(await readFile(join(work, 'forever.json'), 'utf8')) as EvalRun;
    assert.equal(record.state, 'running');
  });

  test('run: a refused suite exits non-zero with the API’s reason; a file that is no suite too', async () => {
    await writeFile(join(work, 'empty.json'), '{"tasks": []}');
    const refused = await cli(['eval', 'run', 'empty.json']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /tasks: at least one task \(HTTP 400\)/);
    await writeFile(join(work, 'bad.yaml'), 'just: text\n');
    const bad = await cli(['eval', 'run', 'bad.yaml']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /is not a suite/);
  });

  test('show, show --wait, list, cancel and compare', async () => {
    assert.equal((await cli(['eval', 'run', 'suite.yaml', '--no-wait'])).code, 0);
    // The first read settles two results, the second the rest.
    const shown = await cli(['eval', 'show', 'evr_1', '--markdown', 'show.md']);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /^evr_1 nightly evr_1 \(running, 2\/4 results\)/);
    const markdown = await readFile(join(work, 'show.md'), 'utf8');
    assert.match(
      markdown,
      /^Run `evr_1`: running, 2\/4 results, started 2026-11-29T07:00:00.000Z\./m,
    );
    const waited = await cli(['eval', 'show', 'evr_1', '--wait']);
    assert.equal(waited.code, 0, waited.stderr);
    assert.deepEqual(waited.stdout.split('\n').slice(0, 5), [
      `task-1 ${AGENT} #1 passed 10.0s $0.0100`,
      `task-2 ${AGENT} #1 failed (exit 1) 12.0s $0.0200: AssertionError: expected 5, got -1`,
      `task-3 ${AGENT} #1 passed 14.0s $0.0300`,
      `task-4 ${AGENT} #1 passed 20.0s $0.0400`,
      '',
    ]);
    assert.match(waited.stdout, /^evr_1 nightly evr_1 \(finished, 4\/4 results\)$/m);
    const listed = await cli(['eval', 'list']);
    assert.equal(
      listed.stdout,
      `evr_1  finished  2026-11-29T07:00:00.000Z  nightly evr_1  ${AGENT} 75%\n`,
    );
    const cancelled = await cli(['eval', 'cancel', 'evr_1', '--json']);
    assert.equal((JSON.parse(cancelled.stdout) as EvalRun).state, 'cancelled');
    const compared = await cli(['eval', 'compare', 'evr_1', 'evr_1']);
    assert.equal(compared.code, 0, compared.stderr);
    assert.match(compared.stdout, /4 same$/m);
    const missing = await cli(['eval', 'show', 'evr_nope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no such eval run \(HTTP 404\)/);
  });

  test('help', async () => {
    const help = await cli(['help', 'eval', 'from-git']);
    assert.match(help.stdout, /^Usage: errand eval from-git REPO --test-cmd 'CMD \{files\}'/);
    assert.match(help.stdout, /first-parent/);
  });
});

// ---- from-git --project: the fixed issue's text from the project's forge --------------------

describe('errand eval from-git --project: the text of the issue a commit fixes', () => {
  const TOKEN = 'ghp_evalissues0123456789abcdefghijkl';
  let h: History;
  let gh: FakeGitHub;
  let svc: TestService;
  const projects: Record<'withIssue' | 'without' | 'plain', string> = {
    withIssue: '',
    without: '',
    plain: '',
  };
  const ISSUE_BODY = `add 2 3 prints -1.\n\nExpected 5.${'\n…'.repeat(5000)}`;
  const fromGit = (project: string, out: string) =>
    runCli(svc, [
      'eval',
      'from-git',
      h.dir,
      '--test-cmd',
      CHECK,
      '--tests',
      'tests/add_*.sh',
      '--project',
      project,
      '--out',
      out,
    ]);
  const suiteOf = async (out: string) =>
    parse(await readFile(join(svc.database.dataDir, out), 'utf8')) as {
      tasks: Array<Record<string, string>>;
    };

  before(async () => {
    h = await makeHistory();
    gh = await startFakeGitHub({ repos: ['acme/app', 'acme/empty'], token: TOKEN });
    // Issues 1 to 6 are other people's; the commit fixes #7.
    for (let n = 1; n < 7; n += 1)
      gh.openIssue('acme/app', { title: `Other ${n}`, author: 'someone' });
    gh.openIssue('acme/app', {
      title: 'add subtracts',
      body: ISSUE_BODY,
      author: 'customer',
    });
    svc = await startTestService({ env: { ERRAND_SECRET_KEY: 'eval-from-git-issues-secret' } });
    for (const [name, repo] of [
      ['withIssue', 'acme/app'],
      ['without', 'acme/empty'],
    ] as const) {
      const made = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name,
          repository: `${gh.url}/${repo}.git`,
          forge: 'github',
          forgeUrl: gh.apiUrl,
          forgeToken: TOKEN,
        },
      });
      assert.equal(made.status, 201, made.text);
      projects[name] = made.json.id as string;
    }
    projects.plain = (await svc.createProject({ name: 'plain' })).id;
  });
  after(async () => {
    gh?.assertNoUnexpected();
    await svc?.close();
    await gh?.close();
    await removeDir(h?.dir);
    await removeDir(h?.origin);
  });

  test("the issue's title and body land in the task's prompt under a heading, its body cut and said so", async () => {
    const out = await fromGit(projects.withIssue, 'with-issue.yaml');
    assert.equal(out.code, 0, out.stderr + out.stdout);
    assert.match(out.stdout, /^ {2}#7: its text is in the prompt \("add subtracts"\)$/m);
    const [task] = (await suiteOf('with-issue.yaml')).tasks;
    const kept = ISSUE_BODY.slice(0, 8_000);
    assert.equal(
      task?.prompt,
      [
        "Fix add: it subtracted\n\nadd 2 3 gave -1. Fixes #7, and it's tested now.",
        '## Issue #7: add subtracts',
        `${kept}\n\n[The rest of this description, ${ISSUE_BODY.length - 8_000} more characters, was cut: ${gh.url}/acme/app/issues/7]`,
      ].join('\n\n'),
    );
    assert.deepEqual(
      gh.requests.filter((r) => r.operation === 'issues/get').map((r) => r.path),
      ['/repos/acme/app/issues/7'],
    );
  });

  test("an issue the forge has not: today's prompt, and a line saying its text was not found", async () => {
    const out = await fromGit(projects.without, 'without.yaml');
    assert.equal(out.code, 0, out.stderr + out.stdout);
    assert.match(
      out.stdout,
      /^ {2}#7: its text was not found: GitHub has no issue #7 in the project's repository.*; the prompt names it only$/m,
    );
    const [task] = (await suiteOf('without.yaml')).tasks;
    assert.equal(
      task?.prompt,
      "Fix add: it subtracted\n\nadd 2 3 gave -1. Fixes #7, and it's tested now.\n\n(The issue this is about: #7.)",
    );
  });

  test('a project without a forge is said so; an unknown project stops from-git before it walks', async () => {
    const plain = await fromGit(projects.plain, 'plain.yaml');
    assert.equal(plain.code, 0, plain.stderr + plain.stdout);
    assert.match(
      plain.stdout,
      /^ {2}#7: its text was not read: project prj_\w+ is on a plain git remote, without a forge;/m,
    );
    const asked = gh.requests.length;
    const unknown = await fromGit('prj_00000000000000000000', 'unknown.yaml');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /project prj_00000000000000000000 not found \(HTTP 404\)/);
    assert.doesNotMatch(unknown.stdout, /trying/);
    assert.equal(gh.requests.length, asked);
    await assert.rejects(readFile(join(svc.database.dataDir, 'unknown.yaml')));
  });
});
