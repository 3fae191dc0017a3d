// `errand secret …` as a user runs it: the real `errand` process talking to a running service's
// admin API. A value comes from stdin or a prompt on a real terminal (util-linux's `script`
// gives it one), is stored as given, and is never printed back, nor echoed as it is typed.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { turnSecrets } from '../../src/projects/secrets.ts';
import { type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const hasScript = spawnSync('script', ['--version']).status === 0;

type Json = Record<string, unknown>;

describe('errand secret', () => {
  let svc: TestService;
  let projectId: string;
  /** Every value given, to look for in what the CLI printed. */
  const values: string[] = [];
  const value = (label: string) => {
    const v = `${label}-${randomBytes(10).toString('hex')}`;
    values.push(v);
    return v;
  };

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'cli-secrets-test-secret-key' },
    });
    projectId = (await svc.createProject({ name: 'secrets' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[], input?: string): Promise<Run> => runCli(svc, args, {}, input);
  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    for (const v of values) assert.ok(!run.stdout.includes(v), 'a value was printed');
    return run;
  };
  const stored = async () =>
    Object.fromEntries(
      (await turnSecrets(svc.service.ctx, projectId)).map((s) => [s.name, [s.value, s.exposure]]),
    );
  const project = (): string[] => ['--project', projectId];

  test('set from stdin: created, then replaced; one final line break dropped', async () => {
    const first = value('npm');
    const created = ok(await cli(['secret', 'set', 'NPM_TOKEN', ...project()], `${first}\n`));
    assert.equal(created.stdout, 'created secret NPM_TOKEN (exposure setup)\n');
    const second = value('npm-2');
    // A value of several lines keeps them: only the last line break goes.
    const replaced = ok(
      await cli(
        ['secret', 'set', 'NPM_TOKEN', ...project(), '--exposure', 'commands'],
        `${second}\nline two\n\n`,
      ),
    );
    assert.equal(replaced.stdout, 'replaced secret NPM_TOKEN (exposure commands)\n');
    assert.deepEqual((await stored()).NPM_TOKEN, [`${second}\nline two\n`, 'commands']);
  });

  test('--json: the record with created; list and delete', async () => {
    const res = JSON.parse(
      ok(await cli(['secret', 'set', 'A_KEY', ...project(), '--json'], value('a'))).stdout,
    ) as Json;
    assert.deepEqual(Object.keys(res).sort(), [
      'created',
      'createdAt',
      'exposure',
      'name',
      'updatedAt',
    ]);
    assert.equal(res.created, true);
    const listed = ok(await cli(['secret', 'list', ...project()])).stdout.split('\n');
    assert.match(listed[0] ?? '', /^A_KEY {2}setup {2}set \d{4}-\d\d-\d\dT/);
    assert.match(listed[1] ?? '', /^NPM_TOKEN {2}commands {2}set /);
    const json = JSON.parse(
      ok(await cli(['secret', 'list', ...project(), '--json'])).stdout,
    ) as Json[];
    assert.deepEqual(
      json.map((s) => s.name),
      ['A_KEY', 'NPM_TOKEN'],
    );
    assert.equal(
      ok(await cli(['secret', 'delete', 'A_KEY', ...project()])).stdout,
      'deleted secret A_KEY\n',
    );
    assert.deepEqual(Object.keys(await stored()), ['NPM_TOKEN']);
  });

  test('a value on the command line is refused without being shown; nothing is stored', async () => {
    const v = value('argv');
    for (const args of [
      ['secret', 'set', 'ARGV_TOKEN', v, ...project()],
      ['secret', 'set', 'ARGV_TOKEN', ...project(), '--value', v],
      ['secret', 'set', 'ARGV_TOKEN', ...project(), `--value=${v}`],
    ]) {
      const run = await cli(args, '');
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.ok(!run.stderr.includes(v), `the value is on stderr: ${run.stderr}`);
      assert.equal(run.stdout, '');
    }
    const positional = await cli(['secret', 'set', 'ARGV_TOKEN', v, ...project()], '');
    assert.match(positional.stderr, /never given on the command line/);
    assert.equal((await stored()).ARGV_TOKEN, undefined);
  });

  test("the server's refusals: a short value, a reserved name, an unknown secret", async () => {
    for (const [args, input, message] of [
      [['secret', 'set', 'SHORT', ...project()], 'short\n', /at least 8 characters/],
      [['secret', 'set', 'LD_PRELOAD', ...project()], value('ld'), /LD_PRELOAD is reserved/],
      [['secret', 'set', 'lower', ...project()], value('lower'), /is not a secret's name/],
      [['secret', 'delete', 'NOPE', ...project()], undefined, /has no secret NOPE/],
    ] as const) {
      const run = await cli([...args], input);
      assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message);
      assert.doesNotMatch(run.stderr, /\n\s+at /);
      for (const v of values) assert.ok(!run.stderr.includes(v));
    }
  });

  test('on a terminal: a prompt that does not echo what is typed', {
    skip: !hasScript,
  }, async () => {
    const v = value('typed');
    const command = [process.execPath, MAIN, 'secret', 'set', 'TYPED_TOKEN', ...project()]
      .map((w) => `'${w}'`)
      .join(' ');
    const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], {
      env: {
        PATH: process.env.PATH ?? '',
        ERRAND_URL: svc.url,
        ERRAND_DATA_DIR: svc.database.dataDir,
      },
      cwd: svc.database.dataDir,
    });
    let screen = '';
    child.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    await waitFor('the prompt', async () => (screen.includes('(not shown): ') ? true : undefined));
    child.stdin.write(`${v}\r`);
    assert.equal(await exited, 0, screen);
    // The prompt, the terminal's cursor moves, the line break of Enter: nothing typed shows.
    assert.ok(screen.includes('Value of TYPED_TOKEN (not shown): '), screen);
    assert.match(screen, /created secret TYPED_TOKEN \(exposure setup\)/);
    assert.ok(!screen.includes(v), `the value was echoed: ${JSON.stringify(screen)}`);
    assert.deepEqual((await stored()).TYPED_TOKEN, [v, 'setup']);
  });
});
