// The review page of a job whose prompt, summary, file names and diff lines are hostile: all
// of it renders as text under a CSP without 'unsafe-inline', and the page does not tell where
// the server keeps a local repository.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
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
import { recordReviewDiff } from '../jobs/lifecycle.ts';
import { diffAgainst } from '../workspace/commit.ts';
import { repositoryLabel } from './review.ts';
import { SESSION_COOKIE, signIn } from './sessions.ts';

const HOSTILE = '"><img src=x onerror=alert(1)>';
const PROMPT = `Fix <script>alert(1)</script> and ${HOSTILE}`;
const SUMMARY = `Tidy the **greeting**\n\nSee [the docs](https://example.com/docs), [x](javascript:alert(1)), ![t](https://evil.test/t.png) and <script>alert(2)</script> ${HOSTILE}`;

describe('review page', () => {
  let svc: TestService;
  let dir: string;
  let origin: Origin;
  let jobId: string;
  let projectId: string;
  let diff: string;

  before(async () => {
    dir = await makeTempDir('review-page');
    origin = await makeOrigin(dir, { 'README.md': 'Hello\n' }, 'acme.git');
    svc = await startTestService({ worker: false });
    const project = await svc.createProject({ repository: origin.bare });
    projectId = project.id;
    jobId = await createJobId(svc, project.id, PROMPT);
    // The agent's work, made by real git as a worker makes it.
    const base = origin.head('main') ?? '';
    await writeFile(join(origin.work, 'README.md'), `Hello\n<script>alert(3)</script>\n`);
    await writeFile(join(origin.work, `${HOSTILE}.txt`), 'x\n');
    git(origin.work, 'add', '--all');
    git(origin.work, 'commit', '--quiet', '-m', 'work');
    ({ diff } = await diffAgainst(testConfig(dir), { dir: origin.work, base }));
    await recordReviewDiff(svc.service.ctx, jobId, diff, false);
    // The turn's summary as the worker records it when the turn finishes.
    await svc.service.ctx.db
      .updateTable('turns')
      .set({ summary: SUMMARY })
      .where('job_id', '=', jobId)
      .execute();
  });

  after(async () => {
    await svc?.close();
    if (dir) await removeDir(dir);
  });

  const page = async () => {
    const res = await fetch(`${svc.url}/review/${jobId}`);
    return { res, html: await res.text() };
  };

  test('shows the prompt, the rendered summary and the diff view', async () => {
    const { res, html } = await page();
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(html, /Fix &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /<strong>greeting<\/strong>/);
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
    const link = `/projects/${projectId}/jobs/${jobId}`;
    const opened = async (key: string | undefined) => {
      const headers: Record<string, string> = {};
      if (key) headers.cookie = `${SESSION_COOKIE}=${(await signIn(svc.service.ctx.db, key)).id}`;
      const res = await fetch(`${svc.url}/review/${jobId}`, { headers });
      assert.equal(res.status, 200);
      return (await res.text()).includes(`href="${link}"`);
    };
    assert.equal(await opened(undefined), false, 'no session: no link');
    assert.equal(await opened(svc.adminKey), true, 'an admin session links');
    const own = await svc.createProjectKey(projectId);
    assert.equal(await opened(own.key), true, "the project's key links");
    const other = await svc.createProject({ name: 'another', repository: origin.bare });
    const stranger = await svc.createProjectKey(other.id);
    assert.equal(await opened(stranger.key), false, "another project's key does not");
  });

  test('an unknown or malformed job id is a 404', async () => {
    for (const id of [randomJobId(), 'nope']) {
      const res = await svc.request('GET', `/review/${id}`, { key: '' });
      assertError(res, 404, 'not_found');
    }
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
