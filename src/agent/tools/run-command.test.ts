// run_command on its own, with real bubblewrap: what the model reads for each outcome, the
// events it records, and the calls refused before anything runs.
import assert from 'node:assert/strict';
import { watch } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { asSchema } from 'ai';
import { DEFAULT_LIMITS } from '../../projects/limits.ts';
import { checkSandbox } from '../../sandbox/sandbox.ts';
import { summarizeToolArgs } from './index.ts';
import {
  COMMAND_OUTPUT_CAP,
  createRunCommandTool,
  EVENT_OUTPUT_TAIL,
  type RunCommandOptions,
  runCommand,
} from './run-command.ts';
import { makeRepo, sentinelText } from './testing.ts';

const sandbox = await checkSandbox();
const skip = sandbox.available ? false : `bubblewrap does not work here: ${sandbox.reason}`;
const SECRET = 'sk-unit-secret-5f2e8a1c';

type Recorded = { type: string; data: Record<string, unknown> };

function options(
  root: string,
  overrides: Partial<RunCommandOptions> = {},
): RunCommandOptions & { events: Recorded[] } {
  const events: Recorded[] = [];
  return {
    root,
    limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20 },
    signal: new AbortController().signal,
    emit: async (type, data) => {
      events.push({ type, data });
    },
    secrets: [SECRET],
    ...overrides,
    events,
  };
}

/** Resolves when a file named `name` is made in `dir` (watched from the call on). */
function appears(dir: string, name: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(dir, (_event, filename) => {
      if (filename !== name) return;
      watcher.close();
      resolve();
    });
  });
}

describe('run_command', { skip }, () => {
  test('reports the exit code and the output; a failing command is not ok, and says so', async (t) => {
    const repo = await makeRepo(t, { 'test.sh': 'echo "3 passed"\n' });
    const opts = options(repo.root);
    const passed = await runCommand(opts, { command: 'sh test.sh' });
    assert.equal(passed.ok, true);
    assert.match(passed.text, /^\$ sh test\.sh\nExit code: 0 \(\d+ ms\)\n\n3 passed\n$/);
    assert.match(passed.title, /^sh test\.sh: Exit code: 0/);
    const failed = await runCommand(opts, { command: `echo ${SECRET}; echo oops >&2; exit 3` });
    assert.equal(failed.ok, false);
    assert.match(failed.text, /Exit code: 3 .*\n\n\[redacted\]\noops\n$/);
    assert.ok(!failed.text.includes(SECRET));
    assert.deepEqual(
      opts.events.map((e) => [e.type, e.data.exitCode ?? null]),
      [
        ['command.started', null],
        ['command.finished', 0],
        ['command.started', null],
        ['command.finished', 3],
      ],
    );
    // The events carry the command as given: the pipeline's emit scrubs them like all events.
    assert.deepEqual(opts.events[0]?.data, { command: 'sh test.sh', cwd: '.' });
    assert.equal(opts.events[3]?.data.outputTail, `${SECRET}\noops\n`);
  });

  test('a command that grows the checkout past its bound is not ok, and the model is told', async (t) => {
    const repo = await makeRepo(t);
    const opts = options(repo.root, {
      limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20, diskMb: 1 },
    });
    const write = 'head -c 3145728 /dev/zero > big.bin';
    const ended = await runCommand(opts, { command: write });
    assert.equal(ended.ok, false);
    assert.match(
      ended.text,
      /^\$ head .*\nExit code: 0 \(\d+ ms\), but it grew the repository by [34] MB, over the limit of 1 MB\.\n/,
    );
    assert.match(ended.text, /\[errand: the checkout grew by [34] MB, over the limit of 1 MB\]\n$/);
    // Growth counts from each command's start: big.bin is already there.
    const stopped = await runCommand(opts, {
      command: `${write.replace('big', 'more')}; exec sleep 600`,
    });
    assert.equal(stopped.ok, false);
    assert.match(
      stopped.text,
      /\nStopped: it grew the repository by [34] MB, over the limit of 1 MB \([\d.]+ m?s\)\.\n/,
    );
  });

  test('a command whose processes together run out of its memory is not ok, and the model is told', async (t) => {
    if (!sandbox.available || sandbox.memoryLimit !== 'cgroup') {
      return t.skip(
        "no memory cgroup here: the run's memory is watched instead (test/sandbox/limits.test.ts)",
      );
    }
    const repo = await makeRepo(t);
    const opts = options(repo.root, {
      limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20, memoryMb: 64 },
    });
    // Four processes of 24 MB each, each under the bound, held at once.
    const hogs =
      'for i in 1 2 3 4; do perl -e \'$x = "a" x (24 << 20); sleep 10\' & done; wait; echo finished';
    const result = await runCommand(opts, { command: hogs });
    assert.equal(result.ok, false);
    assert.match(
      result.text,
      /\nStopped: it ran out of its 64 MB of memory, all its processes together \([\d.]+ m?s\)\.\n/,
    );
    assert.match(
      result.text,
      /\[errand: the command ran out of its 64 MB of memory; it was stopped\]\n$/,
    );
    assert.doesNotMatch(result.text, /^finished$/m);
  });

  test('long output keeps its head and tail for the model; the event keeps a short tail', async (t) => {
    const repo = await makeRepo(t);
    const opts = options(repo.root);
    const result = await runCommand(opts, {
      command:
        'echo FIRST; i=0; while [ $i -lt 5000 ]; do echo "line $i of filler text"; i=$((i+1)); done; echo LAST',
    });
    assert.equal(result.ok, true);
    assert.match(result.text, /\n\nFIRST\n/);
    assert.match(result.text, /LAST\n$/);
    assert.match(result.text, /cut/);
    assert.ok(result.text.length < COMMAND_OUTPUT_CAP + 1000, String(result.text.length));
    const tail = String(opts.events.at(-1)?.data.outputTail);
    assert.ok(tail.length <= EVENT_OUTPUT_TAIL, String(tail.length));
    assert.match(tail, /^…/);
    assert.match(tail, /LAST\n$/);
  });

  test('runs in a folder of the checkout; refuses folders outside it, under .git, or missing', async (t) => {
    const repo = await makeRepo(t, { 'web/index.html': '<p>hi</p>\n' });
    await fs.symlink(repo.outside, path.join(repo.root, 'out'));
    const opts = options(repo.root);
    const inWeb = await runCommand(opts, { command: 'pwd; ls', cwd: 'web' });
    assert.match(inWeb.text, /^\$ pwd; ls {3}\(in web\)\n/);
    assert.match(inWeb.text, /\/workspace\/web\nindex\.html\n$/);
    const refusals: Array<[string | undefined, string, RegExp]> = [
      ['..', 'pwd', /outside the repository/],
      ['out', 'cat secret.txt', /points outside the repository/],
      ['.git', 'ls', /inside \.git\//],
      ['missing', 'ls', /'missing' does not exist/],
      ['web/index.html', 'ls', /is not a folder/],
      [undefined, '   ', /command is empty/],
    ];
    const before = opts.events.length;
    for (const [cwd, command, reason] of refusals) {
      const result = await runCommand(opts, { command, ...(cwd ? { cwd } : {}) });
      assert.equal(result.ok, false, `${cwd} ${command}`);
      assert.match(result.text, /^Error: /);
      assert.match(result.text, reason);
      assert.ok(!result.text.includes(sentinelText.trim()));
    }
    assert.equal(opts.events.length, before, 'a refused call ran nothing');
  });

  test('a timeout over the limit is lowered; a timed-out command says so', async (t) => {
    const repo = await makeRepo(t);
    const opts = options(repo.root, { limits: { ...DEFAULT_LIMITS, timeoutSeconds: 1 } });
    const started = Date.now();
    const result = await runCommand(opts, { command: 'sleep 60', timeoutSeconds: 999 });
    assert.ok(Date.now() - started < 15_000);
    assert.equal(result.ok, false);
    assert.match(result.text, /Timed out: stopped after its time limit of 1 s/);
    assert.match(result.text, /timeoutSeconds 999 is over the project's limit; 1 s was used/);
    assert.equal(opts.events.at(-1)?.data.timedOut, true);
  });

  test("the turn's signal kills the command and the call throws", async (t) => {
    const repo = await makeRepo(t);
    const stop = new AbortController();
    const opts = options(repo.root, { signal: stop.signal });
    // The command is running once the file it writes first appears: then the turn stops.
    const started = appears(repo.root, 'started');
    const running = runCommand(opts, { command: ': > started; exec sleep 60' });
    await Promise.race([started, running]);
    stop.abort(new Error('archived'));
    const abortedAt = Date.now();
    await assert.rejects(running);
    assert.ok(Date.now() - abortedAt < 10_000);
    assert.equal(opts.events.at(-1)?.type, 'command.finished');
  });

  test('as an AI SDK tool: its schema, its description quoting the limit, and its summary', async (t) => {
    const repo = await makeRepo(t);
    const tool = createRunCommandTool(options(repo.root));
    assert.match(String(tool.description), /stopped after 20 s/);
    assert.match(String(tool.description), /no network/);
    const schema = (await asSchema(tool.inputSchema).jsonSchema) as {
      required?: string[];
      properties?: Record<string, unknown>;
    };
    assert.deepEqual(schema.required, ['command']);
    assert.deepEqual(Object.keys(schema.properties ?? {}).sort(), [
      'command',
      'cwd',
      'timeoutSeconds',
    ]);
    assert.equal(
      summarizeToolArgs('run_command', { command: 'npm test', cwd: 'web' }),
      'run_command npm test (in web)',
    );
    assert.equal(summarizeToolArgs('run_command', { command: 'a\nb' }), 'run_command a b');
  });
});
