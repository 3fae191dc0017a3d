// `errand environment …` and the environment flags of `errand project` as a user runs them: the
// real `errand` process talking to a running service's admin API. The snapshots are rows written
// as a worker writes them; the builds asked for are read from the build queue.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Run, runCli } from '../support/process.ts';
import { takeEnvironmentBuildRequests } from '../support/route-cases.ts';
import { type ApiBody, startTestService, type TestService } from '../support/service.ts';

const KEY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const OLD = '5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9';

describe('errand environment', () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ worker: false });
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[]): Promise<Run> => runCli(svc, args);
  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run;
  };
  const project = (): string[] => ['--project', projectId];
  const keep = (key: string, worker: string, lastUsed: string) =>
    svc.service.ctx.db
      .insertInto('environments')
      .values({
        project_id: projectId,
        key,
        worker,
        size_bytes: 412_316_860,
        files: 38_412,
        build_ms: 71_350,
        base_commit: 'b'.repeat(40),
        last_used_at: new Date(lastUsed),
      })
      .execute();
  /** The builds asked for the project since the last look (the queue keeps one waiting). */
  const builds = (id = projectId) => takeEnvironmentBuildRequests(svc, id);

  test('project create and update: the maintenance command and the key files', async () => {
    const made = ok(
      await cli([
        'project',
        'create',
        '--name',
        'node app',
        '--repo',
        svc.database.dataDir,
        '--setup-command',
        'npm ci',
        '--maintenance-command',
        'npm run build',
        '--key-files',
        'package-lock.json, packages/*/package.json deps/{a,b}.lock',
        '--json',
      ]),
    );
    const created = JSON.parse(made.stdout) as ApiBody;
    projectId = created.id ?? '';
    assert.equal(created.maintenanceCommand, 'npm run build');
    assert.deepEqual(created.environmentKeyFiles, [
      'package-lock.json',
      'packages/*/package.json',
      'deps/{a,b}.lock',
    ]);
    assert.deepEqual(await builds(), ['created']);
    const text = ok(await cli(['project', 'update', projectId, '--key-files', 'default']));
    assert.match(text.stdout, /with a setup command and a maintenance command/);
    const read = async () => (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json;
    assert.equal((await read()).environmentKeyFiles, null);
    assert.deepEqual(await builds(), ['settings']);
    ok(await cli(['project', 'update', projectId, '--key-files', '', '--maintenance-command', '']));
    assert.deepEqual((await read()).environmentKeyFiles, []);
    assert.equal((await read()).maintenanceCommand, null);
    assert.deepEqual(await builds(), ['settings']);

    const bad = await cli(['project', 'update', projectId, '--key-files', 'go.sum,../x.lock']);
    assert.equal(bad.code, 1, bad.stderr);
    assert.match(
      bad.stderr,
      /invalid "environmentKeyFiles\[1\]": glob "..\/x.lock" leaves the checkout/,
    );
    assert.deepEqual((await read()).environmentKeyFiles, []);
  });

  test('list: none yet, then each worker’s snapshots, the one used last first; --json', async () => {
    assert.equal(
      ok(await cli(['environment', 'list', ...project()])).stdout,
      'no environments kept\n',
    );
    await keep(OLD, 'build-1', '2026-11-20T08:00:00.000Z');
    await keep(KEY, 'build-1', '2026-11-22T08:00:00.000Z');
    await keep(KEY, 'build-2', '2026-11-21T08:00:00.000Z');
    const lines = ok(await cli(['environment', 'list', ...project()])).stdout.split('\n');
    assert.deepEqual(lines, [
      `${KEY}  build-1  393 MB  38,412 files  built in 1 min 11 s  last used 2026-11-22T08:00:00.000Z`,
      `${KEY}  build-2  393 MB  38,412 files  built in 1 min 11 s  last used 2026-11-21T08:00:00.000Z`,
      `${OLD}  build-1  393 MB  38,412 files  built in 1 min 11 s  last used 2026-11-20T08:00:00.000Z`,
      '',
    ]);
    const json = JSON.parse(ok(await cli(['environment', 'list', ...project(), '--json'])).stdout);
    assert.deepEqual(json[0], {
      key: KEY,
      worker: 'build-1',
      sizeBytes: 412_316_860,
      files: 38_412,
      buildMs: 71_350,
      baseCommit: 'b'.repeat(40),
      createdAt: json[0].createdAt,
      lastUsedAt: '2026-11-22T08:00:00.000Z',
    });
  });

  test('delete KEY: that key on every worker; an unknown key fails; delete: all of them', async () => {
    assert.equal(
      ok(await cli(['environment', 'delete', KEY, ...project()])).stdout,
      `deleted 2 environments of key ${KEY}\n`,
    );
    const again = await cli(['environment', 'delete', KEY, ...project()]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, new RegExp(`has no environment ${KEY}`));
    assert.doesNotMatch(again.stderr, /\n\s+at /);
    assert.deepEqual(
      JSON.parse(ok(await cli(['environment', 'delete', ...project(), '--json'])).stdout),
      { deleted: 1 },
    );
    assert.equal(
      ok(await cli(['environment', 'list', ...project()])).stdout,
      'no environments kept\n',
    );
  });

  test('rebuild: a build asked for; refused for a project without a setup command', async () => {
    await builds();
    assert.equal(
      ok(await cli(['environment', 'rebuild', ...project()])).stdout,
      'a rebuild was requested: a worker builds it in the background\n',
    );
    assert.deepEqual(await builds(), ['rebuild']);
    const plain = await svc.createProject({ name: 'no setup' });
    const refused = await cli(['environment', 'rebuild', '--project', plain.id]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /has no setup command/);
    assert.deepEqual(await builds(plain.id), []);
  });

  test('usage: --project is required, one KEY at most; the help lists the commands', async () => {
    for (const [args, message] of [
      [['environment', 'list'], /--project is required/],
      [['environment', 'delete', KEY, OLD, ...project()], /unexpected argument/],
      [['environment', 'rebuild', KEY, ...project()], /unexpected argument/],
    ] as const) {
      const run = await cli([...args]);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message);
      assert.equal(run.stdout, '');
    }
    const help = ok(await cli(['environment', '--help'])).stdout;
    assert.match(help, /environment delete \[KEY\] --project ID/);
    assert.match(ok(await cli(['help'])).stdout, /environment list\|delete\|rebuild …/);
  });
});
