// GET /v2/agent/{projectId}/job/{id}: the polling route. The record, its ETag and 304 answers,
// the 404s of the job id, and the common auth cases (no 304 without a valid key).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import {
  assertError,
  authCases,
  createRouteFixture,
  jobIdCases,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
} from '../../../test/support/route-cases.ts';
import {
  type HttpResult,
  startTestService,
  type TestService,
} from '../../../test/support/service.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { type JobView, toJobRecord } from '../../jobs/record.ts';
import { mintKey } from '../../keys/format.ts';
import { KeyChecker } from '../../keys/service.ts';
import { TokenChecker } from '../../users/tokens.ts';
import { AuthorizedJobReader } from '../auth.ts';
import { RenderedJobs } from './get-job.ts';

const spec: RouteSpec = {
  method: 'GET',
  scope: 'project',
  path: ({ projectId, jobId }) => `/v2/agent/${projectId}/job/${jobId}`,
};

const ETAG = /^"[A-Za-z0-9_-]{10,}"$/;

describe('GET /v2/agent/{projectId}/job/{id}', () => {
  // No worker: a job changes only when a test changes it, so ETags are stable.
  let svc: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await svc?.close();
  });

  const get = (jobId: string, headers: Record<string, string> = {}, key?: string) =>
    svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}`, {
      headers,
      key: key ?? fx.projectKey,
    });
  const create = async (prompt: string): Promise<HttpResult> => {
    const res = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
      body: { prompt },
      key: fx.projectKey,
    });
    assert.equal(res.status, 201, res.text);
    return res;
  };
  /** A reader as the route builds it; a failed write of a key's last use is kept to assert on. */
  const newReader = (ctx: AppContext = svc.service.ctx, timeoutMs?: number) => {
    const keyErrors: unknown[] = [];
    const keys = new KeyChecker(ctx.db, (err) => keyErrors.push(err));
    const tokens = new TokenChecker(ctx, (err) => keyErrors.push(err));
    return { reader: new AuthorizedJobReader(ctx, keys, tokens, timeoutMs), keyErrors };
  };
  const etagOf = (res: HttpResult): string => {
    const etag = res.headers.get('etag') ?? '';
    assert.match(etag, ETAG);
    return etag;
  };
  const assertNotModified = (res: HttpResult, etag: string) => {
    assert.equal(res.status, 304, res.text);
    assert.equal(res.text, '');
    assert.equal(res.headers.get('etag'), etag);
  };

  describe('reads of a version the caller has', () => {
    test('answer the version alone while the job is unchanged, and the job once it changed', async () => {
      const { reader } = newReader();
      const key = `Bearer ${fx.projectKey}`;
      const { json } = await create('version me');
      const id = json.id ?? '';
      const first = await reader.read(key, fx.project.id, id);
      assert.equal(first.job?.id, id);
      assert.match(first.version, /^\d+\/\d+$/);
      const same = await reader.read(key, fx.project.id, id, first.version);
      assert.deepEqual(same, { job: undefined, version: first.version });
      // Another version known (an old one, or garbage) reads the job in full.
      const other = await reader.read(key, fx.project.id, id, `${first.version}0`);
      assert.deepEqual(other, first);
      const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${id}/archive`, {
        key: fx.projectKey,
      });
      assert.equal(archived.status, 200, archived.text);
      const after = await reader.read(key, fx.project.id, id, first.version);
      assert.notEqual(after.version, first.version);
      assert.equal(after.job?.status, 'archived');
      // The key and the project are still checked on a version-only read.
      await assert.rejects(reader.read('Bearer errand_nope', fx.project.id, id, after.version), {
        status: 401,
      });
    });

    test('each read its own statement: a change of the job, the key or the project is seen by the next poll', async () => {
      // Other processes write to the database: no answer is kept, each poll reads.
      const { ctx } = svc.service;
      let statements = 0;
      const counted: AppContext = {
        ...ctx,
        prepared: (name, text, values) => {
          statements++;
          return ctx.prepared(name, text, values);
        },
      };
      const { reader, keyErrors } = newReader(counted);
      const held = await svc.createProjectKey(fx.project.id);
      const key = `Bearer ${held.key}`;
      const id = (await create('each poll reads')).json.id ?? '';
      const poll = (version: string) => reader.read(key, fx.project.id, id, version);
      const { version } = await reader.read(key, fx.project.id, id);
      statements = 0;
      for (let i = 0; i < 5; i++) {
        assert.deepEqual(await poll(version), { job: undefined, version });
        assert.equal(statements, i + 1);
      }

      // A change of the job, written as a worker writes it, is seen by the next poll.
      await ctx.db
        .updateTable('jobs')
        .set({ pr_link: 'https://forge.example/pr/9' })
        .where('id', '=', id)
        .execute();
      const changed = await poll(version);
      assert.notEqual(changed.version, version);
      assert.equal(changed.job?.pr_link, 'https://forge.example/pr/9');
      await poll(changed.version);
      // So is the key's revocation.
      const revoke = await svc.request('POST', `/v2/admin/keys/${held.id}/revoke`);
      assert.equal(revoke.status, 200, revoke.text);
      await assert.rejects(poll(changed.version), { status: 401 });
      // And the job's removal from the project, written straight to the database.
      const { reader: other } = newReader(counted);
      const projectKey = `Bearer ${fx.projectKey}`;
      const { version: current } = await other.read(projectKey, fx.project.id, id);
      await other.read(projectKey, fx.project.id, id, current);
      await ctx.db
        .updateTable('jobs')
        .set({ project_id: fx.otherProject.id })
        .where('id', '=', id)
        .execute();
      await assert.rejects(other.read(projectKey, fx.project.id, id, current), { status: 404 });
      assert.deepEqual(keyErrors, []);
    });

    test('the route answers the changed job after polls of the unchanged one', async () => {
      const { json } = await create('poll until archived');
      const id = json.id ?? '';
      const etag = etagOf(await get(id));
      assertNotModified(await get(id, { 'if-none-match': etag }), etag);
      assert.equal(etagOf(await get(id)), etag);
      const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${id}/archive`, {
        key: fx.projectKey,
      });
      assert.equal(archived.status, 200, archived.text);
      const res = await get(id, { 'if-none-match': etag });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.status, 'archived');
      assert.deepEqual(res.json, archived.json);
    });
  });

  describe('happy path', () => {
    test('200 with the job record as created, an ETag and Cache-Control: no-cache', async () => {
      const created = await create('read me back');
      const res = await get(created.json.id ?? '');
      assert.equal(res.status, 200, res.text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(res.json, created.json);
      assert.equal(res.headers.get('cache-control'), 'no-cache');
      const etag = etagOf(res);
      // The same record gives the same ETag, whoever asks.
      assert.equal(etagOf(await get(created.json.id ?? '')), etag);
      assert.equal(etagOf(await get(created.json.id ?? '', {}, svc.adminKey)), etag);
      // Another job has another ETag.
      assert.notEqual(etagOf(await get(fx.jobId)), etag);
    });

    test('304 with an empty body when If-None-Match matches', async () => {
      const { json } = await create('poll me');
      const id = json.id ?? '';
      const etag = etagOf(await get(id));
      for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, `"a",${etag} ,"b"`, '*']) {
        assertNotModified(await get(id, { 'if-none-match': ifNoneMatch }), etag);
      }
    });

    test('200 with the body when If-None-Match does not match', async () => {
      const { json } = await create('poll me too');
      const id = json.id ?? '';
      const etag = etagOf(await get(id));
      const otherEtag = etagOf(await get(fx.jobId));
      const last = etag.at(-2) === 'x' ? 'y' : 'x';
      const almost = `${etag.slice(0, -2)}${last}"`;
      for (const ifNoneMatch of [otherEtag, '"nope"', etag.slice(1, -1), almost, `W/${almost}`]) {
        const res = await get(id, { 'if-none-match': ifNoneMatch });
        assert.equal(res.status, 200, `If-None-Match ${ifNoneMatch}`);
        assert.deepEqual(res.json, json);
      }
    });

    test('a change written straight to the row (as a worker does) shows at once', async () => {
      const { json } = await create('changed behind the API');
      const id = json.id ?? '';
      const first = etagOf(await get(id));
      await svc.service.ctx.db
        .updateTable('jobs')
        .set({ pr_link: 'https://forge.example/pr/7' })
        .where('id', '=', id)
        .execute();
      const changed = await get(id, { 'if-none-match': first });
      assert.equal(changed.status, 200);
      assert.equal(changed.json.prLink, 'https://forge.example/pr/7');
      assert.notEqual(etagOf(changed), first);
    });

    test('the ETag changes when the job changes', async () => {
      const { json } = await create('change me');
      const id = json.id ?? '';
      const first = etagOf(await get(id));

      const followUp = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${id}/message`, {
        body: { prompt: 'and this too' },
      });
      assert.equal(followUp.status, 200, followUp.text);
      const afterMessage = await get(id, { 'if-none-match': first });
      assert.equal(afterMessage.status, 200);
      assert.equal(afterMessage.json.turns, 2);
      const second = etagOf(afterMessage);
      assert.notEqual(second, first);
      assertNotModified(await get(id, { 'if-none-match': second }), second);

      const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${id}/archive`);
      assert.equal(archived.status, 200);
      const afterArchive = await get(id, { 'if-none-match': `${first}, ${second}` });
      assert.equal(afterArchive.status, 200);
      assert.equal(afterArchive.json.status, 'archived');
      assert.deepEqual(afterArchive.json, archived.json);
      const third = etagOf(afterArchive);
      assert.notEqual(third, first);
      assert.notEqual(third, second);
    });
  });

  describe('errors', () => {
    jobIdCases(spec, fixture);

    test('a 404 is not turned into a 304 by If-None-Match: *', async () => {
      const res = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${fx.otherJobId}`, {
        headers: { 'if-none-match': '*' },
      });
      assertError(res, 404, 'not_found');
    });
  });

  describe('database trouble', () => {
    test('a read the database does not answer in time is a 503; the next one works', async () => {
      const url = svc.database.databaseUrl;
      assert.ok(url, 'the test service runs on the test server');
      const { reader, keyErrors } = newReader(svc.service.ctx, 300);
      const locker = new pg.Client({ connectionString: url });
      await locker.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE');
        const started = Date.now();
        await assert.rejects(
          reader.read(`Bearer ${fx.projectKey}`, fx.project.id, fx.jobId),
          (err: unknown) => err instanceof AppError && err.status === 503,
        );
        assert.ok(Date.now() - started < 5_000, 'the timeout did not apply');
        await locker.query('COMMIT');
        const { job } = await reader.read(`Bearer ${fx.projectKey}`, fx.project.id, fx.jobId);
        assert.equal(job?.id, fx.jobId);
        assert.deepEqual(keyErrors, []);
      } finally {
        await locker.query('ROLLBACK').catch(() => {});
        await locker.end();
      }
    });
  });

  describe('security', () => {
    authCases(spec, fixture);

    test('reads that arrive together share one statement, and each gets its own answer', async () => {
      // Polling reads are batched (Batcher): a batch mixing keys, projects and jobs must
      // give every read exactly the answer it would get alone.
      const { ctx } = svc.service;
      let statements = 0;
      const counted: AppContext = {
        ...ctx,
        prepared: <R>(name: string, text: string, values: unknown[]) => {
          statements++;
          return ctx.prepared<R>(name, text, values);
        },
      };
      const { reader, keyErrors } = newReader(counted);
      const revoked = await svc.createProjectKey(fx.project.id);
      const revoke = await svc.request('POST', `/v2/admin/keys/${revoked.id}/revoke`);
      assert.equal(revoke.status, 200, revoke.text);
      const A = fx.project.id;
      const B = fx.otherProject.id;
      const cases: [key: string, projectId: string, jobId: string, expected: string][] = [
        [fx.projectKey, A, fx.jobId, `job ${fx.jobId}`],
        [svc.adminKey, B, fx.otherJobId, `job ${fx.otherJobId}`],
        [fx.otherProjectKey, B, fx.otherJobId, `job ${fx.otherJobId}`],
        [fx.otherProjectKey, A, fx.jobId, 'forbidden'],
        [revoked.key, A, fx.jobId, 'unauthorized: this API key has been revoked'],
        [mintKey(), A, fx.jobId, 'unauthorized: unknown API key'],
        [svc.adminKey, randomProjectId(), fx.jobId, 'not_found: project'],
        [fx.projectKey, A, fx.otherJobId, 'not_found: job'],
        [svc.adminKey, A, 'job_not-an-id', 'not_found: job'],
      ];
      const settled = await Promise.allSettled(
        cases.map(([key, projectId, jobId]) => reader.read(`Bearer ${key}`, projectId, jobId)),
      );
      assert.equal(statements, 1, 'the reads did not share one statement');
      settled.forEach((result, i) => {
        const expected = cases[i]?.[3] ?? '';
        if (result.status === 'fulfilled') {
          assert.equal(`job ${result.value.job?.id}`, expected, `case ${i}`);
        } else {
          assert.ok(result.reason instanceof AppError, `case ${i}: ${String(result.reason)}`);
          assert.ok(
            `${result.reason.code}: ${result.reason.message}`.startsWith(expected),
            `case ${i}: got ${result.reason.code}: ${result.reason.message}, expected ${expected}`,
          );
        }
      });
      assert.deepEqual(keyErrors, []);
    });

    test('a malformed project id (a NUL byte) is a 404 and fails no other read of its batch', async () => {
      const { reader, keyErrors } = newReader();
      const key = `Bearer ${svc.adminKey}`;
      const [bad, good] = await Promise.allSettled([
        reader.read(key, 'prj_\u0000', fx.jobId),
        reader.read(key, fx.project.id, fx.jobId),
      ]);
      assert.equal(bad?.status, 'rejected');
      assert.ok(bad?.status === 'rejected' && bad.reason instanceof AppError);
      assert.equal(bad.reason.status, 404);
      assert.equal(good?.status === 'fulfilled' && good.value.job?.id, fx.jobId);
      const res = await svc.request('GET', `/v2/agent/prj_%00/job/${fx.jobId}`);
      assertError(res, 404, 'not_found');
      assert.deepEqual(keyErrors, []);
    });

    test('no 304 without a valid key, even with the right ETag', async () => {
      const etag = etagOf(await get(fx.jobId));
      const headers = { 'if-none-match': etag };
      assertError(
        await svc.request('GET', `/v2/agent/${fx.project.id}/job/${fx.jobId}`, {
          key: null,
          headers,
        }),
        401,
        'unauthorized',
      );
      assertError(await get(fx.jobId, headers, fx.otherProjectKey), 403, 'forbidden');
      assertNotModified(await get(fx.jobId, headers), etag);
    });

    test("another project's key cannot read the job through its own project", async () => {
      const res = await svc.request('GET', `/v2/agent/${fx.otherProject.id}/job/${fx.jobId}`, {
        key: fx.otherProjectKey,
      });
      assertError(res, 404, 'not_found');
      assert.doesNotMatch(res.text, /fixture job A/);
    });
  });
});

describe('RenderedJobs', () => {
  const row = (updates: Partial<JobView> = {}): JobView => ({
    id: 'job_AAAAAAAAAAAAAAAAAAAA',
    project_id: 'prj_AAAAAAAAAAAAAAAAAAAA',
    status: 'active',
    repository: '/srv/repo',
    ref: 'main',
    branch: 'errand/job_AAAAAAAAAAAAAAAAAAAA',
    model: 'openai:gpt-5',
    pr_link: null,
    pr_number: null,
    error: null,
    turn_count: 1,
    usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
    origin: null,
    created_by: null,
    pr: null,
    mode: 'code',
    summary: null,
    awaiting_approval: false,
    output: null,
    attempts: null,
    eval_run_id: null,
    created_at: new Date('2026-11-22T05:00:00.000Z'),
    updated_at: new Date('2026-11-22T05:00:00.000Z'),
    archived_at: null,
    ...updates,
  });

  test('an unchanged row version is not rendered again; a new one is', () => {
    const rendered = new RenderedJobs();
    const first = rendered.render({ job: row(), version: '100' });
    assert.deepEqual(JSON.parse(first.body), toJobRecord(row()));
    assert.equal(rendered.render({ job: row(), version: '100' }), first);
    const completed = row({ status: 'completed' });
    const second = rendered.render({ job: completed, version: '101' });
    assert.equal(JSON.parse(second.body).status, 'completed');
    assert.notEqual(second.etag, first.etag);
  });

  test('the same version with another update time is rendered again', () => {
    const rendered = new RenderedJobs();
    const first = rendered.render({ job: row(), version: '100' });
    const later = row({ status: 'failed', updated_at: new Date('2026-11-22T06:00:00.000Z') });
    const second = rendered.render({ job: later, version: '100' });
    assert.notEqual(second, first);
    assert.equal(JSON.parse(second.body).status, 'failed');
  });

  test('tells the version it keeps for a job, and gives its body only for that version', () => {
    const rendered = new RenderedJobs();
    assert.equal(rendered.versionOf(row().id), undefined);
    const first = rendered.render({ job: row(), version: '100/1' });
    assert.equal(rendered.versionOf(row().id), '100/1');
    assert.equal(rendered.kept(row().id, '100/1'), first);
    assert.equal(rendered.kept(row().id, '101/1'), undefined);
    assert.equal(rendered.kept('job_AAAAAAAAAAAAAAAAAAA9', '100/1'), undefined);
  });

  test('keeps at most its limit of body characters, dropping the oldest', () => {
    const ids = [
      'job_AAAAAAAAAAAAAAAAAAA1',
      'job_AAAAAAAAAAAAAAAAAAA2',
      'job_AAAAAAAAAAAAAAAAAAA3',
    ];
    const size = JSON.stringify(toJobRecord(row({ id: ids[0] }))).length;
    const rendered = new RenderedJobs(size * 2);
    const [a, b, c] = ids.map((id) => rendered.render({ job: row({ id }), version: '1' }));
    assert.equal(rendered.render({ job: row({ id: ids[2] }), version: '1' }), c);
    assert.equal(rendered.render({ job: row({ id: ids[1] }), version: '1' }), b);
    // The first was dropped when the third came in: rendered again, as a new entry.
    const again = rendered.render({ job: row({ id: ids[0] }), version: '1' });
    assert.notEqual(again, a);
    assert.equal(again.body, a?.body);
    // A body larger than the whole limit is answered but not kept.
    const tiny = new RenderedJobs(10);
    const big = tiny.render({ job: row(), version: '1' });
    assert.notEqual(tiny.render({ job: row(), version: '1' }), big);
  });
});
