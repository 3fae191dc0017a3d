// The dashboard's schedules page over plain HTTP, as a browser without scripts uses it: the list,
// the create form (and its refusal shown on the form, nothing stored), pause, resume, delete,
// and the last firing with its job.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { getPage, postForm, sessionCookie } from '../../../test/support/dashboard.ts';
import { unchanged } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { fire } from './fire.ts';

describe('dashboard schedules page', () => {
  let svc: TestService;
  let cookie: string;
  let projectId: string;
  const rows = () => svc.service.ctx.db.selectFrom('schedules').selectAll().execute();

  before(async () => {
    svc = await startTestService({ worker: false });
    cookie = await sessionCookie(svc, svc.adminKey);
    projectId = (await svc.createProject({ name: 'paged' })).id;
  });
  after(() => svc?.close());

  test('create, fire, pause, resume and delete from the page', async () => {
    const base = `/projects/${projectId}/schedules`;
    assert.match((await getPage(svc, cookie, base)).text, /No schedules yet/);
    const made = await postForm(svc, cookie, base, {
      name: 'nightly <triage>',
      cron: '0 2 * * *',
      timezone: 'Europe/Paris',
      prompt: 'triage the new issues',
      mode: 'ask',
      model: '',
    });
    assert.equal(made.status, 201, made.text);
    assert.match(made.text, /nightly &lt;triage&gt;/);
    assert.doesNotMatch(made.text, /<triage>/);
    const [row] = await rows();
    assert.equal(row?.mode, 'ask');
    assert.equal(row?.timezone, 'Europe/Paris');
    assert.match((await getPage(svc, cookie, base)).text, /not fired yet/);

    await fire(svc.service.ctx, { id: randomUUID(), data: { scheduleId: row?.id ?? '' } });
    const fired = await svc.service.ctx.db
      .selectFrom('schedules')
      .select('last_job_id')
      .executeTakeFirstOrThrow();
    assert.ok(fired.last_job_id);
    assert.ok(
      (await getPage(svc, cookie, base)).text.includes(
        `href="/projects/${projectId}/jobs/${fired.last_job_id}"`,
      ),
    );

    const paused = await postForm(svc, cookie, `${base}/${row?.id}/paused`, { paused: 'true' });
    assert.equal(paused.status, 303);
    assert.equal((await rows())[0]?.paused, true);
    await postForm(svc, cookie, `${base}/${row?.id}/paused`, { paused: 'false' });
    assert.equal((await rows())[0]?.paused, false);
    const deleted = await postForm(svc, cookie, `${base}/${row?.id}/delete`, {});
    assert.equal(deleted.status, 303);
    assert.equal((await rows()).length, 0);
  });

  test('a refused form is shown again with the reason, and nothing is stored', async () => {
    const base = `/projects/${projectId}/schedules`;
    const refused = await unchanged(svc, () =>
      postForm(svc, cookie, base, { cron: 'often', prompt: 'x', timezone: 'UTC', mode: 'code' }),
    );
    assert.equal(refused.status, 400);
    assert.match(refused.text, /is not a cron expression/);
    assert.match(refused.text, /value="often"/);
  });
});
