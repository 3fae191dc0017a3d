// The words for people (src/client/words.ts): every event type the service writes reads as a
// line, never as its JSON, and a command's output comes as a detail to fold away; the statuses
// read the same in the CLI, the dashboard and the MCP server.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  eventWords,
  formatBytes,
  formatMs,
  formatUsd,
  JOB_STATUSES,
  statusLine,
  statusSentence,
  usageLine,
  usageSentence,
} from '../../src/client/words.ts';

const SHA = '89abcdef0123456789abcdef0123456789abcdef';
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

  test('every event type the service writes has its own words', () => {
    const cases: [string, unknown, string][] = [
      ['job.created', { job: job('active', { turns: 1 }) }, 'active, turn 1 queued'],
      ['job.reactivated', { job: job('active') }, 'active, turn 2 queued'],
      ['job.completed', { job: job('completed', { prLink: PR }) }, `completed: ${PR}`],
      ['job.failed', { job: job('failed', { error: 'no key' }) }, 'failed: no key'],
      ['job.archived', { job: job('archived') }, 'archived'],
      ['turn.started', { attempt: 1 }, 'turn 1'],
      [
        'turn.retrying',
        { error: 'HTTP 529', attempt: 1, retryInSeconds: 30 },
        'HTTP 529; trying again in 30 s',
      ],
      [
        'turn.resumed',
        { commit: SHA, note: 'x' },
        'already pushed as 89abcdef0123; finishing the pull request',
      ],
      ['turn.no_changes', {}, 'nothing changed'],
      ['turn.finished', { summary: 'Greet\n\nmore', prLink: PR }, PR],
      ['turn.failed', { error: 'the model refused' }, 'the model refused'],
      ['workspace.ready', { base: SHA, head: SHA, continued: false }, 'new branch at 89abcdef0123'],
      [
        'sandbox.unavailable',
        { reason: 'no bwrap', howToFix: 'install it' },
        'commands are off: no bwrap; install it',
      ],
      [
        'engine.started',
        { engine: 'codex', version: '0.169.0', model: 'openai:gpt-5.5' },
        'codex 0.169.0, new session',
      ],
      [
        'engine.started',
        { engine: 'claude-code', version: '2.1.332', resumed: 'sess-1' },
        'claude-code 2.1.332, resuming session sess-1',
      ],
      ['setup.started', { command: 'npm ci', network: true }, 'npm ci (with network)'],
      ['setup.started', { command: 'npm ci', network: 'open' }, 'npm ci (with network)'],
      ['setup.started', { command: 'npm ci', network: 'allowlist' }, 'npm ci (network: allowlist)'],
      ['setup.started', { command: 'npm ci', network: 'none' }, 'npm ci'],
      [
        'network.denied',
        { host: 'evil.example.com', port: 443, reason: 'not allowed' },
        "evil.example.com:443 refused: not in the project's network allowlist",
      ],
      [
        'network.denied',
        { host: '::1', port: 80, reason: 'private address' },
        '[::1]:80 refused: it resolves to a private address',
      ],
      ['setup.finished', { command: 'npm ci', exitCode: 0, timedOut: false }, 'exit 0: npm ci'],
      [
        'environment.restored',
        { key: 'k', ms: 67, from: 'spare', files: 38412, bytes: 412_000_000 },
        'environment (38,412 files, 393 MB) restored in 67 ms',
      ],
      [
        'environment.restored',
        { key: 'k', ms: 4200, from: 'copy', files: 2, bytes: 10 },
        'environment (2 files, 10 B) restored in 4.2 s (copied: no spare was ready)',
      ],
      [
        'environment.built',
        { key: 'k', ms: 61_000, setupMs: 60_000, files: 3, bytes: 2048 },
        'environment (3 files, 2 KB) kept after the setup',
      ],
      [
        'environment.not_kept',
        { key: 'k', reason: 'the setup command did not succeed' },
        'not kept: the setup command did not succeed',
      ],
      ['maintenance.started', { command: 'npm run build', network: 'none' }, 'npm run build'],
      [
        'maintenance.finished',
        { command: 'npm run build', exitCode: 0, timedOut: false },
        'exit 0: npm run build',
      ],
      ['tool.call', { id: 'c', name: 'read_file', summary: 'read_file(a)' }, 'read_file(a)'],
      [
        'tool.result',
        { id: 'c', name: 'edit_file', ok: false, summary: 'not found' },
        'error: not found',
      ],
      [
        'model.step',
        { step: 3, usage: { inputTokens: 10, outputTokens: 2 } },
        'step 3 (10 in, 2 out)',
      ],
      [
        'model.step',
        {
          step: 4,
          usage: {
            inputTokens: 1200,
            outputTokens: 30,
            cacheReadTokens: 1000,
            cacheWriteTokens: 0,
            costUsd: 0.00111,
          },
        },
        'step 4 (1200 in, 30 out, 1000 cached, $0.0011)',
      ],
      [
        'context.compacted',
        {
          reason: 'threshold',
          tokensBefore: 90000,
          tokensAfter: 20000,
          summary: 'summarised the older conversation: about 90,000 → 20,000 tokens',
        },
        'summarised the older conversation: about 90,000 → 20,000 tokens',
      ],
      ['command.started', { command: 'npm test', cwd: '.' }, 'npm test'],
      [
        'command.finished',
        { command: 'sleep 9', exitCode: null, signal: 'SIGKILL', timedOut: true },
        'timed out: SIGKILL: sleep 9',
      ],
      ['files.changed', { files: [{ path: 'a', change: 'added' }], count: 1 }, '1 file: a'],
      ['commit', { sha: SHA, subject: 'Greet' }, '89abcdef0123 Greet'],
      ['push', { branch: 'errand/job_x', sha: SHA }, 'errand/job_x at 89abcdef0123'],
      [
        'review.updated',
        { url: 'https://errand.example/review/job_x' },
        'https://errand.example/review/job_x',
      ],
      [
        'pull_request.opened',
        { forge: 'github', number: 7, url: PR, draft: true, notes: ['opened as a draft'] },
        `${PR} (draft); opened as a draft`,
      ],
      ['pull_request.updated', { forge: 'github', number: 7, url: PR }, PR],
    ];
    for (const [type, data, text] of cases) {
      const words = eventWords({ type, data, turn: 1 });
      assert.equal(words.text, text, type);
      assert.ok(!words.text.startsWith('{'), `${type} reads as JSON`);
    }
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

  test("a command's output is a detail, not part of its line", () => {
    const words = eventWords({
      type: 'command.finished',
      data: { command: 'npm test', exitCode: 1, timedOut: false, outputTail: 'FAIL a.test.ts' },
    });
    assert.deepEqual(words, {
      text: 'exit 1: npm test',
      detail: { label: 'Output', text: 'FAIL a.test.ts' },
    });
  });

  test('a retried turn and an unknown type', () => {
    assert.equal(
      eventWords({ type: 'turn.started', data: { attempt: 2 }, turn: 3 }).text,
      'turn 3, attempt 2',
    );
    const trigger = { forge: 'github', url: 'https://github.com/a/b/pull/1', author: 'ana' };
    assert.equal(
      eventWords({
        type: 'turn.started',
        data: { attempt: 1, trigger: { ...trigger, kind: 'line comment' } },
        turn: 2,
      }).text,
      'turn 2, asked by @ana in a line comment on github',
    );
    assert.equal(
      eventWords({
        type: 'turn.started',
        data: { attempt: 1, trigger: { ...trigger, kind: 'label' } },
        turn: 1,
      }).text,
      'turn 1, asked by @ana with a label on github',
    );
    assert.equal(eventWords({ type: 'future.thing', data: { title: 'hello' } }).text, 'hello');
    assert.equal(eventWords({ type: 'future.thing', data: { n: 1 } }).text, '{"n":1}');
    assert.equal(eventWords({ type: 'future.thing', data: null }).text, '');
  });
});
