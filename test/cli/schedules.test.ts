// `errand schedule …` as a user runs it: the real `errand` process talking to a running
// service's admin API. Firings are src/features/schedules/fire.test.ts's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService } from '../support/service.ts';

type Json = Record<string, unknown>;

describe('errand schedule', () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ worker: false });
    projectId = (await svc.createProject({ name: 'scheduled' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[]): Promise<Run> => runCli(svc, args, {});
  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run;
  };
  const json = async (args: string[]): Promise<Json> =>
    JSON.parse(ok(await cli([...args, '--json'])).stdout) as Json;

  test('create, list, pause, resume, delete', async () => {
    const created = await json([
      'schedule',
      'create',
      '--project',
      projectId,
      '--cron',
      '0 6 * * 1',
      '--timezone',
      'Europe/Paris',
      '--prompt',
      'update the dependencies',
      '--mode',
      'plan',
      '--name',
      'weekly deps',
    ]);
    const id = String(created.id);
    assert.match(id, /^sch_/);
    assert.equal(created.mode, 'plan');
    assert.equal(created.timezone, 'Europe/Paris');

    const listed = ok(await cli(['schedule', 'list', '--project', projectId])).stdout;
    assert.match(
      listed,
      new RegExp(
        `${id}  active  0 6 \\* \\* 1 \\(Europe/Paris\\)  plan  weekly deps  not fired yet`,
      ),
    );

    assert.equal((await json(['schedule', 'pause', id, '--project', projectId])).paused, true);
    assert.match(ok(await cli(['schedule', 'list', '--project', projectId])).stdout, /paused/);
    assert.equal((await json(['schedule', 'resume', id, '--project', projectId])).paused, false);

    ok(await cli(['schedule', 'delete', id, '--project', projectId]));
    assert.equal(
      ok(await cli(['schedule', 'list', '--project', projectId])).stdout.trim(),
      'no schedules',
    );
  });

  test('refusals: the server’s words for a bad cron, the CLI’s for a bad mode', async () => {
    const bad = await cli([
      'schedule',
      'create',
      '--project',
      projectId,
      '--cron',
      'often',
      '--prompt',
      'x',
    ]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /"cron": 'often' is not a cron expression/);
    const mode = await cli([
      'schedule',
      'create',
      '--project',
      projectId,
      '--cron',
      '0 6 * * *',
      '--prompt',
      'x',
      '--mode',
      'write',
    ]);
    assert.equal(mode.code, 2);
    assert.match(mode.stderr, /--mode must be one of code, ask, plan/);
    assert.equal(
      (await svc.request('GET', `/v2/admin/projects/${projectId}/schedules`)).text,
      '{"schedules":[]}',
    );
  });
});
