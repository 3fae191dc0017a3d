import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError } from '../../errors.ts';
import { BudgetExhaustedError } from '../../jobs/spend.ts';
import { RateLimitedError } from '../../ratelimit/ratelimit.ts';
import {
  ERRAND_MARKER,
  mentions,
  refused,
  sameRepository,
  turnEnded,
  writtenByErrand,
} from './text.ts';

describe('mentions', () => {
  test('a whole word in any case', () => {
    assert.ok(mentions('@errand please fix', 'errand'));
    assert.ok(mentions('Could you look, @Errand?', 'errand'));
    assert.ok(mentions('cc @errand.', 'errand'));
    assert.ok(mentions('(@errand) rename it', 'errand'));
  });

  test('not a longer name, an address, a path or a quoted line', () => {
    assert.ok(!mentions('@errands please', 'errand'));
    assert.ok(!mentions('@errand-bot please', 'errand'));
    assert.ok(!mentions('write to me@errand.dev', 'errand'));
    assert.ok(!mentions('see https://example.com/@errand', 'errand'));
    assert.ok(!mentions('> @errand do it\n\nthanks, done', 'errand'));
    assert.ok(!mentions('errand without the at', 'errand'));
  });

  test('a handle with a dot matches itself only', () => {
    assert.ok(mentions('@my.bot go', 'my.bot'));
    assert.ok(!mentions('@myxbot go', 'my.bot'));
  });
});

describe('sameRepository', () => {
  test('the web and git forms of one repository', () => {
    assert.ok(sameRepository('https://github.com/Acme/App', 'https://github.com/acme/app.git'));
    assert.ok(
      sameRepository('https://gitlab.example.com/g/s/p', 'git@gitlab.example.com:g/s/p.git'),
    );
    assert.ok(
      sameRepository('https://git.example.com/o/r', 'ssh://git@git.example.com:2222/o/r.git'),
    );
  });

  test('another repository, owner or host', () => {
    assert.ok(!sameRepository('https://github.com/acme/other', 'https://github.com/acme/app.git'));
    assert.ok(!sameRepository('https://github.com/evil/app', 'https://github.com/acme/app.git'));
    assert.ok(!sameRepository('https://github.evil.com/acme/app', 'https://github.com/acme/app'));
    assert.ok(!sameRepository('not a url', 'not a url'));
  });
});

describe('answers', () => {
  test("carry the marker that keeps Errand's own comments from triggering it", () => {
    const body = turnEnded({
      state: 'done',
      summary: 'Renamed it\n\nDetails.',
      commitSha: '0123456789abcdef0123',
      error: null,
      jobId: 'job_x',
      jobUrl: 'https://errand.example.com/projects/p/jobs/job_x',
      prLink: null,
    });
    assert.ok(writtenByErrand(body));
    assert.ok(body.startsWith(ERRAND_MARKER));
    assert.match(body, /Renamed it/);
    assert.match(body, /0123456789ab/);
  });

  test("a review link goes into the thread without its token: the thread's readers are not all the job's", () => {
    const token = 'c0ffee'.repeat(10);
    const body = turnEnded({
      state: 'done',
      summary: 'Renamed it',
      commitSha: '0123456789abcdef0123',
      error: null,
      jobId: 'job_x',
      jobUrl: 'https://errand.example.com/projects/p/jobs/job_x',
      prLink: `https://errand.example.com/review/job_x?token=${token}`,
    });
    assert.ok(!body.includes(token), body);
    assert.match(
      body,
      /Pushed commit 0123456789ab to https:\/\/errand\.example\.com\/review\/job_x\./,
    );
  });

  test('a failed turn says why', () => {
    const body = turnEnded({
      state: 'failed',
      summary: null,
      commitSha: null,
      error: 'the model is unavailable',
      jobId: 'job_x',
      jobUrl: 'https://errand.example.com/projects/p/jobs/job_x',
      prLink: null,
    });
    assert.match(body, /did not work out: the model is unavailable/);
  });
});

describe('refused', () => {
  const state = (limit: number, windowSeconds: number, resetSeconds: number) => ({
    limit,
    remaining: 0,
    windowSeconds,
    resetSeconds,
  });

  test('a rate limit in words, with the wait rounded up to its largest unit', () => {
    assert.equal(
      refused(new RateLimitedError('create', state(1, 31 * 86_400, 20 * 86_400 + 5))),
      `${ERRAND_MARKER}\nErrand cannot take this up: the project's limit of 1 new job per 31 days is reached; ask again in 21 days.`,
    );
    assert.equal(
      refused(new RateLimitedError('message', state(100, 3_600, 754))),
      `${ERRAND_MARKER}\nErrand cannot take this up: the project's limit of 100 follow-ups per hour is reached; ask again in 13 minutes.`,
    );
    assert.match(
      refused(new RateLimitedError('message', state(5, 90, 80))),
      /limit of 5 follow-ups per 90 seconds is reached; ask again in 80 seconds\.$/,
    );
    assert.match(
      refused(new RateLimitedError('create', state(2, 7_200, 4_800))),
      /limit of 2 new jobs per 2 hours is reached; ask again in 80 minutes\.$/,
    );
  });

  test("any other refusal in the service's own words, as a sentence", () => {
    const budget = new BudgetExhaustedError(
      "job job_1 has spent $0.0200 of its budget of $0.01 (the project's jobBudgetUsd): raise the budget to continue it",
    );
    assert.equal(
      refused(budget),
      `${ERRAND_MARKER}\nErrand cannot take this up: job job_1 has spent $0.0200 of its budget of $0.01 (the project's jobBudgetUsd): raise the budget to continue it.`,
    );
    assert.match(refused(new AppError('conflict', 'it is archived.')), /: it is archived\.$/);
  });
});
