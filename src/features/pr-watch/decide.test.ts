import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { CheckResult, PullRequestStatus } from '../../forges/types.ts';
import { decide, LEFT_ALONE, type Situation, wantedChecks } from './decide.ts';

const HEAD = 'a'.repeat(40);
const OLDER = 'b'.repeat(40);

const check = (name: string, state: CheckResult['state']): CheckResult => ({
  id: name,
  name,
  state,
  url: `https://ci.example/${name}`,
  summary: null,
});

function situation(over: {
  status?: Partial<PullRequestStatus>;
  checks?: CheckResult[];
  watch?: Partial<Situation['watch']>;
  settings?: Partial<Situation['settings']>;
  errandSha?: string | null;
  turnOpen?: boolean;
}): Situation {
  return {
    status: {
      number: 7,
      url: 'https://forge.example/acme/app/pull/7',
      state: 'open',
      mergedAt: null,
      headSha: HEAD,
      base: 'main',
      mergeable: true,
      labels: [],
      draft: false,
      approved: false,
      ...over.status,
    },
    checks: over.checks ?? [check('test', 'success')],
    watch: {
      state: 'watching',
      reason: null,
      autofixes: 0,
      failedSha: null,
      unmergeableSha: null,
      conflictSha: null,
      mergeSha: null,
      ...over.watch,
    },
    settings: { autofixAttempts: 2, autofixChecks: null, autoMerge: 'off', ...over.settings },
    errandSha: over.errandSha === undefined ? HEAD : over.errandSha,
    turnOpen: over.turnOpen ?? false,
  };
}

describe('decide', () => {
  test('a merged or closed pull request ends the watch, whatever else holds', () => {
    assert.deepEqual(decide(situation({ status: { state: 'merged' }, turnOpen: true })), {
      act: 'end',
      state: 'merged',
    });
    assert.deepEqual(decide(situation({ status: { state: 'closed' } })), {
      act: 'end',
      state: 'closed',
    });
  });

  test('nothing is done while a turn of the job is queued or running', () => {
    const failing = situation({ checks: [check('test', 'failure')], turnOpen: true });
    assert.deepEqual(decide(failing), { act: 'wait', soon: false });
  });

  test('failed checks are acted on once none is pending, with every failure', () => {
    const pending = [check('lint', 'failure'), check('test', 'pending')];
    assert.deepEqual(decide(situation({ checks: pending })), { act: 'wait', soon: false });
    const done = [check('lint', 'failure'), check('test', 'failure'), check('build', 'success')];
    const decision = decide(situation({ checks: done }));
    assert.equal(decision.act, 'failed');
    assert.ok(decision.act === 'failed');
    assert.deepEqual(
      decision.failed.map((c) => c.name),
      ['lint', 'test'],
    );
    assert.equal(decision.report, true);
    assert.equal(decision.fix, true);
  });

  test('a head whose failures were reported is not reported again', () => {
    const decision = decide(
      situation({ checks: [check('test', 'failure')], watch: { failedSha: HEAD, autofixes: 1 } }),
    );
    assert.ok(decision.act === 'failed');
    assert.equal(decision.report, false);
    assert.equal(decision.fix, true);
  });

  test('the attempts run out: the watch pauses and says so in the thread', () => {
    const decision = decide(
      situation({ checks: [check('test', 'failure')], watch: { autofixes: 2, failedSha: HEAD } }),
    );
    assert.deepEqual(decision, {
      act: 'pause',
      reason: 'test still fails after 2 attempts to fix it',
      stays: true,
      comment: true,
    });
  });

  test('autofixAttempts 0 reports the failure and queues nothing', () => {
    const decision = decide(
      situation({ checks: [check('test', 'failure')], settings: { autofixAttempts: 0 } }),
    );
    assert.deepEqual(decision, {
      act: 'failed',
      failed: [check('test', 'failure')],
      report: true,
      fix: false,
    });
  });

  test('a conflict seen twice queues one turn for a head; the same head conflicting after it pauses', () => {
    assert.deepEqual(decide(situation({ status: { mergeable: false } })), { act: 'unmergeable' });
    const twice = { mergeable: false };
    assert.deepEqual(decide(situation({ status: twice, watch: { unmergeableSha: HEAD } })), {
      act: 'conflict',
    });
    const after = decide(
      situation({ status: twice, watch: { unmergeableSha: HEAD, conflictSha: HEAD } }),
    );
    assert.equal(after.act, 'pause');
    assert.ok(after.act === 'pause' && after.stays && after.comment);
  });

  test('the no-errand label and a push by someone else leave the pull request alone', () => {
    assert.deepEqual(
      decide(
        situation({ status: { labels: ['bug', 'No-Errand'] }, checks: [check('t', 'failure')] }),
      ),
      { act: 'pause', reason: LEFT_ALONE.label, stays: false, comment: false },
    );
    assert.deepEqual(decide(situation({ errandSha: OLDER, settings: { autoMerge: 'green' } })), {
      act: 'pause',
      reason: LEFT_ALONE.pushed,
      stays: false,
      comment: false,
    });
    // Said once: paused for that reason already, the watch waits.
    assert.deepEqual(
      decide(
        situation({ errandSha: OLDER, watch: { state: 'paused', reason: LEFT_ALONE.pushed } }),
      ),
      { act: 'wait', soon: false },
    );
  });

  test('a watch paused by a label resumes once it is gone; one that gave up does not', () => {
    assert.deepEqual(decide(situation({ watch: { state: 'paused', reason: LEFT_ALONE.label } })), {
      act: 'resume',
    });
    assert.deepEqual(
      decide(
        situation({ watch: { state: 'paused', reason: 'test still fails after 2 attempts' } }),
      ),
      { act: 'wait', soon: false },
    );
  });

  test('green merges as the project allows, once per head, never a draft', () => {
    const no = { act: 'green', merge: false, soon: false };
    const yes = { act: 'green', merge: true, soon: false };
    assert.deepEqual(decide(situation({})), no);
    const green = { settings: { autoMerge: 'green' as const } };
    assert.deepEqual(decide(situation(green)), yes);
    const approvedToo = { settings: { autoMerge: 'green-and-approved' as const } };
    assert.deepEqual(decide(situation(approvedToo)), no);
    assert.deepEqual(decide(situation({ ...approvedToo, status: { approved: true } })), yes);
    assert.deepEqual(decide(situation({ ...green, watch: { mergeSha: HEAD } })), no);
    assert.deepEqual(decide(situation({ ...green, status: { draft: true } })), no);
  });

  test('no checks yet is no green; green with an unknown mergeability is asked again soon', () => {
    assert.deepEqual(decide(situation({ checks: [], settings: { autoMerge: 'green' } })), {
      act: 'wait',
      soon: false,
    });
    assert.deepEqual(
      decide(situation({ status: { mergeable: null }, settings: { autoMerge: 'green' } })),
      { act: 'green', merge: false, soon: true },
    );
    // Nothing to merge: nothing to ask again.
    assert.deepEqual(decide(situation({ status: { mergeable: null } })), {
      act: 'green',
      merge: false,
      soon: false,
    });
  });
});

test('wantedChecks keeps the checks whose names match a glob, in any case', () => {
  const checks = [
    check('ci / test', 'failure'),
    check('ci / lint', 'success'),
    check('deploy', 'failure'),
  ];
  assert.deepEqual(
    wantedChecks(checks, ['ci / *']).map((c) => c.name),
    ['ci / test', 'ci / lint'],
  );
  assert.deepEqual(
    wantedChecks(checks, ['DEPLOY']).map((c) => c.name),
    ['deploy'],
  );
  assert.equal(wantedChecks(checks, null).length, 3);
});
