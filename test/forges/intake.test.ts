// The forge as a client of Errand, end to end for GitHub, GitLab and Gitea: the forge's fake
// sends signed webhook deliveries in its real payload shapes to the real service, which runs
// turns on a real git server with a fake model, and answers on the fake forge (reactions,
// replies, comments) through the forge's API. What must change nothing is shown by a sentinel
// delivery on the same thread, which the queue takes only after the ones before it.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, afterEach, before, describe, test } from 'node:test';
import { ERRAND_MARKER } from '../../src/features/forge-intake/text.ts';
import { type ForgeWorker, startForgeWorker } from '../../src/features/forge-intake/worker.ts';
import { createLogger } from '../../src/log.ts';
import type { JobRecord } from '../../src/records/job.ts';
import { formatUsd } from '../../src/words.ts';
import { getPage, sessionCookie } from '../support/dashboard.ts';
import { startFakeGitea } from '../support/fake-gitea.ts';
import { startFakeGitHub } from '../support/fake-github.ts';
import { startFakeGitLab } from '../support/fake-gitlab.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import type { FakeUser, ForgeRequest, RequestAnswer } from '../support/forge-requests.ts';
import { REVIEWER } from '../support/forge-requests.ts';
import {
  type GitHttpServer,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { assertRevealsNoJob } from '../support/review-links.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MODEL_KEY = 'sk-test-intake-5d1f0a7e';
const SECRET = 'intake-webhook-secret-0123456789';
const VISITOR: FakeUser = { login: 'visitor', id: 5151 };
const BOT: FakeUser = { login: 'helper', id: 6161, bot: true };
const basic = (user: string, token: string) =>
  `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

/** Something Errand wrote on the forge. */
interface Said {
  /** The issue or pull request it is on (GitLab numbers the two apart). */
  number: number;
  onIssue: boolean;
  body: string;
  /** Whether it answers the comment `commentOf(answer)` in that comment's own thread. */
  inThreadOf(delivery: RequestAnswer): boolean;
}

interface IntakeFake {
  apiUrl: string;
  sendWebhook(delivery: ForgeRequest, options?: { repo?: string }): Promise<RequestAnswer>;
  /** Users with and without write access. */
  grant(user: FakeUser, write: boolean): void;
  openIssue(title: string, body: string): { number: number; title: string; body: string };
  said(): Said[];
  /** Whether the comment of this delivery got Errand's 👀 (a review: its pull request did). */
  acknowledged(delivery: RequestAnswer): boolean;
  pulls(): Array<{ number: number; url: string; body: string }>;
  /** Every request the fake's API was sent, in order. */
  requests(): Array<{ method: string; path: string }>;
  /** Opens a pull request of someone's branch (no job's); returns its number. */
  openPull(): Promise<number>;
  /** Holds Errand's next comment whose body matches, until released (the GitHub fake only). */
  holdNextComment?: (body: RegExp) => { arrived: Promise<void>; release: () => void };
  assertNoUnexpected(): void;
  close(): Promise<void>;
}

interface Case {
  forge: 'github' | 'gitlab' | 'gitea';
  token: string;
  gitUser: string;
  start(token: string, webhook: () => string): Promise<IntakeFake>;
}

/** Opens a pull request as someone would, through the API GitHub and Gitea share. */
async function openRepoPull(apiUrl: string, authorization: string): Promise<number> {
  const res = await fetch(`${apiUrl}/repos/acme/app/pulls`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'A change', head: 'someones-branch', base: 'main', body: '' }),
  });
  const text = await res.text();
  assert.ok(res.ok, `the fake refused to open a pull request: ${res.status} ${text}`);
  return (JSON.parse(text) as { number: number }).number;
}

type Payload = Record<string, Record<string, unknown>>;
const payloadOf = (d: RequestAnswer) => d.payload as Payload;
/** The comment's id in a GitHub or Gitea delivery. */
const commentId = (d: RequestAnswer) => Number(payloadOf(d).comment?.id);
/** The issue's or pull request's number in a GitHub or Gitea delivery. */
const threadNumber = (d: RequestAnswer) =>
  Number(payloadOf(d).issue?.number ?? payloadOf(d).pull_request?.number);

const cases: Case[] = [
  {
    forge: 'github',
    token: 'ghp_intaketoken0123456789abcd',
    gitUser: 'x-access-token',
    async start(token, webhook) {
      const fake = await startFakeGitHub({ repos: ['acme/app', 'acme/other'], token });
      return {
        apiUrl: fake.apiUrl,
        sendWebhook: (delivery, options) => fake.sendWebhook(webhook(), SECRET, delivery, options),
        grant: (user, write) =>
          fake.setPermission('acme/app', user.login, write ? 'write' : 'read'),
        openIssue: (title, body) => {
          const issue = fake.openIssue('acme/app', { title, body, author: REVIEWER.login });
          return { number: issue.number, title, body };
        },
        said: () =>
          fake
            .comments('acme/app')
            .filter((c) => c.author === 'errand-bot')
            .map((c) => ({
              number: c.number,
              onIssue: !fake.pullRequests('acme/app').some((p) => p.number === c.number),
              body: c.body,
              inThreadOf: (d) =>
                payloadOf(d).comment?.path !== undefined
                  ? c.kind === 'line' && c.inReplyTo === commentId(d)
                  : c.kind === 'issue' && c.number === threadNumber(d),
            })),
        acknowledged: (d) =>
          fake.reactions('acme/app').some((r) => {
            if (r.content !== 'eyes') return false;
            if (payloadOf(d).review) return r.on === 'issue';
            if (payloadOf(d).comment?.path !== undefined)
              return r.on === 'review-comment' && r.id === commentId(d);
            return r.on === 'issue-comment' && r.id === commentId(d);
          }),
        pulls: () =>
          fake
            .pullRequests('acme/app')
            .map((p) => ({ number: p.number, url: p.htmlUrl, body: p.body ?? '' })),
        requests: () => fake.requests.map(({ method, path }) => ({ method, path })),
        openPull: () => openRepoPull(fake.apiUrl, `token ${token}`),
        holdNextComment: (body) =>
          fake.holdNext(
            (r) => r.method === 'POST' && /\/comments$/.test(r.path) && body.test(r.body),
          ),
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
  {
    forge: 'gitlab',
    token: 'glpat-intaketoken012345678',
    gitUser: 'oauth2',
    async start(token, webhook) {
      const fake = await startFakeGitLab({ token, projects: ['acme/app', 'acme/other'] });
      const note = (d: RequestAnswer) => payloadOf(d).object_attributes ?? {};
      return {
        apiUrl: fake.apiUrl,
        sendWebhook: (delivery, options) => fake.sendWebhook(webhook(), SECRET, delivery, options),
        // A bot is a project access token's user (forge-requests.ts names them so).
        grant: (user, write) =>
          fake.addUser(
            { username: user.bot ? `project_12_bot_${user.login}` : user.login, id: user.id },
            write ? 30 : 10,
          ),
        openIssue: (title, body) => {
          const issue = fake.openIssue('acme/app', {
            title,
            description: body,
            author: REVIEWER.login,
          });
          return { number: issue.iid, title, body };
        },
        said: () =>
          fake
            .notes('acme/app')
            .filter((n) => n.author === 'errand-bot')
            .map((n) => ({
              number: n.iid,
              onIssue: n.on === 'issue',
              body: n.body,
              inThreadOf: (d) => n.discussionId === note(d).discussion_id,
            })),
        acknowledged: (d) =>
          fake.awards('acme/app').some((a) => a.name === 'eyes' && a.noteId === note(d).id),
        pulls: () =>
          fake.mergeRequests('acme/app').map((m) => ({
            number: m.iid,
            url: `${fake.url}/acme/app/-/merge_requests/${m.iid}`,
            body: m.description,
          })),
        requests: () => fake.requests.map(({ method, path }) => ({ method, path })),
        openPull: async () =>
          fake.addMergeRequest('acme/app', { sourceBranch: 'someones-branch', title: 'A change' })
            .iid,
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
  {
    forge: 'gitea',
    token: 'giteaintaketoken0123456789',
    gitUser: 'errand',
    async start(token, webhook) {
      const fake = await startFakeGitea({ token, repos: ['acme/app', 'acme/other'] });
      return {
        apiUrl: fake.apiUrl,
        sendWebhook: (delivery, options) => fake.sendWebhook(webhook(), SECRET, delivery, options),
        grant: (user, write) =>
          fake.setPermission(
            'acme/app',
            user.bot ? `${user.login}[bot]` : user.login,
            write ? 'write' : 'read',
          ),
        openIssue: (title, body) => {
          const issue = fake.openIssue('acme/app', { title, body, author: REVIEWER.login });
          return { number: issue.number, title, body };
        },
        said: () =>
          fake
            .comments('acme/app')
            .filter((c) => c.author === 'errand-bot')
            .map((c) => ({
              number: c.number,
              onIssue: !fake.pulls('acme/app').some((p) => p.number === c.number),
              body: c.body,
              // Gitea's API answers no comment in its thread: in the same conversation.
              inThreadOf: (d) => c.number === threadNumber(d),
            })),
        acknowledged: (d) =>
          fake.reactions('acme/app').some((r) => {
            if (r.content !== 'eyes') return false;
            // A review is no comment: its pull request gets the 👀.
            if (payloadOf(d).review) return r.on === 'issue' && r.id === threadNumber(d);
            return r.on === 'comment' && r.id === commentId(d);
          }),
        pulls: () =>
          fake.pulls('acme/app').map((p) => ({
            number: p.number,
            url: `${fake.url}/acme/app/pulls/${p.number}`,
            body: p.body,
          })),
        requests: () => fake.requests.map(({ method, path }) => ({ method, path })),
        openPull: () => openRepoPull(fake.apiUrl, `token ${token}`),
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
];

for (const c of cases) {
  describe(`work from ${c.forge}`, () => {
    let tmp: string;
    let gitServer: GitHttpServer;
    let forge: IntakeFake;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;
    const webhook = () => `${svc.url}/v2/forges/${projectId}/webhook`;
    const serviceEnv = () => ({
      OPENAI_API_KEY: MODEL_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
      ERRAND_SECRET_KEY: 'test-secret-key-for-errand-intake',
    });

    before(async () => {
      tmp = await makeTempDir(`intake-${c.forge}`);
      const root = path.join(tmp, 'served');
      await makeServedRepo(root, tmp);
      gitServer = await startGitHttpServer({
        projectRoot: root,
        authorization: basic(c.gitUser, c.token),
      });
      forge = await c.start(c.token, webhook);
      llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
      svc = await startTestService({ env: serviceEnv() });
      const project = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name: c.forge,
          repository: `${gitServer.url}/acme/app.git`,
          forge: c.forge,
          forgeUrl: forge.apiUrl,
          forgeToken: c.token,
          forgeWebhookSecret: SECRET,
        },
      });
      assert.equal(project.status, 201, project.text);
      projectId = project.json.id as string;
      forge.grant(REVIEWER, true);
      forge.grant(VISITOR, false);
      // Bots may write (a CI app does): they are refused for being bots.
      forge.grant(BOT, true);
    });
    after(async () => {
      await svc?.close();
      await llm?.close();
      await forge?.close();
      await gitServer?.close();
      await removeDir(tmp);
    });
    afterEach(() => {
      try {
        llm.assertDone();
        forge.assertNoUnexpected();
      } finally {
        llm.reset();
      }
    });

    const jobs = async (): Promise<JobRecord[]> =>
      (await svc.request('GET', `/v2/agent/${projectId}/jobs?limit=100`)).json.jobs ?? [];
    const events = async (jobId: string) =>
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
    const promptsSeen = () => llm.requests.map((r) => JSON.stringify(r.body));
    /** The job made from issue `number`, once it exists. */
    const jobOfIssue = (number: number) =>
      waitFor(`a job for issue #${number}`, async () =>
        (await jobs()).find((j) => j.origin?.number === number),
      );
    const saidOn = (issue: number) => forge.said().filter((s) => s.onIssue && s.number === issue);
    const queued = (answer: RequestAnswer) => {
      assert.equal(answer.status, 202, answer.text);
      assert.equal(answer.json.outcome, 'queued', answer.text);
    };

    let pull: { number: number; url: string };
    let jobId: string;

    test('a review comment on a line of a job’s pull request runs a follow-up, answered in its thread', async () => {
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: '# Notes\n' } }]),
        reply('Add notes\n\nA first page of notes.'),
      );
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Add a NOTES.md' },
      });
      assert.equal(created.status, 201, created.text);
      jobId = created.json.id as string;
      const first = await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
      const found = forge.pulls().find((p) => p.url === first.prLink);
      assert.ok(found, `no pull request at ${first.prLink}`);
      pull = found;

      llm.script(
        toolCalls([
          { name: 'write_file', input: { path: 'NOTES.md', content: '# Release notes\n' } },
        ]),
        reply('Rename the heading to Release notes\n\nThe page now says what it is for.'),
      );
      const comment = await forge.sendWebhook({
        type: 'review-comment',
        pull: pull.number,
        body: '@errand please call it "Release notes"',
        path: 'NOTES.md',
        line: 1,
        diffHunk: '@@ -0,0 +1 @@\n+# Notes',
      });
      queued(comment);
      const job = await waitFor('the follow-up to end', async () => {
        const current = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
        return current.turns === 2 && current.status === 'completed' ? current : undefined;
      });
      assert.equal(job.prLink, pull.url, 'the follow-up keeps the same pull request');
      // The prompt carries the comment, its author, and where it is in the diff.
      const prompt = promptsSeen().find((p) => p.includes('please call it'));
      assert.ok(prompt, 'the model never saw the comment');
      assert.match(prompt, new RegExp(`@${REVIEWER.login}`));
      assert.match(prompt, /NOTES\.md/);
      if (c.forge !== 'gitea') assert.match(prompt, /line 1/);
      assert.ok(forge.acknowledged(comment), 'the comment got no 👀');

      const answer = await waitFor('the answer in the thread', async () =>
        forge.said().find((s) => s.inThreadOf(comment) && /Release notes/.test(s.body)),
      );
      assert.match(answer.body, /Rename the heading to Release notes/);
      assert.match(answer.body, /Pushed commit [0-9a-f]{12}/);
      assert.ok(
        answer.body.includes(`${svc.url}/projects/${projectId}/jobs/${jobId}`),
        `the answer does not link the job: ${answer.body}`,
      );
      // The turn's events say which forge event started it.
      const started = (await events(jobId)).find((e) => e.type === 'turn.started' && e.turn === 2);
      const trigger = (started?.data as { trigger?: Record<string, string> } | undefined)?.trigger;
      assert.equal(trigger?.author, REVIEWER.login);
      assert.equal(trigger?.forge, c.forge);
      assert.match(trigger?.url ?? '', /^http/);

      // The forge sends it again: acknowledged, not acted on twice.
      const again = await comment.redeliver();
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json.outcome, 'duplicate');
      const after = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
      assert.equal(after.turns, 2);
    });

    test('a review’s body is a follow-up too, answered on the pull request', async () => {
      llm.script(reply('Nothing else needs changing\n\nThe notes are complete.'));
      const review = await forge.sendWebhook({
        type: 'review',
        pull: pull.number,
        body: 'Looks good. @errand is anything missing?',
      });
      queued(review);
      await waitFor('the third turn to end', async () => {
        const current = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
        return current.turns === 3 && current.status === 'completed' ? current : undefined;
      });
      assert.ok(promptsSeen().some((p) => p.includes('is anything missing?')));
      const answer = await waitFor('the answer to the review', async () =>
        forge.said().find((s) => s.inThreadOf(review) && /Nothing else/.test(s.body)),
      );
      assert.match(answer.body, /No files changed/);
      assert.ok(forge.acknowledged(review), 'the review got no 👀');
    });

    test('a signed comment and a signed label, each sent under three delivery ids: one turn each, also once their record is forgotten', async () => {
      const turnsOf = async (id: string) =>
        (await svc.request('GET', `/v2/agent/${projectId}/job/${id}`)).json.turns;
      const ended = (id: string, turns: number) =>
        waitFor(`job ${id} to end turn ${turns}`, async () => {
          const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${id}`)).json;
          return job.turns === turns && job.status === 'completed' ? job : undefined;
        });
      /** The same signed body under two new delivery ids: acknowledged, nothing queued. */
      const replayTwice = async (first: RequestAnswer) => {
        for (const _ of [1, 2]) {
          const replayed = await first.replay();
          assert.equal(replayed.status, 200, replayed.text);
          assert.equal(replayed.json.outcome, 'duplicate', replayed.text);
        }
      };
      const turnsBefore = (await turnsOf(jobId)) ?? 0;
      llm.script(reply('Checked the spelling\n\nEvery word is spelt right.'));
      const comment = await forge.sendWebhook({
        type: 'comment',
        pull: pull.number,
        body: '@errand check the spelling',
      });
      queued(comment);
      await replayTwice(comment);
      await ended(jobId, turnsBefore + 1);

      llm.script(reply('Looked at the label\n\nNothing to change.'));
      const issue = forge.openIssue('Labelled once', 'One job for one label.');
      const label = await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' });
      queued(label);
      await replayTwice(label);
      const made = await jobOfIssue(issue.number);
      await ended(made.id as string, 1);

      // A month on, the events' records are forgotten; the same bodies come again and are
      // queued, and each finds the turn it started.
      await svc.service.ctx.db
        .deleteFrom('forge_events')
        .where('project_id', '=', projectId)
        .execute();
      queued(await comment.replay());
      queued(await label.replay());
      // The sentinels: events of one thread are taken in order, so once these turns exist, the
      // replays before them have been dealt with.
      llm.script(reply('Sentinel of the pull request'));
      queued(
        await forge.sendWebhook({
          type: 'comment',
          pull: pull.number,
          body: '@errand anything else?',
        }),
      );
      await ended(jobId, turnsBefore + 2);
      llm.script(reply('Sentinel of the issue'));
      queued(await forge.sendWebhook({ type: 'issue-comment', issue, body: '@errand and now?' }));
      await ended(made.id as string, 2);
      assert.equal(
        (await jobs()).filter((j) => j.origin?.number === issue.number).length,
        1,
        'the label made a second job',
      );
    });

    test('a labelled issue opens a job whose pull request closes it', async () => {
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: 'TYPO.md', content: 'fixed\n' } }]),
        reply('Fix the typo\n\nThe word is spelt right now.'),
      );
      const issue = forge.openIssue('Typo in the notes', 'The notes say "teh".');
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' }));
      const made = await jobOfIssue(issue.number);
      assert.equal(made.origin?.forge, c.forge);
      assert.equal(made.origin?.title, 'Typo in the notes');
      const done = await untilStatus(svc, projectId, made.id as string, 'completed', {
        failFast: true,
      });
      const prompt = promptsSeen().find((p) => p.includes('Typo in the notes'));
      assert.ok(prompt?.includes('teh'), "the prompt lacks the issue's body");
      const pr = forge.pulls().find((p) => p.url === done.prLink);
      assert.ok(pr, `no pull request at ${done.prLink}`);
      assert.match(pr.body, new RegExp(`Closes #${issue.number}\\b`));
      // On the issue: the job's link at once, the outcome when the turn ends.
      const jobLink = `${svc.url}/projects/${projectId}/jobs/${made.id}`;
      const said = await waitFor('both answers on the issue', async () => {
        const on = saidOn(issue.number);
        return on.length === 2 ? on : undefined;
      });
      assert.ok(said[0]?.body.includes(jobLink), said[0]?.body);
      assert.match(said[1]?.body ?? '', /Fix the typo/);
      // The link is the job's page on the dashboard, which names the issue.
      const cookie = await sessionCookie(svc, svc.adminKey);
      const page = await getPage(svc, cookie, `/projects/${projectId}/jobs/${made.id}`);
      assert.equal(page.status, 200);
      assert.match(page.text, new RegExp(`#${issue.number} Typo in the notes`));

      // Another mention on the issue while its job is open: a follow-up of that job.
      llm.script(reply('Checked the other pages too'));
      const count = (await jobs()).length;
      queued(
        await forge.sendWebhook({ type: 'issue-comment', issue, body: '@errand check the others' }),
      );
      await waitFor('the follow-up on the issue to end', async () => {
        const current = (await svc.request('GET', `/v2/agent/${projectId}/job/${made.id}`)).json;
        return current.turns === 2 && current.status === 'completed' ? current : undefined;
      });
      assert.equal((await jobs()).length, count, 'a second mention made another job');
      await waitFor('the answer on the issue', async () =>
        saidOn(issue.number).find((s) => /Checked the other pages/.test(s.body)),
      );
    });

    test('a mention in a comment on an issue opens a job whose pull request closes it', async () => {
      llm.script(
        toolCalls([
          { name: 'write_file', input: { path: 'CONTRIBUTING.md', content: '# Contributing\n' } },
        ]),
        reply('Add a contributing guide\n\nIt says how to send a change.'),
      );
      const issue = forge.openIssue(
        'No contributing guide',
        'New people ask how to send changes, every week.',
      );
      const count = (await jobs()).length;
      const comment = await forge.sendWebhook({
        type: 'issue-comment',
        issue,
        body: '@errand please write a CONTRIBUTING.md for them',
      });
      queued(comment);
      const made = await jobOfIssue(issue.number);
      assert.equal(made.origin?.forge, c.forge);
      assert.equal(made.origin?.number, issue.number);
      assert.equal(made.origin?.title, 'No contributing guide');
      assert.match(made.origin?.url ?? '', new RegExp(`/${issue.number}$`));
      // Who asked: the forge user who wrote the comment, on the job and in the audit log.
      const asker = { kind: 'forge', forge: c.forge, login: REVIEWER.login };
      assert.deepEqual(made.createdBy, asker);
      const row = await svc.service.ctx.db
        .selectFrom('audit_log')
        .select(['action', 'actor', 'address'])
        .where('target_id', '=', made.id as string)
        .executeTakeFirst();
      assert.deepEqual(row, { action: 'job.create', actor: asker, address: null });
      const done = await untilStatus(svc, projectId, made.id as string, 'completed', {
        failFast: true,
      });
      assert.equal((await jobs()).length, count + 1);
      // The job's prompt: the issue's title and body, and the comment that asked, by whom.
      const prompt = promptsSeen().find((p) => p.includes('No contributing guide'));
      assert.ok(prompt, "the model never saw the issue's title");
      assert.ok(prompt.includes('every week'), "the prompt lacks the issue's body");
      assert.ok(prompt.includes('please write a CONTRIBUTING.md'), 'the prompt lacks the comment');
      assert.ok(prompt.includes(`@${REVIEWER.login}`), "the prompt lacks the comment's author");
      const pr = forge.pulls().find((p) => p.url === done.prLink);
      assert.ok(pr, `no pull request at ${done.prLink}`);
      assert.match(pr.body, new RegExp(`Closes #${issue.number}\\b`));
      assert.ok(forge.acknowledged(comment), 'the comment got no 👀');
      // On the issue: the job's link at once, then the outcome in the comment's thread.
      const jobLink = `${svc.url}/projects/${projectId}/jobs/${made.id}`;
      const said = await waitFor('both answers on the issue', async () => {
        const on = saidOn(issue.number);
        return on.length === 2 ? on : undefined;
      });
      const outcome = said.find((s) => /Add a contributing guide/.test(s.body));
      const link = said.find((s) => s !== outcome);
      assert.ok(link?.body.includes(jobLink), link?.body);
      assert.ok(outcome?.inThreadOf(comment), JSON.stringify(said));
    });

    test('another label on an issue whose job is archived makes no job again (Gitea reports every label)', async () => {
      llm.script(reply('Looked into it\n\nNothing to change.'));
      const issue = forge.openIssue('Slow start', 'It takes a minute to start.');
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' }));
      const first = await jobOfIssue(issue.number);
      await untilStatus(svc, projectId, first.id as string, 'completed', { failFast: true });
      const archived = await svc.request('POST', `/v2/agent/${projectId}/job/${first.id}/archive`);
      assert.equal(archived.status, 200, archived.text);
      const count = (await jobs()).length;
      // Someone adds `bug`; Gitea's delivery says the issue carries `errand` and `bug`.
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'bug', others: ['errand'] }));
      // The sentinel: a mention, taken after the label, makes the issue's next job.
      llm.script(reply('Profiled the start'));
      queued(
        await forge.sendWebhook({
          type: 'issue-comment',
          issue,
          body: '@errand profile the start',
        }),
      );
      const second = await waitFor('the job of the mention', async () =>
        (await jobs()).find((j) => j.origin?.number === issue.number && j.id !== first.id),
      );
      await untilStatus(svc, projectId, second.id as string, 'completed', { failFast: true });
      assert.equal((await jobs()).length, count + 1, 'the label made a job again');
      assert.ok(promptsSeen().some((p) => p.includes('profile the start')));
    });

    test("no write access, a bot, Errand's own comment and another repository change nothing", async () => {
      const issue = forge.openIssue('Add a changelog', 'We need a CHANGELOG.md.');
      const before = (await jobs()).length;
      const visitor = await forge.sendWebhook({
        type: 'issue-comment',
        issue,
        body: '@errand do it',
        author: VISITOR,
      });
      queued(visitor);
      queued(
        await forge.sendWebhook({
          type: 'issue-comment',
          issue,
          body: '@Errand again?',
          author: VISITOR,
        }),
      );
      queued(
        await forge.sendWebhook({
          type: 'issue-comment',
          issue,
          body: '@errand bot says so',
          author: BOT,
        }),
      );
      // Errand's own comment, as a token that is a person's posts it: known by its marker.
      queued(
        await forge.sendWebhook({
          type: 'issue-comment',
          issue,
          body: `${ERRAND_MARKER}\nI was asked by @errand to say so`,
        }),
      );
      queued(
        await forge.sendWebhook(
          { type: 'issue-comment', issue, body: '@errand in another repository' },
          { repo: 'acme/other' },
        ),
      );
      // The sentinel: events of one issue are taken in order, so once this one's job exists,
      // every delivery above has been dealt with.
      llm.script(reply('Nothing to do for now.'));
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' }));
      const sentinel = await jobOfIssue(issue.number);
      await untilStatus(svc, projectId, sentinel.id as string, 'completed', { failFast: true });
      assert.equal((await jobs()).length, before + 1, 'only the sentinel made a job');
      const prompts = promptsSeen();
      assert.ok(
        !prompts.some((p) =>
          /do it|again\?|bot says so|asked by @errand|another repository/.test(p),
        ),
      );
      // One polite answer to the visitor, however often they ask; nothing for the others.
      const refusals = saidOn(issue.number).filter((s) => /write access/.test(s.body));
      assert.equal(refusals.length, 1, JSON.stringify(saidOn(issue.number)));
      assert.ok(refusals[0]?.body.includes(`@${VISITOR.login}`));
      assert.ok(!forge.acknowledged(visitor), "the visitor's comment got a 👀");
    });

    test('a refusal of the service is answered where it was asked', async () => {
      const archived = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
      assert.equal(archived.status, 200, archived.text);
      const comment = await forge.sendWebhook({
        type: 'comment',
        pull: pull.number,
        body: '@errand one more thing',
      });
      queued(comment);
      const answer = await waitFor('the refusal in the thread', async () =>
        forge.said().find((s) => s.inThreadOf(comment) && /cannot take this up/.test(s.body)),
      );
      assert.match(answer.body, /archived/);
      assert.ok(!promptsSeen().some((p) => p.includes('one more thing')));
    });

    test('nothing Errand wrote on the forge opens a job to the thread’s readers', async () => {
      const written = [...forge.said(), ...forge.pulls()];
      assert.ok(written.length > 0);
      let links = 0;
      for (const { body } of written) links += await assertRevealsNoJob(svc, body);
      assert.ok(links > 0, 'no pull request links its review page');
    });

    test('a turn accepted before a restart is answered by the process that ends it', async () => {
      const issue = forge.openIssue('Add a licence', 'Pick MIT.');
      llm.script(
        // The first process's model call is never answered: the process stops during it.
        dynamic(async (request) => {
          await waitFor(
            'the stopping process to hang up',
            async () => request.aborted || undefined,
          );
          return { type: 'error', status: 500 };
        }),
        toolCalls([{ name: 'write_file', input: { path: 'LICENSE', content: 'MIT\n' } }]),
        reply('Add the MIT licence'),
      );
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' }));
      const made = await jobOfIssue(issue.number);
      await llm.waitFor((r) => r.index === 0);
      await svc.stop();
      svc = await startTestService({
        env: serviceEnv(),
        database: svc.database,
        adminKey: svc.adminKey,
      });
      await untilStatus(svc, projectId, made.id as string, 'completed', { failFast: true });
      const answer = await waitFor('the answer on the issue', async () =>
        saidOn(issue.number).find((s) => /Add the MIT licence/.test(s.body)),
      );
      assert.ok(answer.body.includes(`${svc.url}/projects/${projectId}/jobs/${made.id}`));
    });

    // Last: it stops the service.
    test('a service stopping while it answers on the forge stops once the answer is given', async (t) => {
      if (!forge.holdNextComment)
        return t.skip(
          'one forge worker for every forge: tested on GitHub, whose fake can hold a request',
        );
      // The same service, again, with its log watched for the line that says its stop waits.
      let stopWaits = () => {};
      const waiting = new Promise<'waiting'>((resolve) => {
        stopWaits = () => resolve('waiting');
      });
      const sink = new Writable({
        write(chunk, _encoding, done) {
          if (String(chunk).includes('stopping waits for the forge answers')) stopWaits();
          done();
        },
      });
      await svc.stop();
      svc = await startTestService({
        env: serviceEnv(),
        database: svc.database,
        adminKey: svc.adminKey,
        log: createLogger('info', sink),
      });
      const issue = forge.openIssue('Add a changelog', 'Start one.');
      llm.script(
        toolCalls([
          { name: 'write_file', input: { path: 'CHANGELOG.md', content: '# Changelog\n' } },
        ]),
        reply('Start the changelog'),
      );
      const held = forge.holdNextComment(/Start the changelog/);
      queued(await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' }));
      // The turn has ended and its answer is at the forge, which does not answer yet.
      await held.arrived;
      const stopping = svc.stop().then(() => 'stopped' as const);
      assert.equal(
        await Promise.race([stopping, waiting]),
        'waiting',
        'the service stopped before its answer was given',
      );
      held.release();
      await stopping;
      assert.ok(
        saidOn(issue.number).some((s) => /Start the changelog/.test(s.body)),
        'the answer is not on the issue',
      );
    });
  });
}

// The service's refusals said on the forge, readably, on GitHub (the other forges answer through
// the same code): a project whose job budget is spent, and one whose rate limit is used up. The
// model is priced (an operator's catalog file), as a budget needs; one job creation per window.
describe('refusals of the service, said on github', () => {
  const c = cases[0] as Case;
  let tmp: string;
  let gitServer: GitHttpServer;
  let forge: IntakeFake;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;
  const webhook = () => `${svc.url}/v2/forges/${projectId}/webhook`;

  before(async () => {
    tmp = await makeTempDir('intake-refusals');
    const root = path.join(tmp, 'served');
    await makeServedRepo(root, tmp);
    gitServer = await startGitHttpServer({
      projectRoot: root,
      authorization: basic(c.gitUser, c.token),
    });
    forge = await c.start(c.token, webhook);
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    const catalog = path.join(tmp, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify({
        'openai:gpt-test': {
          inputUsdPerMTok: 1000,
          outputUsdPerMTok: 1000,
          cacheReadUsdPerMTok: 100,
          cacheWriteUsdPerMTok: 1000,
        },
      }),
    );
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_SECRET_KEY: 'test-secret-key-for-errand-intake',
        ERRAND_MODEL_CATALOG: catalog,
        // One job creation per window, and a window no test run ends in.
        ERRAND_RATE_LIMIT_CREATE: '1',
        ERRAND_RATE_LIMIT_WINDOW_SECONDS: String(31 * 86_400),
      },
    });
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'refusals',
        repository: `${gitServer.url}/acme/app.git`,
        forge: c.forge,
        forgeUrl: forge.apiUrl,
        forgeToken: c.token,
        forgeWebhookSecret: SECRET,
      },
    });
    assert.equal(project.status, 201, project.text);
    projectId = project.json.id as string;
    forge.grant(REVIEWER, true);
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await forge?.close();
    await gitServer?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
      forge.assertNoUnexpected();
    } finally {
      llm.reset();
    }
  });

  const jobs = async (): Promise<JobRecord[]> =>
    (await svc.request('GET', `/v2/agent/${projectId}/jobs?limit=100`)).json.jobs ?? [];
  let jobId: string;
  let pull: { number: number; url: string };

  before(async () => {
    // The window's one creation: a job with a pull request, and a cost.
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: '# Notes\n' } }]),
      reply('Add notes'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Add a NOTES.md' },
    });
    assert.equal(created.status, 201, created.text);
    jobId = created.json.id as string;
    const done = await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
    assert.ok((done.usage?.costUsd ?? 0) > 1, JSON.stringify(done.usage));
    const found = forge.pulls().find((p) => p.url === done.prLink);
    assert.ok(found, `no pull request at ${done.prLink}`);
    pull = found;
  });

  test("a mention on the pull request of a job that spent its budget: the reason in the comment's thread, no turn", async () => {
    const patched = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
      body: { jobBudgetUsd: 1 },
    });
    assert.equal(patched.status, 200, patched.text);
    try {
      const comment = await forge.sendWebhook({
        type: 'comment',
        pull: pull.number,
        body: '@errand add a second page',
      });
      assert.equal(comment.status, 202, comment.text);
      const answer = await waitFor('the refusal in the thread', async () =>
        forge.said().find((s) => s.inThreadOf(comment) && /cannot take this up/.test(s.body)),
      );
      const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
      assert.equal(
        answer.body,
        `${ERRAND_MARKER}\nErrand cannot take this up: job ${jobId} has spent ${formatUsd(job.usage?.costUsd)} of its budget of $1.00 (the project's jobBudgetUsd): raise the budget to continue it.`,
      );
      assert.ok(!forge.acknowledged(comment), 'a refused comment got a 👀');
      assert.equal(job.turns, 1);
      assert.ok(!llm.requests.some((r) => JSON.stringify(r.body).includes('a second page')));
    } finally {
      await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
        body: { jobBudgetUsd: null },
      });
    }
  });

  test('a labelled issue once the rate limit is used up: the limit and the wait on the issue, no job', async () => {
    const before = (await jobs()).length;
    const issue = forge.openIssue('Add a changelog', 'We need a CHANGELOG.md.');
    const labelled = await forge.sendWebhook({ type: 'labeled', issue, label: 'errand' });
    assert.equal(labelled.status, 202, labelled.text);
    const answer = await waitFor('the refusal on the issue', async () =>
      forge.said().find((s) => s.onIssue && s.number === issue.number),
    );
    assert.match(
      answer.body,
      /^<!-- errand -->\nErrand cannot take this up: the project's limit of 1 new job per 31 days is reached; ask again in \d+ (days?|hours?|minutes?|seconds?)\.$/,
    );
    assert.equal((await jobs()).length, before, 'the refused issue made a job');
  });
});

// Someone without write access mentioning the handle in thread after thread, and again and again
// in one, on each forge: one answer per thread and five an hour at most, one permission call a
// minute for them, every event on the dashboard with what became of it, and someone with write
// access still heard. The forge worker runs here on the service's context with a clock the test
// moves (the hour is not waited out); no turn runs (none would for an outsider).
for (const c of cases) {
  describe(`an outsider mentioning the handle everywhere, on ${c.forge}`, () => {
    let forge: IntakeFake;
    let svc: TestService;
    let worker: ForgeWorker;
    let projectId: string;
    let now = new Date();

    before(async () => {
      forge = await c.start(c.token, () => `${svc.url}/v2/forges/${projectId}/webhook`);
      svc = await startTestService({
        worker: false,
        env: { ERRAND_SECRET_KEY: 'test-secret-key-for-errand-intake' },
      });
      const project = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name: `outsiders on ${c.forge}`,
          // Never fetched: no turn runs here. Its host and path are the fake's repository's.
          repository: 'http://127.0.0.1:9/acme/app.git',
          forge: c.forge,
          forgeUrl: forge.apiUrl,
          forgeToken: c.token,
          forgeWebhookSecret: SECRET,
        },
      });
      assert.equal(project.status, 201, project.text);
      projectId = project.json.id as string;
      forge.grant(REVIEWER, true);
      forge.grant(VISITOR, false);
      worker = await startForgeWorker(svc.service.ctx, svc.url, { now: () => now });
    });
    after(async () => {
      await worker?.stop();
      await svc?.close();
      await forge?.close();
    });

    const records = () =>
      svc.service.ctx.db
        .selectFrom('forge_events')
        .selectAll()
        .where('project_id', '=', projectId)
        .execute();
    /** Every recorded event once the worker has decided them all (`count` of them). */
    const decided = (count: number) =>
      waitFor(`${count} events decided`, async () => {
        const rows = await records();
        return rows.length === count && rows.every((r) => r.outcome !== 'queued')
          ? rows
          : undefined;
      });
    const mention = async (issue: { number: number; title: string; body: string }, n = 1) => {
      for (let i = 0; i < n; i++) {
        const answer = await forge.sendWebhook({
          type: 'issue-comment',
          issue,
          body: `@errand please do it (${i + 1})`,
          author: VISITOR,
        });
        assert.equal(answer.status, 202, answer.text);
      }
    };
    /** Where Errand's requests start: the test's own (a pull request opened) come before. */
    let from = 0;
    /** The requests Errand made: permission questions and comments or reactions posted. */
    const made = () => {
      const requests = forge.requests().slice(from);
      const asked = requests.filter(
        (r) => r.method === 'GET' && /\/permission$|\/members\/all\/\d+$/.test(r.path),
      );
      const posted = requests.filter((r) => r.method === 'POST');
      return { asked: asked.length, posted: posted.length, all: requests.length };
    };
    const refusalsOn = (number: number) =>
      forge.said().filter((s) => s.number === number && /write access/.test(s.body));

    test('one answer per thread, five an hour; every event on the dashboard; write access still heard', async () => {
      // A mention on a pull request no job opened asks for nothing: no question, no answer.
      const pull = await forge.openPull();
      from = forge.requests().length;
      const onPull = await forge.sendWebhook({
        type: 'comment',
        pull,
        body: '@errand review this',
        author: VISITOR,
      });
      assert.equal(onPull.status, 202, onPull.text);
      const [ignored] = await decided(1);
      assert.equal(ignored?.outcome, 'ignored');
      assert.equal(ignored?.reason, 'no job of this project on this pull request');
      assert.deepEqual(made(), { asked: 0, posted: 0, all: 0 });

      const threads = Array.from({ length: 7 }, (_, i) =>
        forge.openIssue(`Outsider's wish ${i + 1}`, 'Please.'),
      );
      const [first, ...others] = threads as [(typeof threads)[0], ...typeof threads];
      // Three times in one thread: told once.
      await mention(first, 3);
      await decided(4);
      assert.equal(refusalsOn(first.number).length, 1);
      // Once in each of six more threads: four are told, then the hour's five are given.
      for (const issue of others) await mention(issue);
      let rows = (await decided(10)).filter((r) => r.thread_kind === 'issue');
      const told = threads.filter((t) => refusalsOn(t.number).length === 1);
      assert.equal(told.length, 5, JSON.stringify(forge.said()));
      for (const t of threads) assert.ok(refusalsOn(t.number).length <= 1, `#${t.number}`);
      assert.ok(refusalsOn(first.number)[0]?.body.includes(`@${VISITOR.login}`));
      const reasons = (pattern: RegExp) => rows.filter((r) => pattern.test(r.reason ?? '')).length;
      assert.ok(rows.every((r) => r.outcome === 'refused' && r.author === VISITOR.login));
      assert.equal(reasons(/; told in the thread$/), 5);
      assert.equal(reasons(/told in this thread before, not again/), 2);
      assert.equal(reasons(/not told: the project gave its 5 answers/), 2);
      // One question to the forge for all nine, and nothing else than the five answers.
      assert.deepEqual(made(), { asked: 1, posted: 5, all: 6 });

      // Someone with write access is heard all the same: a job, 👀 and its link on the issue.
      const untold = threads.find((t) => refusalsOn(t.number).length === 0);
      assert.ok(untold);
      const asked = await forge.sendWebhook({
        type: 'issue-comment',
        issue: untold,
        body: '@errand then I ask',
      });
      assert.equal(asked.status, 202, asked.text);
      rows = await decided(11);
      const accepted = rows.find((r) => r.author === REVIEWER.login);
      assert.equal(accepted?.outcome, 'accepted', accepted?.reason ?? '');
      assert.ok(forge.acknowledged(asked), 'the maintainer got no 👀');
      assert.deepEqual(made(), { asked: 2, posted: 7, all: 9 });

      // Every event on the forge webhook page, with what became of it and why.
      const cookie = await sessionCookie(svc, svc.adminKey);
      const page = await getPage(svc, cookie, `/projects/${projectId}/forge-webhook`);
      assert.equal(page.status, 200);
      const count = (pattern: RegExp) => (page.text.match(pattern) ?? []).length;
      assert.equal(count(/<span class="badge [a-z]+">refused<\/span>/g), 9);
      assert.equal(count(/<span class="badge [a-z]+">accepted<\/span>/g), 1);
      assert.equal(count(/<span class="badge [a-z]+">ignored<\/span>/g), 1);
      assert.equal(count(/@visitor has no write access; told in the thread</g), 5);
      assert.equal(
        count(/@visitor has no write access; told in this thread before, not again/g),
        2,
      );
      assert.equal(count(/@visitor has no write access; not told: the project gave its 5/g), 2);
      for (const t of threads) assert.ok(page.text.includes(`>#${t.number}</a> by @visitor`));

      // An hour on, the outsider asks again: in a thread told already (not again), and in one
      // never told (told now). The forge is asked again, the minute being long over.
      now = new Date(now.getTime() + 61 * 60_000);
      const neverTold = threads.find((t) => t !== untold && refusalsOn(t.number).length === 0);
      assert.ok(neverTold);
      await mention(first);
      await mention(neverTold);
      await decided(13);
      assert.equal(refusalsOn(first.number).length, 1);
      assert.equal(refusalsOn(neverTold.number).length, 1);
      assert.deepEqual(made(), { asked: 3, posted: 8, all: 11 });
    });
  });
}
