// The words for people that are not an event's (src/words.ts; the events' are the catalog's,
// src/events/catalog.test.ts): the statuses read the same in the CLI, the dashboard and the MCP
// server, and sums, sizes and durations as a reader wants them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JOB_STATUSES } from './records/job.ts';
import {
  formatBytes,
  formatMs,
  formatUsd,
  type PrFacts,
  prLine,
  statusLine,
  statusSentence,
  usageLine,
  usageSentence,
} from './words.ts';

const PR = 'https://github.com/acme/app/pull/7';
const job = (status: (typeof JOB_STATUSES)[number], more: Record<string, unknown> = {}) => ({
  id: 'job_x',
  status,
  prLink: null,
  error: null,
  turns: 2,
  ...more,
});

describe('words', () => {
  test('the statuses, in the order of a job’s life', () => {
    assert.deepEqual(JOB_STATUSES, ['active', 'completed', 'failed', 'archived']);
  });

  test('a status as a line and as a sentence', () => {
    assert.equal(statusLine(job('active')), 'active, turn 2 queued');
    assert.equal(statusLine(job('completed', { prLink: PR })), `completed: ${PR}`);
    assert.equal(statusLine(job('completed')), 'completed; no pull request: nothing changed');
    assert.equal(
      statusLine(job('failed', { error: 'the model refused' })),
      'failed: the model refused',
    );
    assert.equal(statusLine(job('failed')), 'failed');
    assert.equal(statusLine(job('archived')), 'archived');
    assert.equal(
      statusSentence(job('completed', { prLink: PR })),
      `Job job_x is completed; its pull request is ${PR}`,
    );
    assert.match(statusSentence(job('failed')), /^Job job_x failed: no reason recorded\.$/);
  });

  test('usage and dollars as a line and as a sentence; an unknown cost is said so', () => {
    const usage = {
      inputTokens: 1_234_567,
      outputTokens: 8_900,
      cacheReadTokens: 1_000_000,
      cacheWriteTokens: 0,
      costUsd: 1.2345,
    };
    assert.equal(usageLine(usage), '1,234,567 tokens in (1,000,000 cached), 8,900 out; $1.23');
    assert.equal(
      usageLine({ ...usage, cacheReadTokens: 0, costUsd: null }),
      '1,234,567 tokens in, 8,900 out; cost unknown (no price for the model)',
    );
    assert.equal(
      usageSentence(usage),
      'It has used 1234567 input tokens (1000000 from the cache) and 8900 output tokens, about $1.23 at list prices.',
    );
    assert.equal(usageSentence({ ...usage, inputTokens: 0, outputTokens: 0 }), '');
    assert.deepEqual(
      [0, 0.004, 0.5, 12, null].map((usd) => formatUsd(usd)),
      ['$0.00', '$0.0040', '$0.5000', '$12.00', 'unknown'],
    );
  });

  test('sizes in powers of 1024 and durations, as an environment is shown', () => {
    assert.deepEqual(
      [0, 812, 1024, 1536, 327_155_712, 6_442_450_945, 5 * 1024 ** 4].map(formatBytes),
      ['0 B', '812 B', '1 KB', '1.5 KB', '312 MB', '6 GB', '5 TB'],
    );
    assert.deepEqual([0, 850, 4210, 59_999, 65_000, 3_600_000].map(formatMs), [
      '0 ms',
      '850 ms',
      '4.2 s',
      '60 s',
      '1 min 5 s',
      '60 min 0 s',
    ]);
  });

  test("a pull request's line: its state, its checks counted, and what the watch does", () => {
    const pr: PrFacts = {
      state: 'open',
      mergedAt: null,
      mergeable: true,
      approved: false,
      checks: [
        { state: 'success' },
        { state: 'success' },
        { state: 'failure' },
        { state: 'pending' },
      ],
      watch: { state: 'watching', reason: null, autofixes: 0 },
    };
    assert.equal(prLine(pr), 'open; checks: 2 passed, 1 failed, 1 pending; watch: watching');
    assert.equal(
      prLine({
        ...pr,
        approved: true,
        mergeable: false,
        watch: { state: 'watching', reason: null, autofixes: 1 },
      }),
      'open, approved, conflicts with its base; checks: 2 passed, 1 failed, 1 pending; watch: watching (1 fix tried in a row)',
    );
    assert.equal(
      prLine({
        ...pr,
        checks: [{ state: 'failure' }],
        watch: { state: 'paused', reason: 'the checks still fail after 2 fixes', autofixes: 2 },
      }),
      'open; checks: 0 passed, 1 failed, 0 pending; watch: paused (the checks still fail after 2 fixes; 2 fixes tried in a row)',
    );
    assert.equal(
      prLine({
        ...pr,
        state: 'merged',
        mergedAt: '2025-06-01T12:00:00.000Z',
        checks: [],
        watch: { state: 'ended', reason: 'merged', autofixes: 0 },
      }),
      'merged at 2025-06-01T12:00:00.000Z; no checks; watch: ended (merged)',
    );
    assert.equal(
      prLine({ ...pr, state: 'closed', watch: { state: 'ended', reason: null, autofixes: 0 } }),
      'closed; checks: 2 passed, 1 failed, 1 pending; watch: ended',
    );
  });
});
