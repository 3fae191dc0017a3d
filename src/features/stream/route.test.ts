// GET /v2/agent/{projectId}/job/{id}/events?after=SEQ&limit=N: a job's progress log in order,
// paged by `after`; the 400s of its query, the 404s of the job id and the common auth cases.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  createJobId,
  createRouteFixture,
  ISO_UTC,
  jobIdCases,
  type RouteFixture,
  type RouteSpec,
  SCRIPTED_ENV,
  scriptedRunner,
  unchanged,
} from '../../../test/support/route-cases.ts';
import {
  type ApiBody,
  startTestService,
  type TestService,
  waitFor,
} from '../../../test/support/service.ts';
import type { EventRecord } from '../../events/log.ts';

const spec: RouteSpec = {
  method: 'GET',
  scope: 'project',
  path: ({ projectId, jobId }) => `/v2/agent/${projectId}/job/${jobId}/events`,
};

describe('GET /v2/agent/{projectId}/job/{id}/events', () => {
  let svc: TestService;
  let fx: RouteFixture;
  /** A finished job whose turn emitted three steps, shared by the read-only tests. */
  let stepsJob: string;
  let stepsEvents: EventRecord[];
  /** That job's record as its create answered it (201) and as GET answers it once completed. */
  let stepsCreated: ApiBody;
  let stepsCompleted: ApiBody;
  const fixture = () => fx;

  const events = (jobId: string, query = '', key?: string) =>
    svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}/events${query}`, {
      key: key ?? fx.projectKey,
    });
  const waitForStatus = (jobId: string, status: string) =>
    waitFor(`job ${jobId} to be ${status}`, async () => {
      const res = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}`);
      return res.json.status === status ? res : undefined;
    });

  before(async () => {
    svc = await startTestService({ runner: scriptedRunner(), env: SCRIPTED_ENV });
    fx = await createRouteFixture(svc);
    const created = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
      body: { prompt: 'steps please' },
    });
    assert.equal(created.status, 201, created.text);
    stepsCreated = created.json;
    stepsJob = created.json.id ?? '';
    stepsCompleted = (await waitForStatus(stepsJob, 'completed')).json;
    stepsEvents = (await events(stepsJob)).json.events ?? [];
  });
  after(async () => {
    await svc?.close();
  });

  describe('happy path', () => {
    test("a job's events in order, each in full: its status changes and its turn's", async () => {
      const res = await events(stepsJob);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.json).sort(), ['events', 'nextAfter']);
      const list = res.json.events ?? [];
      assert.deepEqual(
        list.map((e) => [e.turn, e.type]),
        [
          [null, 'job.created'],
          [1, 'turn.started'],
          [1, 'command.started'],
          [1, 'command.started'],
          [1, 'command.started'],
          [1, 'turn.finished'],
          [null, 'job.completed'],
        ],
      );
      assert.deepEqual(
        list.filter((e) => e.type === 'command.started').map((e) => e.data),
        [
          { command: 'one', cwd: '.' },
          { command: 'two', cwd: '.' },
          { command: 'three', cwd: '.' },
        ],
      );
      assert.equal((list.at(-2)?.data as { summary?: string } | undefined)?.summary, 'three steps');
      // A status change carries the job's record as the API answered it at that moment: the
      // create's 201 body, and the completed job that GET returns from then on.
      assert.deepEqual(list[0]?.data, { job: stepsCreated });
      assert.equal(stepsCreated.status, 'active');
      assert.deepEqual(list.at(-1)?.data, { job: stepsCompleted });
      assert.equal(stepsCompleted.status, 'completed');
      for (const [i, event] of list.entries()) {
        assert.deepEqual(Object.keys(event).sort(), ['at', 'data', 'seq', 'turn', 'type']);
        assert.ok(Number.isSafeInteger(event.seq) && event.seq > 0);
        if (i > 0) assert.ok(event.seq > (list[i - 1]?.seq ?? 0), 'seq must increase');
        assert.match(event.at, ISO_UTC);
      }
      assert.equal(res.json.nextAfter, list.at(-1)?.seq);
      assert.deepEqual(list, stepsEvents);
    });

    test('after=N gives only the events after seq N', async () => {
      const seqs = stepsEvents.map((e) => e.seq);
      const afterSecond = await events(stepsJob, `?after=${seqs[1]}`);
      assert.equal(afterSecond.status, 200);
      assert.deepEqual(afterSecond.json.events, stepsEvents.slice(2));
      assert.deepEqual((await events(stepsJob, '?after=0')).json.events, stepsEvents);
      const last = seqs.at(-1) ?? 0;
      const none = await events(stepsJob, `?after=${last}`);
      assert.deepEqual(none.json, { events: [], nextAfter: last });
      // An `after` far beyond the log is not an error: nothing yet.
      const far = await events(stepsJob, `?after=${last + 1_000_000}`);
      assert.deepEqual(far.json, { events: [], nextAfter: last + 1_000_000 });
    });

    test('limit and nextAfter page through every event once', async () => {
      const seen: EventRecord[] = [];
      const sizes: number[] = [];
      let afterSeq = 0;
      for (let i = 0; i < 10; i++) {
        const res = await events(stepsJob, `?after=${afterSeq}&limit=2`);
        assert.equal(res.status, 200);
        const page = res.json.events ?? [];
        sizes.push(page.length);
        seen.push(...page);
        if (page.length === 0) break;
        afterSeq = res.json.nextAfter ?? 0;
      }
      assert.deepEqual(sizes, [2, 2, 2, 1, 0]);
      assert.deepEqual(seen, stepsEvents);
      for (const limit of ['1', '1000']) {
        assert.equal((await events(stepsJob, `?limit=${limit}`)).status, 200);
      }
    });

    test("only the job's own events", async () => {
      const other = await createJobId(svc, fx.project.id, 'steps for another job');
      await waitForStatus(other, 'completed');
      const mine = stepsEvents.map((e) => e.seq);
      const theirs = ((await events(other)).json.events ?? []).map((e) => e.seq);
      assert.equal(theirs.length, 7);
      assert.ok(theirs.every((seq) => !mine.includes(seq)));
      // Reading from before the other job's events still lists only this job's.
      assert.deepEqual((await events(stepsJob, '?after=0')).json.events, stepsEvents);
    });

    test('a failed turn and the archive are in the log', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'fail for the log');
      const failedJob = (await waitForStatus(jobId, 'failed')).json;
      const failed = (await events(jobId)).json.events ?? [];
      assert.deepEqual(
        failed.map((e) => [e.turn, e.type]),
        [
          [null, 'job.created'],
          [1, 'turn.started'],
          [1, 'turn.failed'],
          [null, 'job.failed'],
        ],
      );
      assert.match(
        (failed[2]?.data as { error?: string } | undefined)?.error ?? '',
        /not available/,
      );
      assert.deepEqual(failed[3]?.data, { job: failedJob });
      assert.match(failedJob.error ?? '', /not available/);
      const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${jobId}/archive`);
      assert.equal(archived.status, 200);
      assert.equal(archived.json.status, 'archived');
      const later = await events(jobId, `?after=${failed.at(-1)?.seq}`);
      assert.equal(later.json.events?.length, 1);
      assert.equal(later.json.events?.[0]?.type, 'job.archived');
      assert.equal(later.json.events?.[0]?.turn, null);
      assert.deepEqual(later.json.events?.[0]?.data, { job: archived.json });
    });
  });

  describe('errors', () => {
    jobIdCases(spec, fixture);

    const badQuery = async (query: string, param: string) => {
      const res = await unchanged(svc, () => events(stepsJob, query));
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', new RegExp(param));
    };

    test('400 for an `after` that is not a non-negative integer', async () => {
      for (const value of ['-1', 'x', '1.5', '9007199254740993', '1e400', 'NaN', '1&after=2']) {
        await badQuery(`?after=${value}`, 'after');
      }
    });

    test('400 for a limit outside 1..1000 or not an integer', async () => {
      for (const value of ['0', '1001', 'x', '2.5', '-3', '']) {
        await badQuery(`?limit=${value}`, 'limit');
      }
    });
  });

  describe('security', () => {
    authCases(spec, fixture);

    test("another project's key cannot read the events", async () => {
      assertError(await events(stepsJob, '', fx.otherProjectKey), 403, 'forbidden');
      const through = await svc.request(
        'GET',
        `/v2/agent/${fx.otherProject.id}/job/${stepsJob}/events`,
        { key: fx.otherProjectKey },
      );
      assertError(through, 404, 'not_found');
    });
  });
});
