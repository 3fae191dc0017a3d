// The README's quick start, run as written: its second-terminal block is read from README.md
// and each command run as a real `errand` process against a real `errand serve` on a fresh
// data directory, with the scripted fake model standing in for the vendor. The `# →` lines
// under a command are what it must print (… is anything), so the README cannot drift.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { captureOutput, killStrays, type ServeProcess, startServe } from '../support/process.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const README = new URL('../../README.md', import.meta.url);
const OPENAI_KEY = 'sk-test-openai-quickstart-5c1d';
const README_URL = 'http://127.0.0.1:8080';
const README_REPO = '/path/to/a/git/repo';

interface Step {
  command: string;
  /** The `# →` lines under it. */
  expected: string[];
}

/** The block of the quick start that runs in the second terminal: commands and `# →` lines. */
function quickStartSteps(readme: string): Step[] {
  const section = /\n## Quick start\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
  const block = /In a second terminal:\n\n```sh\n([\s\S]*?)\n```/.exec(section)?.[1];
  assert.ok(block, 'the quick start has no second-terminal sh block');
  const steps: Step[] = [];
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue;
    const expected = /^# → ?(.*)$/.exec(line);
    if (expected) {
      const last = steps.at(-1);
      assert.ok(last, `an expectation before any command: ${line}`);
      last.expected.push(expected[1] ?? '');
    } else if (line.startsWith('#')) {
    } else {
      // A comment after a command is for the reader.
      steps.push({ command: line.replace(/\s+#\s.*$/, '').trim(), expected: [] });
    }
  }
  return steps;
}

/** Words of a command line: spaces split, double quotes group (all the README uses). */
function words(command: string): string[] {
  const out: string[] = [];
  for (const match of command.matchAll(/"([^"]*)"|(\S+)/g)) out.push(match[1] ?? match[2] ?? '');
  return out;
}

function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('README quick start (the embedded database, as the quick start has it)', () => {
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let serve: ServeProcess;

  before(async () => {
    tmp = await makeTempDir('quickstart');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n' });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    // `npm start` in the checkout: serve with the data directory ./.errand.
    serve = await startServe(path.join(tmp, '.errand'), [], {
      OPENAI_API_KEY: OPENAI_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
    });
  });
  after(async () => {
    await serve?.stop();
    killStrays();
    await llm?.close();
    await removeDir(tmp);
  });

  test('every command of the quick start prints what the README says', async () => {
    const steps = quickStartSteps(await readFile(README, 'utf8'));
    assert.deepEqual(
      steps.map((s) => words(s.command).slice(0, 4).join(' ')),
      [
        'npx errand project create',
        'export ERRAND_PROJECT=prj_…',
        'npx errand key create',
        'export ERRAND_API_KEY=errand_…',
        'npx errand job create',
      ],
      'the quick start creates a project and a project key, then runs a job with that key',
    );
    llm.script(
      toolCalls([
        {
          name: 'write_file',
          input: { path: 'CONTRIBUTING.md', content: '# Contributing\n\nSend a patch.\n' },
        },
      ]),
      reply('Add a CONTRIBUTING.md\n\nHow to contribute.'),
    );

    // The second terminal: the checkout's directory, where ./.errand/admin.key is.
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', ERRAND_URL: serve.url };
    const found = new Map<string, string>();
    const substitute = (text: string) =>
      text
        .replaceAll(README_REPO, origin.bare)
        .replaceAll('prj_…', found.get('project') ?? 'prj_…')
        .replaceAll('errand_…', found.get('key') ?? 'errand_…');
    for (const step of steps) {
      const [first, ...args] = words(substitute(step.command));
      if (first === 'export') {
        const [name, value = ''] = (args[0] ?? '').split(/=(.*)/s);
        assert.ok(name && !value.includes('…'), `${step.command}: nothing to export`);
        env[name] = value;
        continue;
      }
      assert.deepEqual([first, args[0]], ['npx', 'errand'], step.command);
      // The key is never an argument: the README passes it in the environment.
      if (found.has('key')) assert.ok(!args.includes(found.get('key') ?? ''));
      const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
        (resolve) => {
          const child = spawn(process.execPath, [MAIN, ...args.slice(1)], { env, cwd: tmp });
          void captureOutput(child).done.then(resolve);
        },
      );
      assert.equal(run.code, 0, `${step.command}: ${run.stderr}`);
      assert.equal(run.stderr, '', step.command);
      const project = /created project (prj_\w+)/.exec(run.stdout)?.[1];
      if (project && !found.has('project')) found.set('project', project);
      const key = /^\s+(errand_\S+)$/m.exec(run.stdout)?.[1];
      if (key) found.set('key', key);
      // Each `# →` line matches a later line of the output, in order.
      const out = run.stdout.split('\n');
      let at = 0;
      for (const expected of step.expected) {
        if (expected === '…') continue;
        const pattern = new RegExp(
          `^${literal(substitute(expected).replaceAll(README_URL, serve.url))
            .replaceAll('…', '.*')
            .replaceAll('prj_.*', 'prj_\\w+')
            .replaceAll('errand_.*', 'errand_\\S+')}$`,
        );
        const index = out.findIndex((line, i) => i >= at && pattern.test(line));
        assert.ok(index >= 0, `${step.command}: no line like "${expected}" in:\n${run.stdout}`);
        at = index + 1;
      }
    }
    assert.equal(env.ERRAND_API_KEY, found.get('key'), 'the job ran with the project key');
    // The job's work is on its branch of the repository.
    const branch = git(origin.bare, 'branch', '--list', 'errand/job_*').trim();
    assert.match(branch, /errand\/job_\w+/);
    assert.equal(
      git(origin.bare, 'show', `${branch.replace(/^\*?\s*/, '')}:CONTRIBUTING.md`),
      '# Contributing\n\nSend a patch.',
    );
    llm.assertDone();
  });
});

/**
 * The machine's own npx (not the npm this checkout brings, which `npm test` puts first on
 * PATH): the one a user types `npx errand` with, on whatever Node the machine has.
 */
async function machineNpx(): Promise<string | undefined> {
  const ours = path.resolve(new URL('../..', import.meta.url).pathname, 'node_modules');
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!dir || path.resolve(dir).startsWith(ours)) continue;
    const npx = path.join(dir, 'npx');
    if (
      await access(npx, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return npx;
  }
  return undefined;
}

describe('README quick start on the machine’s own Node and npm', () => {
  test('`npx errand` prints Errand’s output and nothing of npm’s (Node 20 included)', async (t) => {
    const npx = await machineNpx();
    if (!npx) return t.skip('no npx on PATH outside this checkout');
    const dir = path.dirname(npx);
    const checkout = new URL('../..', import.meta.url).pathname;
    // npm speaks up when npx first puts the checkout in its cache: a new cache, as on a fresh
    // machine, makes every run the first.
    const cache = await makeTempDir('npx-cache');
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve) => {
        const child = spawn(npx, ['errand', '--version'], {
          // The user's shell: the machine's Node first, none of this test run's npm settings.
          env: { PATH: `${dir}:/usr/bin:/bin`, HOME: cache, npm_config_cache: cache },
          cwd: checkout,
        });
        void captureOutput(child).done.then(resolve);
      },
    ).finally(() => removeDir(cache));
    const node = await new Promise<string>((resolve) => {
      const child = spawn(path.join(dir, 'node'), ['--version'], { env: { PATH: dir } });
      void captureOutput(child).done.then((r) => resolve(r.stdout.trim()));
    });
    t.diagnostic(`the machine's Node: ${node || 'none beside npx'}`);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '', `npx printed more than errand's output on Node ${node}`);
    assert.match(run.stdout, /^\d+\.\d+\.\d+\n$/);
  });
});
