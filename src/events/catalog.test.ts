// The event catalog: every declared type has words of its own, read from data as the service
// writes it; an emit of a type the catalog does not declare, or of data its schema refuses, does
// not compile and is refused at run time before anything is written; the webhook list comes
// from the catalog (the OpenAPI's events and webhooks: test/openapi/openapi.test.ts).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { testEnv } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import { recordProgress, startTurn } from '../jobs/lifecycle.ts';
import { createJob } from '../jobs/service.ts';
import { inTransition } from '../jobs/transaction.ts';
import type { JobRecord } from '../records/job.ts';
import { type RunningService, startService } from '../service.ts';
import {
  checkEvent,
  type Emit,
  EVENTS,
  type EventData,
  type EventType,
  eventWords,
  LOGGED_EVENT_TYPES,
  UndeclaredEventError,
  WEBHOOK_EVENT_TYPES,
} from './catalog.ts';

const SHA = '89abcdef0123456789abcdef0123456789abcdef';
const PR = 'https://github.com/acme/app/pull/7';
const USAGE = {
  inputTokens: 10,
  outputTokens: 2,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: null,
};
const job = (status: JobRecord['status'], more: Partial<JobRecord> = {}): JobRecord => ({
  id: 'job_x',
  status,
  source: { repository: 'https://github.com/acme/app', ref: 'errand/x', baseRef: 'main' },
  model: 'anthropic:claude-sonnet-4-5',
  prLink: null,
  createdAt: '2026-11-28T10:00:00.000Z',
  archivedAt: null,
  projectId: 'prj_x',
  branch: 'errand/x',
  error: null,
  turns: 2,
  usage: USAGE,
  origin: null,
  updatedAt: '2026-11-28T10:00:00.000Z',
  ...more,
});

/** An event of a type with its data as the service writes it, and the words it reads as. */
type Case = { [T in EventType]: [T, EventData<T>, string] }[EventType];

const CASES: Case[] = [
  ['job.created', { job: job('active', { turns: 1 }) }, 'active, turn 1 queued'],
  ['job.reactivated', { job: job('active') }, 'active, turn 2 queued'],
  ['job.completed', { job: job('completed', { prLink: PR }) }, `completed: ${PR}`],
  ['job.failed', { job: job('failed', { error: 'no key' }) }, 'failed: no key'],
  ['job.archived', { job: job('archived') }, 'archived'],
  ['turn.accepted', {}, 'queued'],
  ['turn.started', { attempt: 1 }, 'turn 1'],
  ['turn.started', { attempt: 1, mode: 'code' }, 'turn 1'],
  ['turn.started', { attempt: 2, mode: 'plan' }, 'turn 1, plan mode, attempt 2'],
  [
    'turn.retrying',
    { error: 'HTTP 529', attempt: 1, retryInSeconds: 30 },
    'HTTP 529; trying again in 30 s',
  ],
  ['turn.finished', { summary: 'Greet\n\nmore', usage: USAGE, prLink: PR }, PR],
  ['turn.finished', { summary: 'Greet\n\nmore', usage: null, prLink: null }, 'Greet'],
  ['turn.failed', { error: 'the model refused' }, 'the model refused'],
  [
    'attempt.started',
    { n: 2, engine: 'codex', model: 'openai:gpt-5', branch: 'errand/job_1-2' },
    'attempt 2: codex on openai:gpt-5, branch errand/job_1-2',
  ],
  [
    'attempt.finished',
    { n: 1, outcome: 'passed', exitCode: 0, costUsd: 0.25, diff: { files: 1, lines: 3 } },
    'attempt 1 passed, check exit 0, 1 file, 3 lines, $0.2500',
  ],
  [
    'attempt.finished',
    {
      n: 3,
      outcome: 'error',
      exitCode: null,
      costUsd: null,
      diff: { files: 0, lines: 0 },
      error: 'the model refused',
    },
    'attempt 3 error, 0 files, 0 lines, cost unknown, the model refused',
  ],
  [
    'turn.resumed',
    { commit: SHA, note: 'x' },
    'already pushed as 89abcdef0123; finishing the pull request',
  ],
  ['turn.no_changes', {}, 'nothing changed'],
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
    { engine: 'claude-code', version: '2.1.332', model: 'a:b', resumed: 'sess-1' },
    'claude-code 2.1.332, resuming session sess-1',
  ],
  [
    'mcp.unavailable',
    { server: 'docs', reason: 'it names secret DOCS_TOKEN, which the project does not have' },
    'MCP server docs unavailable: it names secret DOCS_TOKEN, which the project does not have',
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
  [
    'mcp.unavailable',
    { server: 'tracker', reason: 'did not connect: HTTP 401' },
    'MCP server tracker unavailable: did not connect: HTTP 401',
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
  [
    'environment.not_kept',
    { key: 'k', cause: 'secret', secret: 'NPM_TOKEN', reason: 'older words' },
    'not kept: it holds the value of secret NPM_TOKEN, which only the setup may see',
  ],
  [
    'environment.not_kept',
    { key: 'k', cause: 'too_large', bytes: 20, limitBytes: 10, reason: 'older words' },
    'not kept: it is larger (20 bytes) than the environment cache (10 bytes)',
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
  ['model.step', { step: 3, usage: USAGE }, 'step 3 (10 in, 2 out)'],
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
    { reason: 'threshold', tokensBefore: 90000, tokensAfter: 20000, usage: USAGE },
    'summarised the older conversation: about 90,000 → 20,000 tokens',
  ],
  [
    'context.compacted',
    { reason: 'overflow', tokensBefore: 90000, tokensAfter: 20000, usage: USAGE },
    'summarised the older conversation after the model refused a request as too long: about 90,000 → 20,000 tokens',
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
  [
    'base.integrated',
    { base: 'main', strategy: 'merge', outcome: 'conflicted', paths: ['a.ts'], note: null },
    'main merged with conflicts in a.ts: the agent resolves them',
  ],
  [
    'base.integrated',
    {
      base: 'main',
      strategy: 'rebase',
      outcome: 'rebased',
      paths: [],
      note: null,
    },
    'rebased onto main without conflicts',
  ],
  [
    'checks.failed',
    {
      forge: 'github',
      number: 7,
      url: PR,
      sha: SHA,
      checks: [
        { name: 'test', url: null },
        { name: 'lint', url: null },
      ],
    },
    'test, lint failed on 89abcdef0123',
  ],
  [
    'autofix.queued',
    { forge: 'github', number: 7, url: PR, sha: SHA, attempt: 1, attempts: 2 },
    'turn 1 queued to fix the checks (attempt 1 of 2)',
  ],
  [
    'pr.conflicted',
    { forge: 'github', number: 7, url: PR, sha: SHA, base: 'main', strategy: 'merge' },
    'conflicts with main; turn 1 queued to merge it',
  ],
  [
    'pr.merged',
    {
      forge: 'github',
      number: 7,
      url: PR,
      sha: SHA,
      mergedAt: '2026-11-29T01:00:00Z',
      byErrand: true,
      method: 'squash',
    },
    `${PR} merged by Errand (squash)`,
  ],
  ['pr.closed', { forge: 'github', number: 7, url: PR }, `${PR} closed`],
  [
    'pr.watch_paused',
    { forge: 'github', number: 7, url: PR, reason: 'test still fails after 2 attempts to fix it' },
    'test still fails after 2 attempts to fix it',
  ],
];

describe('the event catalog', () => {
  test('every declared type has its own words, read from data as the service writes it', () => {
    assert.deepEqual(
      [...new Set(CASES.map(([type]) => type))].sort(),
      Object.keys(EVENTS).sort(),
      'a case for every declared type',
    );
    for (const [type, data, text] of CASES) {
      checkEvent(type, data);
      const words = eventWords({ type, data, turn: 1 });
      assert.equal(words.text, text, type);
      assert.ok(!words.text.startsWith('{'), `${type} reads as JSON`);
    }
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

  test('a retried turn, a turn a forge asked for, and an unknown type or data', () => {
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
    // A declared type whose data this version cannot read: the data's own words.
    assert.equal(eventWords({ type: 'commit', data: { message: 'odd' } }).text, 'odd');
  });

  test('the words are composed when read: a compaction stored without its sentence has it', () => {
    const data = { reason: 'threshold', tokensBefore: 1000, tokensAfter: 10, usage: USAGE };
    assert.equal(
      eventWords({ type: 'context.compacted', data }).text,
      'summarised the older conversation: about 1,000 → 10 tokens',
    );
  });

  test('an undeclared type, or data its schema refuses, is refused', () => {
    assert.throws(() => checkEvent('agent.step', { step: 1 }), UndeclaredEventError);
    assert.throws(
      () => checkEvent('commit', { sha: SHA }),
      (err: unknown) => err instanceof UndeclaredEventError && /commit .*subject/.test(err.message),
    );
    assert.throws(() => checkEvent('model.step', { step: 1, usage: { inputTokens: 1 } }));
    assert.throws(() => checkEvent('network.denied', { host: 'h', port: 1, reason: 'why' }));
    // A field the schema does not declare is kept: older events carry some.
    checkEvent('push', { branch: 'b', sha: SHA, more: true });
    // And at compile time: the emit's type and data are the catalog's.
    const emit: Emit = async () => {};
    // @ts-expect-error an undeclared type does not compile
    void emit('agent.step', { step: 1 });
    // @ts-expect-error nor data its schema refuses
    void emit('commit', { sha: SHA });
  });

  test('the webhook event list is the catalog’s webhook types, in its order', () => {
    assert.deepEqual(WEBHOOK_EVENT_TYPES, [
      'job.created',
      'job.reactivated',
      'job.completed',
      'job.failed',
      'job.archived',
      'turn.started',
      'turn.finished',
      'turn.failed',
      'pull_request.opened',
      'checks.failed',
      'autofix.queued',
      'pr.conflicted',
      'pr.merged',
      'pr.closed',
      'pr.watch_paused',
      'network.denied',
    ]);
    for (const type of WEBHOOK_EVENT_TYPES) assert.equal(EVENTS[type].webhook, true, type);
    assert.ok(!LOGGED_EVENT_TYPES.includes('turn.accepted'), 'an announced-only type');
  });
});

describe('the log refuses what the catalog does not declare', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let project: ProjectRow;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
    project = await svc.ctx.db
      .insertInto('projects')
      .values({
        id: 'prj_catalog0000000000000',
        name: 'p',
        repository: database.dataDir,
        ref: 'main',
        model: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  const typesOf = async (jobId: string) =>
    (
      await svc.ctx.db
        .selectFrom('events')
        .select('type')
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute()
    ).map((e) => e.type);

  test('a progress event of an undeclared type, or with refused data, writes nothing', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'undeclared' });
    await startTurn(ctx, job.id, 1, 1);
    // What a caller that went around the types would write.
    const undeclared = 'agent.step' as 'commit';
    await assert.rejects(
      recordProgress(ctx, job.id, 1, undeclared, { sha: SHA, subject: 's' }),
      UndeclaredEventError,
    );
    const refused = { sha: SHA } as EventData<'commit'>;
    await assert.rejects(recordProgress(ctx, job.id, 1, 'commit', refused), UndeclaredEventError);
    // The review.updated hook path (a hook wants it) checks before its transaction too.
    const remove = ctx.transitions.hook({ wants: () => true, run: async () => {} });
    try {
      const url = { url: 7 } as unknown as EventData<'review.updated'>;
      await assert.rejects(
        recordProgress(ctx, job.id, 1, 'review.updated', url),
        UndeclaredEventError,
      );
    } finally {
      remove();
    }
    await recordProgress(ctx, job.id, 1, 'commit', { sha: SHA, subject: 'declared' });
    assert.deepEqual(await typesOf(job.id), ['job.created', 'turn.started', 'commit']);
  });

  test("a transition whose event's data is refused rolls back with it", async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'refused transition' });
    const data = { attempt: 'first' } as unknown as EventData<'turn.started'>;
    await assert.rejects(
      inTransition(ctx, async ({ trx, record }) => {
        await trx.updateTable('jobs').set({ error: 'written' }).where('id', '=', job.id).execute();
        await record({ type: 'turn.started', jobId: job.id, turn: 1, status: 'active', data });
      }),
      UndeclaredEventError,
    );
    const row = await ctx.db
      .selectFrom('jobs')
      .select('error')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.error, null, 'the transaction rolled back');
    assert.deepEqual(await typesOf(job.id), ['job.created']);
  });
});
