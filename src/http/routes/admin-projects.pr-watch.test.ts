// The pull request watch's settings of a project through the admin API (POST and PATCH
// /v2/admin/projects): autofixAttempts, autofixChecks, autoMerge, mergeMethod and
// conflictStrategy. Their defaults, a change kept by an update that does not name them, and a
// 400 naming the field for each bad value, with nothing stored or changed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, unchanged } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import type { ProjectRecord } from '../../records/project.ts';

const REPO = 'https://github.com/acme/widgets.git';

/** The watch's settings of a record, to compare in one assertion. */
function watchOf(project: ProjectRecord) {
  const { autofixAttempts, autofixChecks, autoMerge, mergeMethod, conflictStrategy } = project;
  return { autofixAttempts, autofixChecks, autoMerge, mergeMethod, conflictStrategy };
}

const DEFAULTS = {
  autofixAttempts: 2,
  autofixChecks: null,
  autoMerge: 'off',
  mergeMethod: 'merge',
  conflictStrategy: 'merge',
};

describe("a project's pull request watch settings", () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ worker: false });
    projectId = (await svc.createProject({ name: 'watched' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const create = (fields: Record<string, unknown>) =>
    svc.request('POST', '/v2/admin/projects', {
      body: { name: 'watch', repository: REPO, ...fields },
    });
  const patch = (id: string, fields: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${id}`, { body: fields });

  test('the defaults: two autofix turns, every check, no merge, merge commits, merging the base', async () => {
    const res = await create({});
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(watchOf(res.json as ProjectRecord), DEFAULTS);
  });

  test('set at creation, changed, kept by an update that does not name them, and reset', async () => {
    const chosen = {
      autofixAttempts: 5,
      autofixChecks: ['ci/*', 'build (ubuntu, node 24)', 'lint'],
      autoMerge: 'green-and-approved',
      mergeMethod: 'squash',
      conflictStrategy: 'rebase',
    };
    const res = await create(chosen);
    assert.equal(res.status, 201, res.text);
    const project = res.json as ProjectRecord;
    assert.deepEqual(watchOf(project), chosen);

    const renamed = await patch(project.id, { name: 'renamed' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(watchOf(renamed.json as ProjectRecord), chosen);

    const changed = await patch(project.id, {
      autofixAttempts: 0,
      autofixChecks: ['  e2e  ', 'e2e', 'unit'],
      autoMerge: 'green',
      mergeMethod: 'rebase',
    });
    assert.equal(changed.status, 200, changed.text);
    // Each glob trimmed, and one given twice kept once.
    assert.deepEqual(watchOf(changed.json as ProjectRecord), {
      autofixAttempts: 0,
      autofixChecks: ['e2e', 'unit'],
      autoMerge: 'green',
      mergeMethod: 'rebase',
      conflictStrategy: 'rebase',
    });

    const reset = await patch(project.id, { ...DEFAULTS, autofixAttempts: 10 });
    assert.equal(reset.status, 200, reset.text);
    assert.deepEqual(watchOf(reset.json as ProjectRecord), { ...DEFAULTS, autofixAttempts: 10 });
    const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.deepEqual(read.json, reset.json);
  });

  test('400 naming the field for each bad value, on create and update; nothing is written', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      ...[-1, 11, 1.5, '2', null, true].map(
        (autofixAttempts): [Record<string, unknown>, RegExp] => [
          { autofixAttempts },
          /"autofixAttempts" must be a whole number from 0 to 10/,
        ],
      ),
      ...[
        [],
        [''],
        ['   '],
        ['c'.repeat(201)],
        ['ci\nbuild'],
        ['tab\there'],
        [42],
        'ci/*',
        Array.from({ length: 51 }, (_, i) => `check-${i}`),
      ].map((autofixChecks): [Record<string, unknown>, RegExp] => [
        { autofixChecks },
        /"autofixChecks" must be a list of 1 to 50 globs of check names/,
      ]),
      ...['on', 'GREEN', '', null, true].map((autoMerge): [Record<string, unknown>, RegExp] => [
        { autoMerge },
        /"autoMerge" must be one of off, green, green-and-approved/,
      ]),
      ...['fast-forward', 'Squash', null].map((mergeMethod): [Record<string, unknown>, RegExp] => [
        { mergeMethod },
        /"mergeMethod" must be one of merge, squash, rebase/,
      ]),
      ...['squash', 'cherry-pick', null].map(
        (conflictStrategy): [Record<string, unknown>, RegExp] => [
          { conflictStrategy },
          /"conflictStrategy" must be one of merge, rebase/,
        ],
      ),
    ];
    for (const [fields, pattern] of cases) {
      for (const act of [() => create(fields), () => patch(projectId, fields)]) {
        const res = await unchanged(svc, act);
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', pattern, JSON.stringify(fields));
      }
    }
    // The longest and the most globs are accepted.
    const longest = await patch(projectId, {
      autofixChecks: Array.from({ length: 50 }, (_, i) => `${i}-${'c'.repeat(190)}`),
    });
    assert.equal(longest.status, 200, longest.text);
  });
});
