// The admin schedule routes under /v2/admin/projects/{projectId}/schedules: create, list, get,
// update (pause and resume) and delete, each refusal checked to store nothing (neither the row
// nor pg-boss's schedule), and each change's audit row. Firings are fire.test.ts's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  assertError,
  authCases,
  createRouteFixture,
  jsonBodyCases,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { newId } from '../../ids.ts';
import type { ScheduleRecord } from './types.ts';

const SCHEDULE_ID = /^sch_[0-9A-Za-z]{20}$/;
const FIELDS = [
  'createdAt',
  'createdBy',
  'cron',
  'id',
  'lastFiring',
  'mode',
  'model',
  'name',
  'paused',
  'projectId',
  'prompt',
  'timezone',
  'updatedAt',
];

describe('admin schedule routes', () => {
  let svc: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;
  const path = (projectId: string, rest = '') => `/v2/admin/projects/${projectId}/schedules${rest}`;
  /** pg-boss's schedules of the schedules' queue: the ids it fires. */
  const scheduled = async (): Promise<string[]> => {
    const { rows } = await sql<{ key: string }>`
      SELECT key FROM pgboss.schedule WHERE name = 'schedules' ORDER BY key`.execute(
      svc.service.ctx.db,
    );
    return rows.map((r) => r.key);
  };
  const parse = (text: string): ScheduleRecord => JSON.parse(text) as ScheduleRecord;
  const create = async (body: Record<string, unknown>, projectId = fx.project.id) => {
    const res = await svc.request('POST', path(projectId), { body });
    assert.equal(res.status, 201, res.text);
    return parse(res.text);
  };

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
  });
  after(() => svc.close());

  describe('happy path', () => {
    test('create, get, list, pause, resume, delete', async () => {
      const made = await create({
        cron: '0 6 * * 1',
        timezone: 'Europe/Paris',
        prompt: 'update the dependencies\nand run the tests',
        mode: 'ask',
      });
      assert.match(made.id, SCHEDULE_ID);
      assert.deepEqual(Object.keys(made).sort(), FIELDS);
      assert.equal(made.name, 'update the dependencies');
      assert.equal(made.mode, 'ask');
      assert.equal(made.model, null);
      assert.equal(made.paused, false);
      assert.equal(made.lastFiring, null);
      assert.equal(made.createdBy?.kind, 'key');
      assert.ok((await scheduled()).includes(made.id), 'pg-boss fires it');

      const got = await svc.request('GET', path(fx.project.id, `/${made.id}`));
      assert.equal(got.status, 200);
      assert.deepEqual(parse(got.text), made);
      const list = await svc.request('GET', path(fx.project.id));
      assert.deepEqual(
        (JSON.parse(list.text) as { schedules: ScheduleRecord[] }).schedules.map((s) => s.id),
        [made.id],
      );

      const paused = await svc.request('PATCH', path(fx.project.id, `/${made.id}`), {
        body: { paused: true },
      });
      assert.equal(paused.status, 200, paused.text);
      assert.equal(parse(paused.text).paused, true);
      assert.ok(!(await scheduled()).includes(made.id), 'a paused schedule is not fired');
      const resumed = await svc.request('PATCH', path(fx.project.id, `/${made.id}`), {
        body: { paused: false, cron: '30 7 * * *', name: 'daily', model: null },
      });
      assert.equal(resumed.status, 200, resumed.text);
      assert.equal(parse(resumed.text).cron, '30 7 * * *');
      assert.equal(parse(resumed.text).name, 'daily');
      assert.ok((await scheduled()).includes(made.id));

      const deleted = await svc.request('DELETE', path(fx.project.id, `/${made.id}`));
      assert.equal(deleted.status, 204);
      assert.ok(!(await scheduled()).includes(made.id));
      const gone = await svc.request('GET', path(fx.project.id, `/${made.id}`));
      assertError(gone, 404, 'not_found');

      const actions = await svc.service.ctx.db
        .selectFrom('audit_log')
        .select(['action', 'outcome'])
        .where('target_id', '=', made.id)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        actions.map((a) => `${a.action} ${a.outcome}`),
        [
          'schedule.create success',
          'schedule.update success',
          'schedule.update success',
          'schedule.delete success',
        ],
      );
    });

    test('a schedule created paused is not given to the scheduler', async () => {
      const made = await create({ cron: '* * * * *', prompt: 'complete', paused: true });
      assert.equal(made.paused, true);
      assert.ok(!(await scheduled()).includes(made.id));
    });
  });

  describe('errors', () => {
    const refused = async (
      method: string,
      p: string,
      body: unknown,
      status: number,
      code: string,
      words?: RegExp,
    ) => {
      const before = await scheduled();
      const res = await unchanged(svc, () =>
        svc.request(method, p, body === undefined ? {} : { body }),
      );
      assertError(res, status, code);
      if (words) assert.match(res.json.error ?? '', words);
      assert.deepEqual(await scheduled(), before, 'the scheduler was told nothing');
    };

    test('400 for a cron pg-boss cannot read, naming it', async () => {
      for (const cron of ['not a cron', '61 * * * *', '* * * * * * * *', '']) {
        await refused(
          'POST',
          path(fx.project.id),
          { cron, prompt: 'x' },
          400,
          'bad_request',
          /cron/,
        );
      }
    });

    test('400 for a time zone that is not IANA', async () => {
      for (const timezone of ['Mars/Olympus', 'Europe/Pariss', '']) {
        await refused(
          'POST',
          path(fx.project.id),
          { cron: '0 6 * * *', timezone, prompt: 'x' },
          400,
          'bad_request',
          /timezone/,
        );
      }
    });

    test('400 for a bad prompt, mode, model, name or an unknown field', async () => {
      const base = { cron: '0 6 * * *', prompt: 'x' };
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ cron: '0 6 * * *' }, /"prompt" is required/],
        [{ prompt: 'x' }, /"cron" is required/],
        [{ ...base, prompt: '   ' }, /prompt/],
        [{ ...base, mode: 'write' }, /"mode" must be one of code, ask, plan/],
        [{ ...base, model: 'gpt' }, /provider:model/],
        [{ ...base, name: '' }, /"name"/],
        [{ ...base, paused: 'yes' }, /"paused"/],
        [{ ...base, every: 'day' }, /every/],
      ];
      for (const [body, words] of cases) {
        await refused('POST', path(fx.project.id), body, 400, 'bad_request', words);
      }
      await refused(
        'POST',
        path(fx.project.id),
        { ...base, model: 'nosuch:model' },
        400,
        'model_unavailable',
      );
    });

    test('400 for an update with nothing to change or a bad field; 404 for unknown ids', async () => {
      const made = await create({ cron: '0 6 * * *', prompt: 'x' });
      const one = path(fx.project.id, `/${made.id}`);
      await refused('PATCH', one, {}, 400, 'bad_request', /at least one/);
      await refused('PATCH', one, { cron: 'every day' }, 400, 'bad_request', /cron/);
      await refused('PATCH', one, { timezone: 'Nowhere/Else' }, 400, 'bad_request', /timezone/);
      await refused('PATCH', one, { paused: 1 }, 400, 'bad_request', /paused/);
      const unknown = newId('sch');
      for (const method of ['GET', 'DELETE']) {
        await refused(method, path(fx.project.id, `/${unknown}`), undefined, 404, 'not_found');
        await refused(method, path(fx.project.id, '/nope'), undefined, 404, 'not_found');
        // Another project's schedule is not found through this one.
        await refused(method, path(fx.otherProject.id, `/${made.id}`), undefined, 404, 'not_found');
      }
      await refused(
        'PATCH',
        path(fx.project.id, `/${unknown}`),
        { paused: true },
        404,
        'not_found',
      );
      await refused('GET', path(randomProjectId()), undefined, 404, 'not_found');
      await refused(
        'POST',
        path(randomProjectId()),
        { cron: '0 6 * * *', prompt: 'x' },
        404,
        'not_found',
      );
    });
  });

  describe('security', () => {
    const spec: RouteSpec = {
      method: 'POST',
      scope: 'admin',
      path: ({ projectId }) => path(projectId),
      body: () => ({ cron: '0 6 * * *', prompt: 'x' }),
    };
    authCases(spec, fixture);
    jsonBodyCases(spec, fixture);
    authCases({ method: 'GET', scope: 'admin', path: ({ projectId }) => path(projectId) }, fixture);
  });
});
