// The dashboard job page's live lines, GET /projects/:id/jobs/:jobId/events: as a stream, each
// event a `line` of HTML with `settled` on the event that ends the job; as JSON, the lines after
// `after` with the job's status; and one limit of open streams per key with the API's stream,
// since both open theirs on the process's one hub.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createRouteFixture,
  type RouteFixture,
  SCRIPTED_ENV,
  scriptedRunner,
  turnStarted,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import { openSse, type SseStream } from '../../../test/support/sse.ts';
import { SESSION_COOKIE, signIn } from '../../dashboard/sessions.ts';

interface Line {
  seq: number;
  html: string;
  settled: boolean;
}

describe('the job page live lines', () => {
  const runner = scriptedRunner();
  let svc: TestService;
  let fx: RouteFixture;
  /** A session of the project's key, as the dashboard's sign-in makes it. */
  let cookie: string;

  const linesUrl = (jobId: string, query = '') =>
    `${svc.url}/projects/${fx.project.id}/jobs/${jobId}/events${query}`;
  const apiUrl = (jobId: string) => `${svc.url}/v2/agent/${fx.project.id}/job/${jobId}/events`;
  const createJob = async (prompt: string) => {
    const res = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
      key: fx.projectKey,
      body: { prompt },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };

  before(async () => {
    svc = await startTestService({
      runner,
      env: { ...SCRIPTED_ENV, ERRAND_STREAMS_PER_KEY: '2' },
    });
    fx = await createRouteFixture(svc);
    const session = await signIn(svc.service.ctx.db, fx.projectKey);
    cookie = `${SESSION_COOKIE}=${session.id}`;
  });
  after(async () => {
    await svc?.close();
  });

  test('as a stream: each event a line of HTML, the one that ends the job settled', async () => {
    const jobId = await createJob('hold on');
    await turnStarted(runner, jobId);
    const stream = await openSse(linesUrl(jobId), { headers: { cookie } });
    assert.equal(stream.status, 200, stream.body);
    // Two lines read before the archive: the page follows the job live, not only its backlog.
    await stream.take(2);
    const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${jobId}/archive`, {
      key: fx.projectKey,
    });
    assert.equal(archived.status, 200, archived.text);
    await stream.ended;
    const log = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}/events`, {
      key: fx.projectKey,
    });
    const seqs = (log.json.events ?? []).map((e) => e.seq);
    assert.deepEqual(
      stream.events.map((e) => [e.event, e.id]),
      seqs.map((seq) => ['line', String(seq)]),
    );
    const lines = stream.events.map((e) => JSON.parse(e.data) as Line);
    assert.deepEqual(
      lines.map((l) => l.seq),
      seqs,
    );
    for (const line of lines) assert.match(line.html, /^<li>.*<\/li>$/s);
    assert.match(lines[0]?.html ?? '', /<span class="badge">job\.created<\/span>/);
    assert.match(lines.at(-1)?.html ?? '', /<span class="badge">job\.archived<\/span>/);
    assert.deepEqual(
      lines.map((l) => l.settled),
      seqs.map((_, i) => i === seqs.length - 1),
    );
  });

  test('as JSON: the lines after `after`, with the job status', async () => {
    const jobId = await createJob('steps please');
    await waitFor('the job to complete', async () => {
      const res = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}`);
      return res.json.status === 'completed' ? res : undefined;
    });
    const log = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}/events`, {
      key: fx.projectKey,
    });
    const seqs = (log.json.events ?? []).map((e) => e.seq);
    const read = async (query: string) => {
      const res = await fetch(linesUrl(jobId, query), {
        headers: { cookie, accept: 'application/json' },
      });
      assert.equal(res.status, 200);
      return (await res.json()) as { status: string; events: { seq: number; html: string }[] };
    };
    const all = await read('');
    assert.equal(all.status, 'completed');
    assert.deepEqual(
      all.events.map((e) => e.seq),
      seqs,
    );
    assert.equal(all.events.filter((e) => e.html.includes('command.started')).length, 3);
    const rest = await read(`?after=${seqs[1]}`);
    assert.deepEqual(rest.events, all.events.slice(2));
    const refused = await fetch(linesUrl(jobId, '?after=-1'), {
      headers: { cookie, accept: 'application/json' },
    });
    assert.equal(refused.status, 400);
  });

  test("a key's open streams are counted across the API and the page: one limit", async () => {
    const jobId = await createJob('hold still');
    await turnStarted(runner, jobId);
    const open: SseStream[] = [];
    for (let i = 0; i < 2; i++) {
      const stream = await openSse(apiUrl(jobId), { key: fx.projectKey });
      assert.equal(stream.status, 200, stream.body);
      open.push(stream);
    }
    const refused = await openSse(linesUrl(jobId), { headers: { cookie } });
    assert.equal(refused.status, 429);
    assert.match(JSON.parse(refused.body).error, /ERRAND_STREAMS_PER_KEY/);
    open.shift()?.close();
    const page = await waitFor('a place to free up', async () => {
      const stream = await openSse(linesUrl(jobId), { headers: { cookie } });
      if (stream.status === 200) return stream;
      stream.close();
      return undefined;
    });
    // And the other way: the page's stream holds a place the API's stream cannot take.
    const apiRefused = await openSse(apiUrl(jobId), { key: fx.projectKey });
    assert.equal(apiRefused.status, 429);
    for (const stream of [...open, page]) stream.close();
    const archived = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${jobId}/archive`, {
      key: fx.projectKey,
    });
    assert.equal(archived.status, 200, archived.text);
  });
});
