// A project's checkCommand through the admin API (best-of-N, docs/eval.md): none by default;
// set on create and update, trimmed, shown by GET, kept by an update that does not name it,
// cleared by null or ''; the audit row names the field, never its value; a command of only
// spaces, over 4000 characters or not a string is a 400 naming it that stores nothing.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, unchanged } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import type { ProjectRecord } from '../../records/project.ts';

const REPO = 'https://github.com/acme/widgets.git';

describe("a project's checkCommand", () => {
  let svc: TestService;

  before(async () => {
    svc = await startTestService({ worker: false });
  });
  after(async () => {
    await svc?.close();
  });

  const create = (fields: Record<string, unknown> = {}) =>
    svc.request('POST', '/v2/admin/projects', {
      body: { name: 'checked', repository: REPO, ...fields },
    });
  const patch = (id: string, fields: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${id}`, { body: fields });
  const show = async (id: string) =>
    (await svc.request('GET', `/v2/admin/projects/${id}`)).json as ProjectRecord;
  const stored = async (id: string) =>
    (
      await svc.service.ctx.db
        .selectFrom('projects')
        .select('check_command')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).check_command;

  test('none by default; set, trimmed, shown, kept, changed and cleared', async () => {
    const plain = await create();
    assert.equal(plain.status, 201, plain.text);
    assert.equal((plain.json as ProjectRecord).checkCommand, null);

    const made = await create({ checkCommand: '  npm test -- --run  ' });
    assert.equal(made.status, 201, made.text);
    const project = made.json as ProjectRecord;
    assert.equal(project.checkCommand, 'npm test -- --run');
    assert.equal(await stored(project.id), 'npm test -- --run');
    assert.equal((await show(project.id)).checkCommand, 'npm test -- --run');

    const renamed = await patch(project.id, { name: 'renamed' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal((renamed.json as ProjectRecord).checkCommand, 'npm test -- --run');

    // A shell command as it is: quotes, pipes and newlines are the shell's.
    const script = "set -e\nnpm ci >/dev/null\ngrep -q 'right answer' answer.txt | cat";
    const changed = await patch(project.id, { checkCommand: script });
    assert.equal(changed.status, 200, changed.text);
    assert.equal((changed.json as ProjectRecord).checkCommand, script);
    assert.equal(await stored(project.id), script);

    const long = `${'x'.repeat(3992)} && true`;
    assert.equal(long.length, 4000);
    const longest = await patch(project.id, { checkCommand: long });
    assert.equal(longest.status, 200, longest.text);
    assert.equal((longest.json as ProjectRecord).checkCommand, long);

    const emptied = await patch(project.id, { checkCommand: '' });
    assert.equal(emptied.status, 200, emptied.text);
    assert.equal((emptied.json as ProjectRecord).checkCommand, null);
    assert.equal(await stored(project.id), null);

    await patch(project.id, { checkCommand: 'make check' });
    const nulled = await patch(project.id, { checkCommand: null });
    assert.equal(nulled.status, 200, nulled.text);
    assert.equal((nulled.json as ProjectRecord).checkCommand, null);
    assert.deepEqual(await show(project.id), nulled.json);
  });

  test('the audit row of a change names checkCommand, never its value', async () => {
    const made = await create({ checkCommand: 'echo created-secretish' });
    const project = made.json as ProjectRecord;
    await patch(project.id, { checkCommand: 'echo updated-secretish' });
    const rows = await svc.service.ctx.db
      .selectFrom('audit_log')
      .select(['action', 'target_id', 'details'])
      .where('target_id', '=', project.id)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.action),
      ['project.create', 'project.update'],
    );
    assert.deepEqual(rows[1]?.details, { fields: ['checkCommand'] });
    assert.ok(!JSON.stringify(rows).includes('secretish'), 'a command is in the audit log');
  });

  test('400 for a bad command, naming it; nothing is stored or changed', async () => {
    const project = (await create({ checkCommand: 'npm test' })).json as ProjectRecord;
    const cases: unknown[] = [' ', '   \n\t ', 'x'.repeat(4001), 42, true, ['npm', 'test'], {}];
    for (const checkCommand of cases) {
      const updated = await unchanged(svc, () => patch(project.id, { checkCommand }));
      assertError(updated, 400, 'bad_request');
      assert.match(
        updated.json.error ?? '',
        /^"checkCommand" must be a command of at most 4000 characters with at least one non-space character, or null \(or empty\) for none$/,
        JSON.stringify(checkCommand),
      );
      const created = await unchanged(svc, () => create({ checkCommand }));
      assertError(created, 400, 'bad_request');
      assert.match(created.json.error ?? '', /"checkCommand"/);
    }
    assert.equal((await show(project.id)).checkCommand, 'npm test');
  });
});
