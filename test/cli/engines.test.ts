// `errand engine list|install` and `project create|update --engine` as a user runs them: real
// processes, the engines directory a temporary one (ERRAND_ENGINES_DIR) where a small local
// package stands in for an installed engine, installed by the real install code.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CATALOG, type InstalledEngine } from '../../src/engines/catalog.ts';
import { type ServiceWithCodex, startServiceWithCodex } from '../support/engine-package.ts';
import { type Run, runCli } from '../support/process.ts';
import type { TestService } from '../support/service.ts';

describe('errand engine', () => {
  let server: ServiceWithCodex;
  let svc: TestService;
  let enginesDir: string;
  let codex: InstalledEngine;

  before(async () => {
    server = await startServiceWithCodex();
    ({ svc, enginesDir, codex } = server);
  });
  after(async () => {
    await server?.close();
  });

  const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
    runCli(svc, args, { ERRAND_ENGINES_DIR: enginesDir, ...env });

  test('list: each engine, its pinned version, installed or not and where', async () => {
    const run = await cli(['engine', 'list', '--json']);
    assert.equal(run.code, 0, run.stderr);
    const dir = (name: keyof typeof CATALOG) => path.join(enginesDir, name, CATALOG[name].version);
    assert.deepEqual(JSON.parse(run.stdout), [
      {
        name: 'claude-code',
        package: '@anthropic-ai/claude-code',
        version: CATALOG['claude-code'].version,
        installed: false,
        dir: dir('claude-code'),
      },
      {
        name: 'codex',
        package: '@openai/codex',
        version: CATALOG.codex.version,
        installed: true,
        dir: dir('codex'),
      },
      {
        name: 'opencode',
        package: 'opencode-ai',
        version: CATALOG.opencode.version,
        installed: false,
        dir: dir('opencode'),
      },
    ]);
    const text = await cli(['engine', 'list']);
    assert.equal(text.code, 0, text.stderr);
    assert.deepEqual(text.stdout.trimEnd().split('\n'), [
      `claude-code  ${CATALOG['claude-code'].version.padEnd(10)} not installed (errand engine install claude-code)`,
      `codex        ${CATALOG.codex.version.padEnd(10)} installed  ${dir('codex')}`,
      `opencode     ${CATALOG.opencode.version.padEnd(10)} not installed (errand engine install opencode)`,
    ]);
  });

  test('install of an installed engine prints it and runs no npm', async () => {
    const run = await cli(['engine', 'install', 'codex', '--json']);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), codex);
    const text = await cli(['engine', 'install', 'codex']);
    assert.equal(text.stdout, `codex ${CATALOG.codex.version}: ${codex.bin}\n`);
    assert.deepEqual(await readdir(path.join(enginesDir, 'codex')), [CATALOG.codex.version]);
  });

  test('install of what is not an engine to install is a usage error', async () => {
    for (const [name, reason] of [
      ['errand', 'errand is the built-in engine: there is nothing to install'],
      ['claude', 'unknown engine "claude": one of claude-code, codex, opencode'],
    ] as const) {
      const run = await cli(['engine', 'install', name]);
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stdout, '');
      assert.ok(
        run.stderr.startsWith(`errand engine: ${reason}\n\nUsage: errand engine`),
        run.stderr,
      );
    }
    const missing = await cli(['engine', 'install']);
    assert.equal(missing.code, 2);
    assert.equal(missing.stdout, '');
    assert.ok(
      missing.stderr.startsWith(
        'errand engine: no engine to install: name one (claude-code, codex, opencode) or set ERRAND_ENGINES to a comma-separated list of them\n',
      ),
      missing.stderr,
    );
    assert.deepEqual((await readdir(enginesDir)).sort(), ['codex']);
  });

  test('install without NAME installs what ERRAND_ENGINES names, each once; one already there runs no npm', async () => {
    const run = await cli(['engine', 'install', '--json'], { ERRAND_ENGINES: ' codex, codex ' });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), [codex]);
    const text = await cli(['engine', 'install'], { ERRAND_ENGINES: 'codex' });
    assert.equal(text.code, 0, text.stderr);
    // No npm output: the installed engine was found, not installed again.
    assert.equal(text.stdout, `codex ${CATALOG.codex.version}: ${codex.bin}\n`);
    assert.deepEqual((await readdir(enginesDir)).sort(), ['codex']);
  });

  test('an ERRAND_ENGINES naming what is not an engine to install stops before any install', async () => {
    for (const [value, name, extra] of [
      ['claude-code,claude', 'claude', ''],
      ['errand,claude-code', 'errand', ' (errand is the built-in one: nothing to install)'],
    ] as const) {
      const run = await cli(['engine', 'install'], { ERRAND_ENGINES: value });
      assert.equal(run.code, 1, run.stderr);
      assert.equal(run.stdout, '');
      assert.equal(
        run.stderr,
        `errand: invalid setting ERRAND_ENGINES: "${name}" is not an engine to install; the engines are claude-code, codex, opencode${extra}\n`,
      );
    }
    // Claude Code, named first, was not installed.
    assert.deepEqual((await readdir(enginesDir)).sort(), ['codex']);
  });

  test('project create and update --engine set it; the server refuses one not installed', async () => {
    const created = await cli([
      'project',
      'create',
      '--name',
      'on codex',
      '--repo',
      '.',
      '--model',
      'openai:gpt-5',
      '--engine',
      'codex',
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /^created project (prj_\w+) \(on codex: .*; engine codex; forge /);
    const id = /prj_\w+/.exec(created.stdout)?.[0] ?? '';

    const refused = await cli(['project', 'update', id, '--engine', 'opencode']);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /engine opencode is not installed on the server: run `errand engine install opencode` there/,
    );
    const back = await cli(['project', 'update', id, '--engine', 'errand', '--json']);
    assert.equal(back.code, 0, back.stderr);
    assert.equal((JSON.parse(back.stdout) as { engine: string }).engine, 'errand');

    const wrong = await cli(['project', 'update', id, '--engine', 'cursor']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /--engine must be one of errand, claude-code, codex, opencode/);
  });
});
