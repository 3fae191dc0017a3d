import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from '../client/index.ts';
import { describeJob } from './results.ts';

const job: Job = {
  id: 'job_x',
  status: 'completed',
  source: { repository: 'https://github.com/acme/app', ref: 'errand/job_x', baseRef: 'main' },
  model: 'anthropic:claude-sonnet-4-5',
  prLink: 'https://github.com/acme/app/pull/7',
  createdAt: '2026-11-29T01:00:00.000Z',
  archivedAt: null,
  projectId: 'prj_x',
  branch: 'errand/job_x',
  error: null,
  turns: 2,
  usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
  updatedAt: '2026-11-29T01:00:00.000Z',
};

test("a job's text says what the forge last said of its pull request, once Errand looked", () => {
  assert.equal(
    describeJob(job),
    'Job job_x is completed; its pull request is https://github.com/acme/app/pull/7',
  );
  const watched = describeJob({
    ...job,
    pr: {
      number: 7,
      url: 'https://github.com/acme/app/pull/7',
      state: 'open',
      mergedAt: null,
      headSha: 'a'.repeat(40),
      mergeable: true,
      approved: false,
      checks: [{ name: 'test', state: 'failure', url: null }],
      watch: {
        state: 'paused',
        reason: 'test still fails after 2 attempts to fix it',
        autofixes: 2,
      },
      observedAt: '2026-11-29T01:00:00.000Z',
    },
  });
  assert.match(
    watched,
    /Its pull request: open; checks: 0 passed, 1 failed, 0 pending; watch: paused \(test still fails after 2 attempts to fix it; 2 fixes tried in a row\)\.$/,
  );
});
