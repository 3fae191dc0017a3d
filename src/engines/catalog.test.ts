// Installing engines: the real npm and the real install code, on a small local package (the
// real engines weigh hundreds of MB), and once on the real engines when ERRAND_ENGINES_DIR says
// where they are kept (CI: a cache outside the clone, so each version is installed once).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { packEngine } from '../../test/support/engine-package.ts';
import {
  CATALOG,
  EngineInstallError,
  INSTALLABLE_ENGINES,
  installEngine,
  installedEngine,
  listEngines,
} from './catalog.ts';

const run = promisify(execFile);
const dirs: string[] = [];

async function enginesDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'errand-engines-'));
  dirs.push(dir);
  return dir;
}

after(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('engine installs', () => {
  test('an install puts the engine at <engines dir>/<name>/<pinned version>; a second one does nothing', async () => {
    const config = { enginesDir: await enginesDir() };
    const pkg = await packEngine('1.2.3');
    assert.equal(await installedEngine(config, 'codex'), undefined);
    const lines: string[] = [];
    const installed = await installEngine(config, 'codex', {
      log: (line) => lines.push(line),
      spec: pkg,
    });
    const dir = path.join(config.enginesDir, 'codex', CATALOG.codex.version);
    assert.deepEqual(installed, {
      name: 'codex',
      version: CATALOG.codex.version,
      dir,
      bin: path.join(dir, 'node_modules', 'errand-fake-engine', 'bin', 'engine'),
    });
    assert.ok(
      lines.some((line) => line.includes('--version: fake-engine 1.2.3')),
      lines.join('\n'),
    );
    const { stdout } = await run(installed.bin, ['--version']);
    assert.equal(stdout.trim(), 'fake-engine 1.2.3');
    // Nothing but the engine's directory: the staging directory was renamed, not copied.
    assert.deepEqual(await readdir(path.join(config.enginesDir, 'codex')), [CATALOG.codex.version]);
    assert.deepEqual(await installedEngine(config, 'codex'), installed);

    const again: string[] = [];
    const second = await installEngine(config, 'codex', {
      log: (line) => again.push(line),
      spec: await packEngine('9.9.9'),
    });
    assert.deepEqual(second, installed);
    assert.deepEqual(again, [], 'a second install ran npm');

    const list = await listEngines(config);
    assert.deepEqual(
      list.map((e) => [e.name, e.version, e.installed, e.dir]),
      INSTALLABLE_ENGINES.map((name) => [
        name,
        CATALOG[name].version,
        name === 'codex',
        path.join(config.enginesDir, name, CATALOG[name].version),
      ]),
    );
  });

  test('the first candidate executable that answers is the one used', async () => {
    const config = { enginesDir: await enginesDir() };
    const pkg = await packEngine('2.0.0');
    const installed = await installEngine(config, 'opencode', {
      log: () => {},
      spec: { ...pkg, executables: ['errand-missing-build/bin/engine', ...pkg.executables] },
    });
    assert.equal(
      installed.bin,
      path.join(installed.dir, 'node_modules', 'errand-fake-engine', 'bin', 'engine'),
    );
  });

  test('an executable that does not report the version is refused, and nothing is left', async () => {
    const config = { enginesDir: await enginesDir() };
    for (const spec of [
      await packEngine('3.0.0', { reports: '2.9.0' }),
      await packEngine('3.0.0', { exitCode: 1 }),
    ]) {
      await assert.rejects(
        installEngine(config, 'claude-code', { log: () => {}, spec }),
        (err: unknown) =>
          err instanceof EngineInstallError &&
          /no executable of this version runs here/.test(err.message) &&
          err.message.includes('errand-fake-engine/bin/engine'),
      );
      assert.deepEqual(await readdir(path.join(config.enginesDir, 'claude-code')), []);
      assert.equal(await installedEngine(config, 'claude-code'), undefined);
    }
    const missing = await packEngine('3.0.0');
    await assert.rejects(
      installEngine(config, 'claude-code', {
        log: () => {},
        spec: { ...missing, executables: ['errand-missing-build/bin/engine'] },
      }),
      /npm installed none of the executables for this machine: errand-missing-build\/bin\/engine/,
    );
    assert.deepEqual(await readdir(path.join(config.enginesDir, 'claude-code')), []);
  });

  test("npm's failure is the install's, with npm's words, and nothing is left", async () => {
    const config = { enginesDir: await enginesDir() };
    const from = path.join(config.enginesDir, 'no-such-package.tgz');
    await assert.rejects(
      installEngine(config, 'codex', {
        log: () => {},
        spec: { from, version: '1.0.0', executables: ['x/bin/x'] },
      }),
      (err: unknown) =>
        err instanceof EngineInstallError &&
        err.message.startsWith(`npm install ${from} failed (exit code `) &&
        /ENOENT|no such file/i.test(err.message),
    );
    assert.deepEqual(await readdir(path.join(config.enginesDir, 'codex')), []);
  });

  test('an install removes what an install killed over an hour ago left, not a running one', async () => {
    const config = { enginesDir: await enginesDir() };
    const parent = path.join(config.enginesDir, 'codex');
    const abandoned = path.join(parent, `.install-${CATALOG.codex.version}-killed`);
    const running = path.join(parent, `.install-${CATALOG.codex.version}-running`);
    await mkdir(path.join(abandoned, 'node_modules'), { recursive: true });
    await mkdir(running);
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000 - 1000);
    await utimes(abandoned, twoHoursAgo, twoHoursAgo);
    await installEngine(config, 'codex', { log: () => {}, spec: await packEngine('1.0.0') });
    assert.deepEqual((await readdir(parent)).sort(), [
      `.install-${CATALOG.codex.version}-running`,
      CATALOG.codex.version,
    ]);
  });

  test('two installs at once both end with the one directory', async () => {
    const config = { enginesDir: await enginesDir() };
    const pkg = await packEngine('4.0.0');
    const [a, b] = await Promise.all([
      installEngine(config, 'codex', { log: () => {}, spec: pkg }),
      installEngine(config, 'codex', { log: () => {}, spec: pkg }),
    ]);
    assert.deepEqual(a, b);
    assert.deepEqual(await readdir(path.join(config.enginesDir, 'codex')), [CATALOG.codex.version]);
    const { stdout } = await run(a.bin, ['--version']);
    assert.equal(stdout.trim(), 'fake-engine 4.0.0');
  });

  test('two processes installing into one directory at once both end with the one directory', async () => {
    const config = { enginesDir: await enginesDir() };
    const pkg = await packEngine('4.1.0');
    // Each process runs the real install code, as two init containers on one volume do.
    const script = `
      const { installEngine } = await import(${JSON.stringify(new URL('./catalog.ts', import.meta.url).href)});
      const [config, spec] = JSON.parse(process.argv[1]);
      const installed = await installEngine(config, 'codex', { log: () => {}, spec });
      process.stdout.write(JSON.stringify(installed));
    `;
    const install = () =>
      run(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([config, pkg])], {
        timeout: 120_000,
      });
    const [a, b] = await Promise.all([install(), install()]);
    assert.deepEqual(JSON.parse(a.stdout), JSON.parse(b.stdout));
    // Only the engine's directory: the staging directory of the one that lost went.
    assert.deepEqual(await readdir(path.join(config.enginesDir, 'codex')), [CATALOG.codex.version]);
    const installed = await installedEngine(config, 'codex');
    assert.deepEqual(installed, JSON.parse(a.stdout));
    const { stdout } = await run(installed?.bin ?? '', ['--version']);
    assert.equal(stdout.trim(), 'fake-engine 4.1.0');
  });

  test('a damaged manifest is an error that says what to do, never an engine', async () => {
    const config = { enginesDir: await enginesDir() };
    const installed = await installEngine(config, 'codex', {
      log: () => {},
      spec: await packEngine('5.0.0'),
    });
    for (const manifest of [
      'not json',
      JSON.stringify({ name: 'codex', bin: '/bin/sh' }),
      JSON.stringify({ name: 'codex', bin: '../../../bin/sh' }),
      JSON.stringify({ name: 'opencode', bin: 'node_modules/x' }),
    ]) {
      await writeFile(path.join(installed.dir, 'errand-engine.json'), manifest);
      await assert.rejects(
        installedEngine(config, 'codex'),
        (err: unknown) =>
          err instanceof EngineInstallError &&
          err.message.includes(`delete ${installed.dir} and run \`errand engine install codex\``),
        manifest,
      );
    }
  });
});

describe('the real engines', () => {
  const dir = process.env.ERRAND_ENGINES_DIR;
  const skip =
    dir === undefined
      ? 'ERRAND_ENGINES_DIR is not set: the real engines (about 1.1 GB from npm) are installed and run where it is (.ci/run sets it)'
      : false;

  for (const name of INSTALLABLE_ENGINES) {
    test(`${name}: installed from npm at its pinned version, its executable runs`, {
      skip,
    }, async () => {
      const config = { enginesDir: path.resolve(dir ?? '') };
      const installed = await installEngine(config, name, { log: () => {} });
      assert.equal(installed.version, CATALOG[name].version);
      assert.ok(installed.bin.startsWith(`${installed.dir}${path.sep}`), installed.bin);
      const home = await enginesDir();
      // A home of its own: an engine's first start writes its state there.
      const { stdout } = await run(installed.bin, ['--version'], {
        env: { PATH: '/usr/bin:/bin', HOME: home },
        timeout: 60_000,
      });
      assert.ok(stdout.includes(CATALOG[name].version), stdout);
    });
  }
});
