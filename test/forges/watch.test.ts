// The pull request watch end to end for GitHub, GitLab and Gitea: a job's turn opens its pull
// request on the forge's fake (whose pull request heads are the real git server's branches),
// the fake's CI reports checks and the fake sends signed webhooks in the forge's own shapes;
// the real service looks, queues the turns that fix checks or bring the base in (run by the
// fake model on the real git server), and merges through the forge's merge API when the
// project allows.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { type PrWatcher, startPrWatcher } from '../../src/features/pr-watch/worker.ts';
import type { JobRecord } from '../../src/records/job.ts';
import { startFakeGitea } from '../support/fake-gitea.ts';
import { startFakeGitHub } from '../support/fake-github.ts';
import { startFakeGitLab } from '../support/fake-gitlab.ts';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import type { ForgeRequest, RequestAnswer } from '../support/forge-requests.ts';
import {
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
  writeFiles,
} from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MODEL_KEY = 'sk-test-watch-8e2b4c6d';
const SECRET = 'watch-webhook-secret-0123456789';
const REPO = 'acme/app';
const basic = (user: string, token: string) =>
  `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

type CheckInput = {
  name: string;
  state: 'pending' | 'success' | 'failure';
  log?: string;
  summary?: string;
};

/** What the tests do with a forge's fake, the same for the three. */
interface WatchFake {
  apiUrl: string;
  send(request: ForgeRequest): Promise<RequestAnswer>;
  setCheck(sha: string, check: CheckInput): void;
  setMergeable(number: number, mergeable: boolean | null): void;
  approve(number: number): void;
  addPullLabel(number: number, label: string): void;
  merges(): Array<{ number: number; method: string; sha: string }>;
  /** What Errand wrote in the conversation of pull request `number`. */
  said(number: number): string[];
  assertNoUnexpected(): void;
  close(): Promise<void>;
}

interface Case {
  forge: 'github' | 'gitlab' | 'gitea';
  token: string;
  gitUser: string;
  start(
    token: string,
    webhook: () => string,
    heads: (repo: string, branch: string) => string | undefined,
  ): Promise<WatchFake>;
}

/** The commit a branch of the served repository `bare` is at, if it has it. */
function headOf(bare: string, branch: string): string | undefined {
  try {
    return git(bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`);
  } catch {
    return undefined;
  }
}

/** What the three fakes share, by the same names (each forge's own types besides). */
interface SharedFake {
  apiUrl: string;
  sendWebhook(target: string, secret: string, request: ForgeRequest): Promise<RequestAnswer>;
  setCheck(repo: string, sha: string, check: CheckInput): void;
  setMergeable(repo: string, number: number, mergeable: boolean | null): void;
  approve(repo: string, number: number, login: string): void;
  addPullLabel(repo: string, number: number, label: string): void;
  merges(): Array<{ number: number; method: string; sha: string }>;
  assertNoUnexpected(): void;
  close(): Promise<void>;
}

/** A fake as the tests drive it; `said` reads Errand's comments on pull request `number`. */
function watchFake(
  fake: SharedFake,
  webhook: () => string,
  said: (number: number) => string[],
): WatchFake {
  return {
    apiUrl: fake.apiUrl,
    send: (request) => fake.sendWebhook(webhook(), SECRET, request),
    setCheck: (sha, check) => fake.setCheck(REPO, sha, check),
    setMergeable: (number, mergeable) => fake.setMergeable(REPO, number, mergeable),
    approve: (number) => fake.approve(REPO, number, 'reviewer'),
    addPullLabel: (number, label) => fake.addPullLabel(REPO, number, label),
    merges: () => fake.merges(),
    said,
    assertNoUnexpected: () => fake.assertNoUnexpected(),
    close: () => fake.close(),
  };
}

/** Errand's token acts as this user on every fake. */
const byErrand = (c: { author: string; body: string }) => c.author === 'errand-bot';

const cases: Case[] = [
  {
    forge: 'github',
    token: 'ghp_watchtoken0123456789abcdef',
    gitUser: 'x-access-token',
    async start(token, webhook, heads) {
      const fake = await startFakeGitHub({ repos: [REPO], token, heads });
      return watchFake(fake, webhook, (number) =>
        fake
          .comments(REPO)
          .filter((c) => c.number === number && byErrand(c))
          .map((c) => c.body),
      );
    },
  },
  {
    forge: 'gitlab',
    token: 'glpat-watchtoken0123456789',
    gitUser: 'oauth2',
    async start(token, webhook, heads) {
      const fake = await startFakeGitLab({ token, projects: [REPO], heads });
      return watchFake(fake, webhook, (number) =>
        fake
          .notes(REPO)
          .filter((n) => n.on === 'merge_request' && n.iid === number && byErrand(n))
          .map((n) => n.body),
      );
    },
  },
  {
    forge: 'gitea',
    token: 'giteawatchtoken0123456789a',
    gitUser: 'errand',
    async start(token, webhook, heads) {
      const fake = await startFakeGitea({ token, repos: [REPO], heads });
      return watchFake(fake, webhook, (number) =>
        fake
          .comments(REPO)
          .filter((c) => c.number === number && byErrand(c))
          .map((c) => c.body),
      );
    },
  },
];

/** A project secret a CI job prints in its log. */
const DEPLOY_TOKEN = 'dpl-7f3c9a1e5b2d8046';

for (const c of cases) {
  describe(`the pull request watch on ${c.forge}`, () => {
    let tmp: string;
    let bare: string;
    let scratch: string;
    let gitServer: GitHttpServer;
    let forge: WatchFake;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;
    const webhook = () => `${svc.url}/v2/forges/${projectId}/webhook`;

    const head = (branch: string) => headOf(bare, branch);

    /** A commit pushed by a person, on `branch` of the served repository. */
    const pushAsPerson = async (branch: string, files: Record<string, string>) => {
      execFileSync('rm', ['-rf', scratch]);
      git(tmp, 'clone', '--quiet', bare, scratch);
      git(scratch, 'checkout', '--quiet', '-B', branch, `origin/${branch}`);
      await writeFiles(scratch, files);
      git(scratch, 'add', '--all');
      git(scratch, '-c', 'user.name=A Person', '-c', 'user.email=p@x', 'commit', '-qm', 'by hand');
      git(scratch, 'push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`);
      return git(scratch, 'rev-parse', 'HEAD');
    };

    before(async () => {
      tmp = await makeTempDir(`watch-${c.forge}`);
      scratch = path.join(tmp, 'scratch');
      const root = path.join(tmp, 'served');
      bare = await makeServedRepo(root, tmp);
      gitServer = await startGitHttpServer({
        projectRoot: root,
        authorization: basic(c.gitUser, c.token),
      });
      forge = await c.start(c.token, webhook, (_repo, branch) => head(branch));
      llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
      // Priced, so that the project can have a budget.
      const catalog = path.join(tmp, 'catalog.json');
      await writeFile(
        catalog,
        JSON.stringify({ 'openai:gpt-test': { inputUsdPerMTok: 1, outputUsdPerMTok: 2 } }),
      );
      svc = await startTestService({
        env: {
          OPENAI_API_KEY: MODEL_KEY,
          OPENAI_BASE_URL: `${llm.url}/v1`,
          ERRAND_MODEL: 'openai:gpt-test',
          ERRAND_MODEL_CATALOG: catalog,
          ERRAND_SECRET_KEY: 'test-secret-key-for-errand-watch',
          // The webhooks drive these tests: no poll comes between.
          ERRAND_PR_POLL_SECONDS: '3600',
        },
      });
      const project = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name: c.forge,
          repository: `${gitServer.url}/${REPO}.git`,
          forge: c.forge,
          forgeUrl: forge.apiUrl,
          forgeToken: c.token,
          forgeWebhookSecret: SECRET,
          autoMerge: 'green-and-approved',
          // A draft is merged only once a person marks it ready.
          draftPullRequests: false,
        },
      });
      assert.equal(project.status, 201, project.text);
      projectId = project.json.id as string;
      await pushAsPerson('main', { 'README.md': 'The app.\n' });
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

    const settings = async (body: Record<string, unknown>) => {
      const res = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, { body });
      assert.equal(res.status, 200, res.text);
    };
    const getJob = async (jobId: string): Promise<JobRecord> =>
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json as JobRecord;
    const eventTypes = async (jobId: string): Promise<string[]> =>
      (
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? []
      ).map((e) => e.type);
    const prompts = () => llm.requests.map((r) => JSON.stringify(r.body));

    /** A job whose one turn writes `file`; returns it with its pull request and head. */
    const jobWithPull = async (file: string, content: string) => {
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: file, content } }]),
        reply(`Write ${file}`),
      );
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: `Write ${file}` },
      });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id as string;
      await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
      const job = await waitFor('the watch to look at the new pull request', async () => {
        const record = await getJob(jobId);
        return record.pr ? record : undefined;
      });
      const pr = job.pr;
      assert.ok(pr);
      assert.equal(pr.state, 'open');
      assert.equal(pr.headSha, head(`errand/${jobId}`));
      return { jobId, number: pr.number, branch: `errand/${jobId}`, sha: pr.headSha };
    };

    /** The job once the watch has looked at its pull request at `sha` (after a turn pushed it). */
    const settled = (jobId: string, sha: string) =>
      waitFor(`the watch to look at ${sha}`, async () => {
        const job = await getJob(jobId);
        return job.pr?.headSha === sha && job.status !== 'active' ? job : undefined;
      });

    /** Sends a check of `sha` and waits for the watch's look that follows. */
    const check = async (
      job: { jobId: string; number: number; branch: string },
      sha: string,
      input: CheckInput,
      pulls = [job.number],
    ) => {
      forge.setCheck(sha, input);
      const before = (await getJob(job.jobId)).pr?.observedAt;
      const answer = await forge.send({
        type: 'check',
        sha,
        branch: job.branch,
        name: input.name,
        state: input.state,
        pulls,
      });
      assert.equal(answer.status, 202, answer.text);
      assert.equal(answer.json.outcome, 'watch', answer.text);
      return lookedAfter(job.jobId, before);
    };

    /** The job once the watch has looked again since `before`, and no turn of it is open. */
    const lookedAfter = (jobId: string, before: string | undefined) =>
      waitFor(`the watch to look at job ${jobId} again`, async () => {
        const job = await getJob(jobId);
        const looked = job.pr && job.pr.observedAt !== before;
        return looked && job.status !== 'active' ? job : undefined;
      });

    test('a red check becomes a turn that fixes it; green and approved, the pull request is merged', async () => {
      // A secret the CI job printed reaches the model as its name, never as its value.
      const secret = await svc.request(
        'PUT',
        `/v2/admin/projects/${projectId}/secrets/DEPLOY_TOKEN`,
        {
          body: { value: DEPLOY_TOKEN },
        },
      );
      assert.equal(secret.status, 201, secret.text);
      const job = await jobWithPull('src/sum.js', 'export const sum = (a, b) => a - b;\n');
      llm.script(
        toolCalls([
          {
            name: 'write_file',
            input: { path: 'src/sum.js', content: 'export const sum = (a, b) => a + b;\n' },
          },
        ]),
        reply('Fix sum'),
      );
      await check(job, job.sha, {
        name: 'unit tests',
        state: 'failure',
        // Gitea keeps no log: its status's description, the log's last line here, is it.
        log: `running 12 tests with ${DEPLOY_TOKEN}\nnot ok 3 - sum(1, 2) expected 3, got -1 (${DEPLOY_TOKEN})\n`,
      });
      const fixed = await untilStatus(svc, projectId, job.jobId, 'completed', { failFast: true });
      assert.equal(fixed.turns, 2);
      const prompt = prompts().at(-2) ?? '';
      assert.match(prompt, /unit tests/);
      assert.match(prompt, /expected 3, got -1 \(\[secret DEPLOY_TOKEN\]\)/);
      for (const request of prompts()) assert.ok(!request.includes(DEPLOY_TOKEN));
      const events = await svc.request('GET', `/v2/agent/${projectId}/job/${job.jobId}/events`);
      assert.ok(!events.text.includes(DEPLOY_TOKEN));
      assert.match(prompt, /attempt 1 of 2/);
      const types = await eventTypes(job.jobId);
      assert.ok(types.includes('checks.failed'), types.join());
      assert.ok(types.includes('autofix.queued'), types.join());

      // The fix's head passes; without an approval the project merges nothing.
      const fixedSha = head(job.branch) ?? '';
      assert.notEqual(fixedSha, job.sha);
      await settled(job.jobId, fixedSha);
      const green = await check(job, fixedSha, { name: 'unit tests', state: 'success' });
      assert.equal(green.pr?.headSha, fixedSha);
      assert.deepEqual(
        green.pr?.checks.map((k) => k.state),
        ['success'],
      );
      assert.equal(green.pr?.watch.autofixes, 0, 'a green run resets the attempts');
      assert.deepEqual(forge.merges(), []);

      // Approved: merged with the forge's merge API, for this head, and recorded.
      forge.approve(job.number);
      const before = green.pr?.observedAt;
      const approval = await forge.send({ type: 'approval', pull: job.number });
      assert.equal(approval.json.outcome, 'watch', approval.text);
      const merged = await waitFor('the pull request to be merged', async () => {
        const record = await getJob(job.jobId);
        return record.pr?.state === 'merged' && record.pr.observedAt !== before
          ? record
          : undefined;
      });
      assert.equal(merged.pr?.watch.state, 'ended');
      assert.deepEqual(forge.merges(), [
        { repo: REPO, number: job.number, method: 'merge', sha: fixedSha },
      ]);
      assert.ok((await eventTypes(job.jobId)).includes('pr.merged'));
      const audit = await svc.request('GET', '/v2/admin/audit?action=job.merge');
      assert.equal(audit.status, 200, audit.text);
      assert.ok(JSON.stringify(audit.json).includes(job.jobId), audit.text);
    });

    test('a check of a commit that is not the head changes nothing', async () => {
      const job = await jobWithPull('docs/a.md', 'a\n');
      const older = git(bare, 'rev-parse', 'main');
      forge.setCheck(older, { name: 'lint', state: 'failure', log: 'bad' });
      const before = (await getJob(job.jobId)).pr?.observedAt;
      const answer = await forge.send({
        type: 'check',
        sha: older,
        branch: job.branch,
        name: 'lint',
        state: 'failure',
        pulls: [job.number],
      });
      // Gitea names only the commit, which is no watched head: nothing to look at. The others
      // name the pull request, which is looked at, and its own head passes.
      if (answer.json.outcome === 'watch') await lookedAfter(job.jobId, before);
      else assert.equal(answer.json.outcome, 'ignored', answer.text);
      const record = await getJob(job.jobId);
      assert.equal(record.turns, 1);
      assert.equal(record.pr?.watch.state, 'watching');
      assert.ok(!(await eventTypes(job.jobId)).includes('checks.failed'));
    });

    test('checks that keep failing stop after the attempts, with a comment in the thread', async () => {
      await settings({ autofixAttempts: 1 });
      try {
        const job = await jobWithPull('src/a.js', 'broken\n');
        llm.script(
          toolCalls([
            { name: 'write_file', input: { path: 'src/a.js', content: 'still broken\n' } },
          ]),
          reply('Try a fix'),
        );
        await check(job, job.sha, { name: 'build', state: 'failure', log: 'error: broken' });
        await untilStatus(svc, projectId, job.jobId, 'completed', { failFast: true });
        const second = head(job.branch) ?? '';
        await settled(job.jobId, second);
        const paused = await check(job, second, { name: 'build', state: 'failure', log: 'error' });
        assert.equal(paused.turns, 2, 'a turn past the attempts was queued');
        assert.equal(paused.pr?.watch.state, 'paused');
        assert.match(paused.pr?.watch.reason ?? '', /build still fails after 1 attempt/);
        const said = forge.said(job.number);
        assert.equal(said.length, 1, said.join('\n---\n'));
        assert.match(said[0] ?? '', /stopped working on this pull request: build still fails/);
        assert.ok((await eventTypes(job.jobId)).includes('pr.watch_paused'));
      } finally {
        await settings({ autofixAttempts: 2 });
      }
    });

    test('a spent budget stops a pull request that keeps failing, with its comment', async () => {
      const job = await jobWithPull('src/b.js', 'b\n');
      // What the job spent is over its budget now: the fix is refused.
      await settings({ jobBudgetUsd: 0.000_001 });
      try {
        await svc.service.ctx.db
          .updateTable('jobs')
          .set({
            usage: JSON.stringify({
              inputTokens: 10,
              outputTokens: 10,
              cacheReadTokens: 0,
              cacheWriteTokens: 0,
              costUsd: 0.01,
            }),
          })
          .where('id', '=', job.jobId)
          .execute();
        const paused = await check(job, job.sha, { name: 'test', state: 'failure', log: 'x' });
        assert.equal(paused.turns, 1);
        assert.equal(paused.pr?.watch.state, 'paused');
        assert.match(paused.pr?.watch.reason ?? '', /budget/);
        assert.match(forge.said(job.number)[0] ?? '', /budget/);
      } finally {
        await settings({ jobBudgetUsd: null });
      }
    });

    test("a person's push and the no-errand label leave the pull request alone", async () => {
      const pushed = await jobWithPull('src/c.js', 'c\n');
      const theirs = await pushAsPerson(pushed.branch, { 'src/c.js': 'c, by hand\n' });
      forge.setCheck(theirs, { name: 'test', state: 'failure', log: 'x' });
      const before = (await getJob(pushed.jobId)).pr?.observedAt;
      const sync = await forge.send({
        type: 'pull-request',
        pull: pushed.number,
        action: 'synchronize',
      });
      assert.equal(sync.json.outcome, 'watch', sync.text);
      const alone = await lookedAfter(pushed.jobId, before);
      assert.equal(alone.turns, 1);
      assert.equal(alone.pr?.headSha, theirs);
      assert.equal(alone.pr?.watch.state, 'paused');
      assert.match(alone.pr?.watch.reason ?? '', /someone else pushed/);

      const labelled = await jobWithPull('src/d.js', 'd\n');
      forge.addPullLabel(labelled.number, 'no-errand');
      const left = await check(labelled, labelled.sha, { name: 'test', state: 'failure' });
      assert.equal(left.turns, 1);
      assert.match(left.pr?.watch.reason ?? '', /no-errand label/);
      assert.deepEqual(forge.said(labelled.number), []);
    });

    // The pull request's state comes from the forge's API; GitHub's fake changes it with the delivery.
    if (c.forge === 'github')
      test('a pull request closed is said once and no longer watched; opened again, it is', async () => {
        const job = await jobWithPull('docs/closed.md', 'c\n');
        const closed = await forge.send({
          type: 'pull-request',
          pull: job.number,
          action: 'closed',
        });
        assert.equal(closed.json.outcome, 'watch', closed.text);
        const ended = await waitFor('the watch to end', async () => {
          const record = await getJob(job.jobId);
          return record.pr?.state === 'closed' ? record : undefined;
        });
        assert.equal(ended.pr?.watch.state, 'ended');
        const before = ended.pr?.observedAt;
        const again = await forge.send({
          type: 'pull-request',
          pull: job.number,
          action: 'reopened',
        });
        assert.equal(again.json.outcome, 'watch', again.text);
        const reopened = await lookedAfter(job.jobId, before);
        assert.equal(reopened.pr?.state, 'open');
        assert.equal(reopened.pr?.watch.state, 'watching');
        const types = await eventTypes(job.jobId);
        assert.equal(types.filter((t) => t === 'pr.closed').length, 1, types.join());
      });

    // GitLab says a pull request "needs a rebase" where the project merges fast-forward only.
    if (c.forge === 'gitlab')
      test('with conflictStrategy "rebase", a base that moved is rebased onto without the model', async () => {
        await settings({ conflictStrategy: 'rebase' });
        try {
          const job = await jobWithPull('docs/r.md', 'r\n');
          const base = await pushAsPerson('main', { 'docs/other.md': 'other\n' });
          forge.setMergeable(job.number, false);
          const answer = await forge.send({ type: 'push', ref: 'refs/heads/main', after: base });
          assert.equal(answer.json.outcome, 'watch', answer.text);
          await waitFor('the need of a rebase to be seen', async () =>
            (await eventTypes(job.jobId)).includes('pr.conflicted') ? true : undefined,
          );
          forge.setMergeable(job.number, true);
          const done = await untilStatus(svc, projectId, job.jobId, 'completed', {
            failFast: true,
          });
          assert.equal(done.turns, 2);
          const rebased = head(job.branch) ?? '';
          assert.notEqual(rebased, job.sha);
          assert.equal(git(bare, 'rev-parse', `${rebased}^`), base, 'not on the new base');
          assert.equal(git(bare, 'rev-list', '--count', `${base}..${rebased}`), '1');
          const events =
            (await svc.request('GET', `/v2/agent/${projectId}/job/${job.jobId}/events`)).json
              .events ?? [];
          const integrated = events.find((e) => e.type === 'base.integrated');
          assert.match(JSON.stringify(integrated?.data), /"outcome":"rebased"/);
          await settled(job.jobId, rebased);
        } finally {
          await settings({ conflictStrategy: 'merge' });
        }
      });

    test('a conflict with the base is resolved by a turn that merges the base in', async () => {
      const job = await jobWithPull('README.md', 'The app, as the job wrote it.\n');
      const base = await pushAsPerson('main', { 'README.md': 'The app, as a person wrote it.\n' });
      forge.setMergeable(job.number, false);
      llm.script(
        toolCalls([
          {
            name: 'write_file',
            input: { path: 'README.md', content: 'The app, as both wrote it.\n' },
          },
        ]),
        reply('Resolve the README conflict'),
      );
      const answer = await forge.send({ type: 'push', ref: 'refs/heads/main', after: base });
      assert.equal(answer.json.outcome, 'watch', answer.text);
      await waitFor('the conflict to be seen', async () =>
        (await eventTypes(job.jobId)).includes('pr.conflicted') ? true : undefined,
      );
      // The forge works the merge out again once the turn pushes; here, before it has.
      forge.setMergeable(job.number, true);
      const done = await untilStatus(svc, projectId, job.jobId, 'completed', { failFast: true });
      assert.equal(done.turns, 2);
      assert.match(prompts().at(-2) ?? '', /<<<<<<< HEAD/);
      const merged = head(job.branch) ?? '';
      assert.equal(git(bare, 'rev-parse', `${merged}^2`), base);
      assert.equal(git(bare, 'show', `${merged}:README.md`), 'The app, as both wrote it.');
      const types = await eventTypes(job.jobId);
      assert.ok(types.includes('pr.conflicted'), types.join());
      assert.ok(types.includes('base.integrated'), types.join());
    });
  });
}

describe('the pull request watch polls a forge that sends no webhooks', () => {
  const c = cases.find((k) => k.forge === 'gitea');
  let tmp: string;
  let bare: string;
  let gitServer: GitHttpServer;
  let forge: WatchFake;
  let llm: FakeLlm;
  let svc: TestService;
  let watcher: PrWatcher;
  let projectId: string;

  before(async () => {
    assert.ok(c);
    tmp = await makeTempDir('watch-poll');
    const root = path.join(tmp, 'served');
    bare = await makeServedRepo(root, tmp);
    gitServer = await startGitHttpServer({
      projectRoot: root,
      authorization: basic(c.gitUser, c.token),
    });
    forge = await c.start(
      c.token,
      () => {
        throw new Error('this forge sends no webhooks');
      },
      (_repo, branch) => headOf(bare, branch),
    );
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_SECRET_KEY: 'test-secret-key-for-errand-watch',
      },
    });
    // A watcher beside the service's, as another process would run: the test wakes it where the
    // loop's tick would, so no real time passes (the service's own keeps its real timer).
    watcher = startPrWatcher(svc.service.ctx, svc.url);
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'polled',
        repository: `${gitServer.url}/${REPO}.git`,
        forge: c.forge,
        forgeUrl: forge.apiUrl,
        forgeToken: c.token,
        draftPullRequests: false,
      },
    });
    assert.equal(project.status, 201, project.text);
    projectId = project.json.id as string;
  });
  after(async () => {
    await watcher?.stop();
    await svc?.close();
    await llm?.close();
    await forge?.close();
    await gitServer?.close();
    await removeDir(tmp);
  });

  test('a failed check is found by the poll and fixed', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'a.txt', content: 'a\n' } }]),
      reply('Write a.txt'),
      toolCalls([{ name: 'write_file', input: { path: 'a.txt', content: 'fixed\n' } }]),
      reply('Fix a.txt'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Write a.txt' },
    });
    const jobId = created.json.id as string;
    await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
    // The turn's end had the watch look once; with no webhooks from this forge, its next look is
    // one poll (ERRAND_PR_POLL_SECONDS) later, not the ten where webhooks come.
    const { db, config } = svc.service.ctx;
    const poll = await waitFor('the watch’s first look', async () => {
      const row = await db
        .selectFrom('pr_watches')
        .select(sql<number>`extract(epoch FROM next_at - observed_at)::float8`.as('seconds'))
        .where('job_id', '=', jobId)
        .where('observed_at', 'is not', null)
        .executeTakeFirst();
      return row?.seconds;
    });
    assert.equal(poll, config.prPollSeconds);
    const sha = git(bare, 'rev-parse', `refs/heads/errand/${jobId}`);
    forge.setCheck(sha, { name: 'ci', state: 'failure', log: 'a.txt is wrong' });
    // The poll's time comes (the watch is due), and a tick of a watcher's loop looks.
    await db
      .updateTable('pr_watches')
      .set({ next_at: sql<Date>`now()` })
      .where('job_id', '=', jobId)
      .execute();
    await watcher.wake();
    const fixed = await waitFor(
      'the poll’s look to find the failed check and its fix to finish',
      async () => {
        const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
        return job.turns === 2 && job.status === 'completed' ? job : undefined;
      },
      30_000,
    );
    assert.equal(fixed.turns, 2);
    llm.assertDone();
    forge.assertNoUnexpected();
  });
});
