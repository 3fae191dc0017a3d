// The review page of a job whose prompt, summary, file names and diff lines are hostile: all
// of it renders as text under a CSP without 'unsafe-inline', and the page does not tell where
// the server keeps a local repository. Who may see it (issue 29): the holder of the link Errand
// gives as the job's prLink, until the job is archived, and a dashboard session that may see the
// job's project; to anyone else, a job id alone included, it is the 404 of no job at all.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import {
  git,
  makeOrigin,
  makeTempDir,
  type Origin,
  removeDir,
  testConfig,
} from '../../test/support/git.ts';
import { assertError, createJobId, randomJobId } from '../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../test/support/service.ts';
import type { Database } from '../db/schema.ts';
import { buildApp } from '../http/app.ts';
import { loadTurnInputs, recordReviewDiff } from '../jobs/lifecycle.ts';
import { createLogger } from '../log.ts';
import { review } from '../turns/forge.ts';
import { diffAgainst } from '../workspace/commit.ts';
import { dashboard } from './plugin.ts';
import { repositoryLabel } from './review.ts';
import { SESSION_COOKIE, signIn } from './sessions.ts';

const HOSTILE = '"><img src=x onerror=alert(1)>';
const PROMPT = `Fix <script>alert(1)</script> and ${HOSTILE}`;
const SUMMARY = `Tidy the **greeting**\n\nSee [the docs](https://example.com/docs), [x](javascript:alert(1)), ![t](https://evil.test/t.png) and <script>alert(2)</script> ${HOSTILE}`;
/** A failed attempt's error, kept on the turn: the page shows it, and so must refuse it. */
const ERROR = 'the model refused: quota of acct-7731 exceeded';

/** A response as a reader sees it: what tells one answer from another. */
interface Seen {
  status: number;
  headers: Record<string, string | null>;
  body: string;
}

const SHOWN_HEADERS = [
  'content-type',
  'cache-control',
  'referrer-policy',
  'x-robots-tag',
  'content-security-policy',
];

describe('review page', () => {
  let svc: TestService;
  let dir: string;
  let origin: Origin;
  let base: string;
  let jobId: string;
  let projectId: string;
  let diff: string;
  /** The job's prLink, as the turn pipeline makes it for a plain git remote. */
  let link: string;
  let logged = '';
  const logSink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString();
      done();
    },
  });

  /** The turn's review step on a plain remote (no forge client): it stores the diff, gives the link. */
  const reviewLinkOf = async (id: string) => {
    const { ctx } = svc.service;
    const job = await ctx.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const turn = await ctx.db
      .selectFrom('turns')
      .selectAll()
      .where('job_id', '=', id)
      .where('seq', '=', 1)
      .executeTakeFirstOrThrow();
    const { project, secrets, earlier } = await loadTurnInputs(ctx, job, 1);
    const emitted: { type: string; data?: Record<string, unknown> }[] = [];
    const { prLink } = await review(
      { ...ctx.config, publicUrl: svc.url },
      testConfig(dir),
      {
        job,
        turn,
        project,
        secrets,
        earlier,
        signal: new AbortController().signal,
        emit: async () => {},
        saveReviewDiff: (d, truncated) => recordReviewDiff(ctx, id, d, truncated),
      },
      { kind: 'git', project, provider: undefined, client: undefined, auth: undefined },
      {
        dir: origin.work,
        baseCommit: base,
        headCommit: git(origin.work, 'rev-parse', 'HEAD'),
        branchExisted: false,
        discardedHead: null,
      },
      'Tidied',
      async (type, data) => {
        emitted.push({ type, ...(data ? { data } : {}) });
      },
      (text) => text,
    );
    assert.ok(prLink, 'a review on a plain remote gives no link');
    assert.deepEqual(emitted, [{ type: 'review.updated', data: { url: prLink } }]);
    return prLink;
  };

  before(async () => {
    dir = await makeTempDir('review-page');
    origin = await makeOrigin(dir, { 'README.md': 'Hello\n' }, 'acme.git');
    svc = await startTestService({ worker: false, log: createLogger('debug', logSink) });
    const project = await svc.createProject({ repository: origin.bare });
    projectId = project.id;
    jobId = await createJobId(svc, project.id, PROMPT);
    // The agent's work, made by real git as a worker makes it.
    base = origin.head('main') ?? '';
    await writeFile(join(origin.work, 'README.md'), `Hello\n<script>alert(3)</script>\n`);
    await writeFile(join(origin.work, `${HOSTILE}.txt`), 'x\n');
    git(origin.work, 'add', '--all');
    git(origin.work, 'commit', '--quiet', '-m', 'work');
    ({ diff } = await diffAgainst(testConfig(dir), { dir: origin.work, base }));
    link = await reviewLinkOf(jobId);
    // The turn's summary (and an error an attempt left) as the worker records them.
    await svc.service.ctx.db
      .updateTable('turns')
      .set({ summary: SUMMARY, error: ERROR })
      .where('job_id', '=', jobId)
      .execute();
  });

  after(async () => {
    await svc?.close();
    if (dir) await removeDir(dir);
  });

  /** What GET `path` answers, as a script (JSON) or as a browser (HTML) asks. */
  const seen = async (path: string, opts: { cookie?: string; browser?: boolean } = {}) => {
    const headers: Record<string, string> = {};
    if (opts.cookie) headers.cookie = `${SESSION_COOKIE}=${opts.cookie}`;
    if (opts.browser) headers.accept = 'text/html,application/xhtml+xml';
    const res = await fetch(`${svc.url}${path}`, { headers });
    let body = await res.text();
    // The request id is the one thing every answer has of its own.
    if (res.headers.get('content-type')?.startsWith('application/json')) {
      const { requestId: _, ...rest } = JSON.parse(body) as Record<string, unknown>;
      body = JSON.stringify(rest);
    }
    return {
      status: res.status,
      headers: Object.fromEntries(SHOWN_HEADERS.map((h) => [h, res.headers.get(h)])),
      body,
    } satisfies Seen;
  };
  const pathOf = (url: string) => url.slice(svc.url.length);
  const page = async () => {
    const res = await fetch(link);
    return { res, html: await res.text() };
  };
  const tokenOf = async (id: string) =>
    (
      await svc.service.ctx.db
        .selectFrom('jobs')
        .select('review_token')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).review_token;
  const sessionOf = async (key: string) => (await signIn(svc.service.ctx.db, key)).id;

  /**
   * What a reader gets who may not see the page, script and browser alike: exactly what a job
   * that does not exist gives, and nothing of this job in it.
   */
  const assertRefused = async (path: string, cookie?: string) => {
    for (const browser of [false, true]) {
      const opts = { browser, ...(cookie ? { cookie } : {}) };
      const got = await seen(path, opts);
      const none = await seen(`/review/${randomJobId()}`, opts);
      assert.deepEqual(got, none, `${path} answers otherwise than a job that does not exist`);
      assert.equal(got.status, 404);
      // Nothing of the job: its prompt, summary, error, repository, branch, id or diff.
      const shown = ['Fix', 'alert', 'greeting', ERROR, 'acme', 'errand/', jobId, 'README'];
      for (const secret of shown)
        assert.ok(!got.body.includes(secret), `the refusal shows "${secret}": ${got.body}`);
    }
  };

  test('the link Errand gives as prLink opens the page without a key or a session', async () => {
    const token = await tokenOf(jobId);
    assert.match(token, /^[0-9a-f]{64}$/);
    assert.equal(link, `${svc.url}/review/${jobId}?token=${token}`);
    const { res, html } = await page();
    assert.equal(res.status, 200);
    assert.match(html, /Fix &lt;script&gt;/);
    // A second job's link is its own.
    const other = await createJobId(svc, projectId, 'another job');
    const otherLink = await reviewLinkOf(other);
    assert.notEqual(await tokenOf(other), token);
    assert.equal((await fetch(otherLink)).status, 200);
  });

  test('a reader with only the job id gets nothing that reveals the job', async () => {
    // The job id is posted in forge comments and pull requests: the bare link is all they give.
    await assertRefused(`/review/${jobId}`);
    await assertRefused(`/review/${jobId}?token=`);
    await assertRefused(`/review/${jobId}?other=${await tokenOf(jobId)}`);
    // A malformed id is refused alike.
    await assertRefused('/review/nope');
    // An API key is no way in: the page takes none.
    for (const key of ['', svc.adminKey]) {
      const res = await svc.request('GET', `/review/${jobId}`, { key });
      assertError(res, 404, 'not_found');
      const none = await svc.request('GET', `/review/${randomJobId()}`, { key });
      assert.equal(res.json.error, none.json.error);
    }
  });

  test("a tampered token, or another job's token, is refused as a job that does not exist", async () => {
    const token = await tokenOf(jobId);
    const other = await createJobId(svc, projectId, 'a job of its own');
    const otherLink = await reviewLinkOf(other);
    const otherToken = await tokenOf(other);
    const flipped = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
    for (const tampered of [
      flipped,
      token.slice(0, -1),
      `${token}0`,
      token.toUpperCase(),
      ` ${token}`,
      otherToken,
    ])
      await assertRefused(`/review/${jobId}?token=${encodeURIComponent(tampered)}`);
    // The other job's own link opens its page, and only its page.
    assert.equal((await fetch(otherLink)).status, 200);
    await assertRefused(`/review/${jobId}?token=${otherToken}`);
  });

  test('archiving the job revokes its link; a signed-in session still sees the page', async () => {
    const archived = await createJobId(svc, projectId, 'a job to archive');
    const archivedLink = await reviewLinkOf(archived);
    assert.equal((await fetch(archivedLink)).status, 200);
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${archived}/archive`);
    assert.equal(res.status, 200, res.text);
    await assertRefused(pathOf(archivedLink));
    const admin = await sessionOf(svc.adminKey);
    for (const path of [pathOf(archivedLink), `/review/${archived}`]) {
      const got = await seen(path, { cookie: admin, browser: true });
      assert.equal(got.status, 200, path);
      assert.match(got.body, /a job to archive/);
    }
  });

  test('a signed-in dashboard session that may see the project sees the page without a token', async () => {
    const bare = `/review/${jobId}`;
    for (const key of [svc.adminKey, (await svc.createProjectKey(projectId)).key]) {
      const got = await seen(bare, { cookie: await sessionOf(key), browser: true });
      assert.equal(got.status, 200);
      assert.match(got.body, /Fix &lt;script&gt;/);
    }
    // Another project's key, or a session that is no session, is no way in.
    const other = await svc.createProject({ name: 'another', repository: origin.bare });
    await assertRefused(bare, await sessionOf((await svc.createProjectKey(other.id)).key));
    await assertRefused(bare, 'x'.repeat(43));
  });

  test('shows the prompt, the rendered summary, the error and the diff view', async () => {
    const { res, html } = await page();
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(html, /Fix &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /<strong>greeting<\/strong>/);
    assert.ok(html.includes(ERROR));
    assert.match(
      html,
      /<a href="https:\/\/example\.com\/docs" rel="nofollow noopener noreferrer">/,
    );
    assert.match(html, /<nav class="diff-files"/);
    assert.match(html, /2 files changed/);
    assert.match(
      html,
      /<tr class="diff-add"><td class="diff-num"><\/td><td class="diff-num">2<\/td><td class="diff-code">\+&lt;script&gt;alert\(3\)&lt;\/script&gt;<\/td><\/tr>/,
    );
    assert.match(html, /&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;\.txt/);
  });

  test('hostile prompts, summaries, names and lines render as text', async () => {
    const { html } = await page();
    assert.doesNotMatch(html, /<script|<img|<iframe/i);
    assert.doesNotMatch(html, /href="javascript:/i);
    const hrefs = [...html.matchAll(/href="([^"]*)"/g)].map((m) => m[1] ?? '');
    assert.ok(hrefs.length > 0);
    for (const href of hrefs) assert.match(href, /^(#diff-\d+|https:\/\/)/, href);
    // The javascript: link stays the text it was written as.
    assert.match(html, /\[x\]\(javascript:alert\(1\)\)/);
    assert.match(html, /\[image: t\]/);
  });

  test('a strict CSP allows only the page’s own style block, and the page is not indexed', async () => {
    const { res, html } = await page();
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.doesNotMatch(csp, /unsafe-inline|script-src/);
    assert.match(csp, /default-src 'none'/);
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1];
    assert.ok(style);
    const hash = createHash('sha256').update(style).digest('base64');
    assert.ok(csp.includes(`style-src 'sha256-${hash}'`), csp);
    assert.equal((html.match(/<style>/g) ?? []).length, 1);
    assert.doesNotMatch(html, / style="/);
    assert.match(html, /<meta name="robots" content="noindex">/);
    assert.equal(res.headers.get('x-robots-tag'), 'noindex');
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  test('the token leaves the page by no link: no referrer, and no link carries it', async () => {
    const { res, html } = await page();
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.ok(!html.includes(await tokenOf(jobId)), 'the page shows its own token');
    // The refusal page, under the same policy, links to the sign-in only.
    const refused = await seen(`/review/${jobId}`, { browser: true });
    assert.equal(refused.headers['referrer-policy'], 'no-referrer');
    assert.deepEqual(
      [...refused.body.matchAll(/href="([^"]*)"/g)].map((m) => m[1]),
      ['/'],
    );
  });

  test('a local repository is named by its last name, never by its server-side path', async () => {
    const { html } = await page();
    assert.ok(!html.includes(dir), 'the page shows the server-side path');
    assert.match(html, /file:\/\/…\/acme\.git/);
  });

  test('a cut-off diff says so and still renders the files before the cut', async () => {
    const cut = diff.slice(0, diff.indexOf('<script>alert(3)') + 4);
    await recordReviewDiff(svc.service.ctx, jobId, cut, true);
    try {
      const { res, html } = await page();
      assert.equal(res.status, 200);
      assert.match(html, /The diff is larger than the page shows/);
      assert.match(html, /The diff is cut off in this file\./);
      assert.doesNotMatch(html, /<script/i);
    } finally {
      await recordReviewDiff(svc.service.ctx, jobId, diff, false);
    }
  });

  test("a signed-in dashboard user who may see the project gets a link to the job's page", async () => {
    const jobPage = `/projects/${projectId}/jobs/${jobId}`;
    const opened = async (key: string | undefined) => {
      const headers: Record<string, string> = {};
      if (key) headers.cookie = `${SESSION_COOKIE}=${await sessionOf(key)}`;
      const res = await fetch(link, { headers });
      assert.equal(res.status, 200);
      return (await res.text()).includes(`href="${jobPage}"`);
    };
    assert.equal(await opened(undefined), false, 'no session: no link');
    assert.equal(await opened(svc.adminKey), true, 'an admin session links');
    const own = await svc.createProjectKey(projectId);
    assert.equal(await opened(own.key), true, "the project's key links");
    const other = await svc.createProject({ name: 'a third', repository: origin.bare });
    const stranger = await svc.createProjectKey(other.id);
    assert.equal(await opened(stranger.key), false, "another project's key does not");
  });

  test('the token is in no log line, also when the page fails', async () => {
    const token = await tokenOf(jobId);
    // The service's own lines, for every request above (pages, refusals, tampered tokens).
    assert.ok(logged.includes('"route":"/review/:jobId"'), 'no request was logged');
    assert.ok(!logged.includes(token), 'the log holds a review token');
    // A failure is logged with the request's URL: on a database that does not answer, the
    // page is a 503, and its URL is logged without the token's value.
    const { ctx } = svc.service;
    let failed = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        failed += chunk.toString();
        done();
      },
    });
    const down = new Kysely<Database>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 2000 }),
      }),
    });
    const app = await buildApp({ ...ctx, db: down, log: createLogger('info', sink) }, [dashboard]);
    try {
      const res = await app.inject({ method: 'GET', url: `/review/${jobId}?token=${token}&x=1` });
      assert.equal(res.statusCode, 503, res.body);
    } finally {
      await app.close();
      await down.destroy();
    }
    assert.ok(failed.includes(`"url":"/review/${jobId}?token=[redacted]&x=1"`), failed);
    assert.ok(!failed.includes(token), 'the failure was logged with the token');
  });
});

describe('the service log', () => {
  test("redacts the values of a URL's secret query parameters, however their names are spelt", () => {
    let out = '';
    const log = createLogger(
      'info',
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          out += chunk.toString();
          done();
        },
      }),
    );
    log.error({ url: '/review/job_x?token=abc123&page=2&TOKEN=def456&tok%65n=ghi789&key=k1' });
    log.error({ url: '/v2/agent/p/jobs?status=active' });
    const [first, second] = out
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { url: string }).url);
    assert.equal(
      first,
      '/review/job_x?token=[redacted]&page=2&TOKEN=[redacted]&tok%65n=[redacted]&key=[redacted]',
    );
    assert.equal(second, '/v2/agent/p/jobs?status=active');
  });
});

describe('repositoryLabel', () => {
  test('names local repositories by their last name and strips credentials from URLs', () => {
    assert.equal(repositoryLabel('/srv/errand/secret/app.git'), 'file://…/app.git');
    assert.equal(repositoryLabel('/srv/errand/secret/app/'), 'file://…/app');
    assert.equal(repositoryLabel('file:///srv/errand/my%20repo'), 'file://…/my repo');
    assert.equal(
      repositoryLabel('https://user:token@git.example.com/acme/app.git?x=1#y'),
      'https://git.example.com/acme/app.git',
    );
  });
});
