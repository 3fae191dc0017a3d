// TurnQueue.handBack on a real PostgreSQL: a turn handed back is delivered again at once at the
// attempt it had (attemptsBefore), with the dead-worker backstop as far away as before, also when
// its claim was the backstop's last; a claim that is gone is not handed back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { testEnv } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import { type RunningService, startService } from '../service.ts';
import { attemptsBefore, type TurnEntry, type TurnQueue } from './queue.ts';

/** Entries as the queue delivers them, each handled by the next of `steps`. */
function deliveries(steps: ((entry: TurnEntry) => Promise<void>)[]) {
  const seen: TurnEntry[] = [];
  let wake = () => {};
  return {
    seen,
    handler: async (entry: TurnEntry) => {
      seen.push(entry);
      wake();
      const step = steps[seen.length - 1];
      if (step) await step(entry);
    },
    /** Resolves once `n` deliveries were seen. */
    async until(n: number): Promise<TurnEntry[]> {
      while (seen.length < n) await new Promise<void>((resolve) => (wake = resolve));
      return seen;
    },
  };
}

describe('a turn handed back to the queue', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let queue: TurnQueue;

  before(async () => {
    database = await createTestDatabase();
    // No retries of Errand's own: the queue's limit is 2, the dead-worker backstop.
    const config = loadConfig(testEnv(database, { ERRAND_TURN_RETRIES: '0' }));
    svc = await startService(config, { api: false, worker: false });
    queue = svc.ctx.queue;
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  const enqueue = (jobId: string) =>
    svc.ctx.db.transaction().execute((trx) => queue.enqueue(trx, { jobId, seq: 1 }));

  test('comes back at once at the attempt it had; a stale claim is not handed back', async () => {
    const handedBack: boolean[] = [];
    const d = deliveries([
      async (entry) => {
        handedBack.push(await queue.handBack(entry, 'stopping'));
      },
      async () => {},
    ]);
    await queue.work(1, d.handler);
    try {
      await enqueue('job_handback_once');
      const [first, second] = await d.until(2);
      assert.ok(first && second);
      assert.deepEqual(handedBack, [true]);
      assert.equal(attemptsBefore(first), 0);
      assert.equal(attemptsBefore(second), 0, 'the hand-back used no attempt up');
      assert.equal(second.data.handedBack, 1);
      assert.equal(second.retryLimit, first.retryLimit + 1, 'the backstop is as far as before');
      // The first claim is gone: handing it back again changes nothing.
      assert.equal(await queue.handBack(first, 'stopping'), false);
    } finally {
      await queue.stopWork();
    }
    const id = d.seen[0]?.id ?? '';
    assert.equal(await queue.entryState(id), 'completed');
  });

  test('handed back on the last claim the backstop allows, it still comes back', async () => {
    const fail = async () => {
      throw new Error('as if the worker had died');
    };
    const d = deliveries([
      fail,
      fail,
      async (entry) => {
        assert.equal(await queue.handBack(entry, 'stopping'), true);
      },
      async () => {},
    ]);
    await queue.work(1, d.handler);
    try {
      await enqueue('job_handback_last');
      const seen = await d.until(4);
      const last = seen[2];
      const again = seen[3];
      assert.ok(last && again);
      assert.equal(last.retryCount, last.retryLimit, 'the third claim was the backstop’s last');
      assert.equal(attemptsBefore(last), 2);
      assert.equal(attemptsBefore(again), 2, 'the hand-back used no attempt up');
      assert.equal(again.retryLimit, last.retryLimit + 1);
    } finally {
      await queue.stopWork();
    }
    assert.equal(await queue.entryState(d.seen[0]?.id ?? ''), 'completed');
  });
});
