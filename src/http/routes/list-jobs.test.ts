// GET /v2/agent/{projectId}/jobs: newest first, limit, cursor paging (also over jobs created in
// the same instant), the status filter, the 400s of its query, and the common auth cases.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  createJobId,
  createRouteFixture,
  JOB_FIELDS,
  type RouteFixture,
  type RouteSpec,
  SCRIPTED_ENV,
  scriptedRunner,
  turnStarted,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';

const spec: RouteSpec = {
  method: 'GET',
  scope: 'project',
  path: ({ projectId }) => `/v2/agent/${projectId}/jobs`,
};

describe('GET /v2/agent/{projectId}/jobs', () => {
  // A worker with the scripted runner, so the status filter has jobs in every state.
  let svc: TestService;
  let fx: RouteFixture;
  const runner = scriptedRunner();
  const fixture = () => fx;

  before(async () => {
    svc = await startTestService({ runner, env: SCRIPTED_ENV });
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await svc?.close();
  });

  const list = (projectId: string, query = '', key?: string) =>
    svc.request('GET', `/v2/agent/${projectId}/jobs${query}`, key ? { key } : {});

  /** Follows nextCursor to the end; returns the ids in order and the page sizes. */
  const pageThrough = async (projectId: string, query: string) => {
    const ids: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 200; page++) {
      const res = await list(
        projectId,
        `?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      assert.equal(res.status, 200, res.text);
      const jobs = res.json.jobs ?? [];
      ids.push(...jobs.map((j) => j.id));
      sizes.push(jobs.length);
      cursor = res.json.nextCursor ?? null;
      if (cursor === null) return { ids, sizes };
      assert.equal(typeof cursor, 'string');
    }
    throw new Error('paging did not end');
  };

  /** Creates jobs one after another and returns their ids, oldest first. */
  const createJobs = async (projectId: string, n: number, prompt = 'list me') => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await createJobId(svc, projectId, `${prompt} ${i}`));
    return ids;
  };

  describe('happy path', () => {
    test('a project without jobs gives an empty page', async () => {
      const project = await svc.createProject({ name: 'empty' });
      const res = await list(project.id);
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, { jobs: [], nextCursor: null });
    });

    test('newest first, full job records, only the project’s own jobs', async () => {
      const project = await svc.createProject({ name: 'order' });
      const { key } = await svc.createProjectKey(project.id);
      const ids = await createJobs(project.id, 3);
      const res = await list(project.id, '', key);
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.json).sort(), ['jobs', 'nextCursor']);
      assert.deepEqual(
        res.json.jobs?.map((j) => j.id),
        [...ids].reverse(),
      );
      assert.equal(res.json.nextCursor, null);
      for (const job of res.json.jobs ?? []) {
        assert.deepEqual(Object.keys(job).sort(), JOB_FIELDS);
        assert.equal(job.projectId, project.id);
        assert.equal(job.branch, `errand/${job.id}`);
      }
      const read = await svc.request('GET', `/v2/agent/${project.id}/job/${ids[0]}`);
      const listed = res.json.jobs?.at(-1);
      assert.equal(listed?.id, read.json.id);
      assert.equal(listed?.createdAt, read.json.createdAt);
      assert.deepEqual(listed?.source, read.json.source);
      // Other projects' jobs stay out, the other way round too.
      const mine = await list(fx.project.id, '?limit=100', fx.projectKey);
      assert.ok(mine.json.jobs?.some((j) => j.id === fx.jobId));
      assert.ok(!mine.json.jobs?.some((j) => j.id === fx.otherJobId));
      const theirs = await list(fx.otherProject.id, '?limit=100', fx.otherProjectKey);
      assert.ok(theirs.json.jobs?.some((j) => j.id === fx.otherJobId));
      assert.ok(!theirs.json.jobs?.some((j) => j.id === fx.jobId));
    });

    test('limit 2 pages through 5 jobs: every job once, in order', async () => {
      const project = await svc.createProject({ name: 'paging' });
      const ids = await createJobs(project.id, 5);
      const { ids: paged, sizes } = await pageThrough(project.id, 'limit=2');
      assert.deepEqual(sizes, [2, 2, 1]);
      assert.deepEqual(paged, [...ids].reverse());
    });

    test('no empty last page: 4 jobs with limit 2 give two pages', async () => {
      const project = await svc.createProject({ name: 'even' });
      const ids = await createJobs(project.id, 4);
      const { ids: paged, sizes } = await pageThrough(project.id, 'limit=2');
      assert.deepEqual(sizes, [2, 2]);
      assert.deepEqual(paged, [...ids].reverse());
    });

    test('jobs created in parallel are paged without gaps or repeats', async () => {
      const project = await svc.createProject({ name: 'parallel' });
      const created = await Promise.all(
        Array.from({ length: 25 }, (_, i) => createJobId(svc, project.id, `parallel ${i}`)),
      );
      const all = await list(project.id, '?limit=100');
      const order = all.json.jobs?.map((j) => j.id) ?? [];
      assert.deepEqual([...order].sort(), [...created].sort());
      // Newest first: createdAt never increases along the list.
      const times = all.json.jobs?.map((j) => Date.parse(j.createdAt)) ?? [];
      assert.ok(times.every((t, i) => i === 0 || t <= (times[i - 1] ?? 0)));
      // The default page is 20.
      const first = await list(project.id);
      assert.equal(first.json.jobs?.length, 20);
      assert.ok(first.json.nextCursor);
      for (const limit of [1, 3, 7, 20]) {
        const { ids } = await pageThrough(project.id, `limit=${limit}`);
        assert.deepEqual(ids, order, `paging with limit ${limit}`);
      }
    });

    test('jobs created within one millisecond are paged without gaps', async () => {
      // Timestamps keep microseconds; three jobs 100 µs apart, written as the API would.
      const project = await svc.createProject({ name: 'same millisecond' });
      const ids = [
        'job_SameMs00000000000001',
        'job_SameMs00000000000002',
        'job_SameMs00000000000003',
      ];
      for (const [i, id] of ids.entries()) {
        await svc.service.ctx.db
          .insertInto('jobs')
          .values({
            id,
            project_id: project.id,
            status: 'completed',
            repository: project.repository,
            ref: project.ref,
            branch: `errand/${id}`,
            model: 'anthropic:claude-sonnet-4-5',
            pr_link: null,
            pr_number: null,
            error: null,
            turn_count: 1,
            archived_at: null,
            created_at: `2026-01-01T00:00:00.000${i + 1}00Z`,
            updated_at: '2026-01-01T00:00:01Z',
          })
          .execute();
      }
      const all = await list(project.id);
      assert.deepEqual(
        all.json.jobs?.map((j) => j.id),
        [...ids].reverse(),
      );
      for (const limit of [1, 2]) {
        const { ids: paged } = await pageThrough(project.id, `limit=${limit}`);
        assert.deepEqual(paged, [...ids].reverse(), `paging with limit ${limit}`);
      }
    });

    test('limit 1 and limit 100 are accepted', async () => {
      await createJobId(svc, fx.project.id, 'a second job for paging');
      const one = await list(fx.project.id, '?limit=1');
      assert.equal(one.status, 200);
      assert.equal(one.json.jobs?.length, 1);
      assert.ok(one.json.nextCursor);
      const hundred = await list(fx.project.id, '?limit=100');
      assert.equal(hundred.status, 200);
      assert.equal(hundred.json.jobs?.[0]?.id, one.json.jobs?.[0]?.id);
    });

    test('the status filter, alone and with paging', async () => {
      const project = await svc.createProject({ name: 'statuses' });
      const completed = await createJobId(svc, project.id, 'complete this');
      const failed = await createJobId(svc, project.id, 'fail this');
      const active1 = await createJobId(svc, project.id, 'hold this');
      const active2 = await createJobId(svc, project.id, 'hold this too');
      const archived = await createJobId(svc, project.id, 'hold and archive');
      await turnStarted(runner, archived);
      const res = await svc.request('POST', `/v2/agent/${project.id}/job/${archived}/archive`);
      assert.equal(res.status, 200);
      await waitFor('the turns to settle', async () => {
        const all = await list(project.id, '?limit=100');
        const status = (id: string) => all.json.jobs?.find((j) => j.id === id)?.status;
        return status(completed) === 'completed' && status(failed) === 'failed' ? true : undefined;
      });
      const expected: Record<string, string[]> = {
        active: [active2, active1],
        completed: [completed],
        failed: [failed],
        archived: [archived],
      };
      for (const [status, ids] of Object.entries(expected)) {
        const page = await list(project.id, `?status=${status}`);
        assert.equal(page.status, 200);
        assert.deepEqual(
          page.json.jobs?.map((j) => j.id),
          ids,
          `status=${status}`,
        );
        assert.ok(page.json.jobs?.every((j) => j.status === status));
      }
      const paged = await pageThrough(project.id, 'status=active&limit=1');
      assert.deepEqual(paged.ids, [active2, active1]);
      assert.deepEqual(paged.sizes, [1, 1]);
      for (const id of [active1, active2]) {
        await svc.request('POST', `/v2/agent/${project.id}/job/${id}/archive`);
      }
    });
  });

  describe('errors', () => {
    const badQuery = async (query: string) => {
      const res = await unchanged(svc, () => list(fx.project.id, query, fx.projectKey));
      assertError(res, 400, 'bad_request');
      return res;
    };

    test('400 for a limit outside 1..100 or not an integer', async () => {
      for (const limit of ['0', '101', 'x', '-1', '1.5', '', ' ', '1000000', 'NaN', '2&limit=3']) {
        const res = await badQuery(`?limit=${limit}`);
        assert.match(res.json.error ?? '', /limit/);
      }
    });

    test('400 for a cursor this API did not return', async () => {
      const b64 = (value: unknown) =>
        Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString(
          'base64url',
        );
      await createJobId(svc, fx.project.id, 'another job for paging');
      const good = await list(fx.project.id, '?limit=1');
      const cursor = good.json.nextCursor ?? '';
      assert.ok(cursor);
      for (const bad of [
        'garbage',
        '!!!',
        b64('not json'),
        b64({}),
        b64([]),
        b64({ createdAt: 'yesterday', id: fx.jobId }),
        b64({ createdAt: new Date().toISOString(), id: 'job_short' }),
        b64({ createdAt: new Date().toISOString() }),
        b64({ createdAt: 5, id: fx.jobId }),
        fx.jobId,
      ]) {
        const res = await badQuery(`?cursor=${encodeURIComponent(bad)}`);
        assert.match(res.json.error ?? '', /cursor/);
      }
      await badQuery(`?cursor=${cursor}&cursor=${cursor}`);
    });

    test('400 for a status that is not a job status', async () => {
      for (const status of ['done', 'ACTIVE', '', 'active,failed', 'active&status=failed']) {
        const res = await badQuery(`?status=${status}`);
        assert.match(res.json.error ?? '', /status/);
      }
    });
  });

  describe('security', () => {
    authCases(spec, fixture);

    test("a cursor from another project's listing shows only this project's jobs", async () => {
      await createJobs(fx.otherProject.id, 2, 'other');
      const theirs = await list(fx.otherProject.id, '?limit=1', fx.otherProjectKey);
      const cursor = theirs.json.nextCursor ?? '';
      assert.ok(cursor);
      const res = await list(fx.project.id, `?cursor=${cursor}&limit=100`, fx.projectKey);
      assert.equal(res.status, 200);
      assert.ok(res.json.jobs?.every((j) => j.projectId === fx.project.id));
    });
  });
});
