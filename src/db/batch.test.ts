// Batcher: concurrent reads share one statement, each gets its own answer, failures reach
// exactly the reads of the failed statement, and no read is answered by a statement that was
// sent before the read was asked for.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Batcher } from './batch.ts';

/** A runner that records each call and answers when the test releases it. */
function gatedRunner<I, O>(answer: (item: I, call: number) => O) {
  const calls: { items: readonly I[]; release: () => void; fail: (err: Error) => void }[] = [];
  let running = 0;
  let maxRunning = 0;
  const run = (items: readonly I[]): Promise<readonly O[]> => {
    const call = calls.length;
    running++;
    maxRunning = Math.max(maxRunning, running);
    return new Promise((resolve, reject) => {
      calls.push({
        items,
        release: () => {
          running--;
          resolve(items.map((item) => answer(item, call)));
        },
        fail: (err) => {
          running--;
          reject(err);
        },
      });
    });
  };
  return { run, calls, maxRunning: () => maxRunning };
}

/** Longer than any test: these tests are not about the timeout. */
const LONG = { ms: 60_000, error: () => new Error('statement timed out') };

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await turn();
  assert.ok(check(), 'condition not reached');
}

describe('Batcher', () => {
  test('reads asked for together share one statement, each gets its own answer', async () => {
    const runner = gatedRunner((n: number) => n * 10);
    const batcher = new Batcher(runner.run, { maxItems: 100, maxInFlight: 2, timeout: LONG });
    const reads = [3, 1, 4, 1, 5].map((n) => batcher.submit(n));
    await until(() => runner.calls.length === 1);
    assert.deepEqual(runner.calls[0]?.items, [3, 1, 4, 1, 5]);
    runner.calls[0]?.release();
    assert.deepEqual(await Promise.all(reads), [30, 10, 40, 10, 50]);
  });

  test('a single read is sent at once, alone', async () => {
    const runner = gatedRunner((n: number) => n + 1);
    const batcher = new Batcher(runner.run, { maxItems: 100, maxInFlight: 1, timeout: LONG });
    const read = batcher.submit(41);
    await until(() => runner.calls.length === 1);
    runner.calls[0]?.release();
    assert.equal(await read, 42);
    assert.equal(runner.calls.length, 1);
  });

  test('maxItems splits a burst; maxInFlight bounds the statements running at once', async () => {
    const runner = gatedRunner((n: number) => n);
    const batcher = new Batcher(runner.run, { maxItems: 3, maxInFlight: 2, timeout: LONG });
    const reads = Array.from({ length: 8 }, (_, i) => batcher.submit(i));
    await until(() => runner.calls.length === 2);
    await turn();
    await turn();
    assert.equal(runner.calls.length, 2, 'a third statement started before one finished');
    assert.deepEqual(runner.calls[0]?.items, [0, 1, 2]);
    assert.deepEqual(runner.calls[1]?.items, [3, 4, 5]);
    runner.calls[0]?.release();
    await until(() => runner.calls.length === 3);
    assert.deepEqual(runner.calls[2]?.items, [6, 7]);
    runner.calls[1]?.release();
    runner.calls[2]?.release();
    assert.deepEqual(await Promise.all(reads), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.equal(runner.maxRunning(), 2);
  });

  test('a read asked for while a statement runs is answered by a later statement', async () => {
    // The answer carries the number of the statement that read it: a read must never get the
    // answer of a statement sent before the read was asked for (it could predate a revocation).
    const runner = gatedRunner((n: number, call: number) => ({ n, call }));
    const batcher = new Batcher(runner.run, { maxItems: 100, maxInFlight: 2, timeout: LONG });
    const first = batcher.submit(1);
    await until(() => runner.calls.length === 1);
    const second = batcher.submit(2);
    await until(() => runner.calls.length === 2);
    runner.calls[0]?.release();
    runner.calls[1]?.release();
    assert.deepEqual(await first, { n: 1, call: 0 });
    assert.deepEqual(await second, { n: 2, call: 1 });
  });

  test('a failed statement rejects its own reads only; the next statement runs', async () => {
    const runner = gatedRunner((n: number) => n);
    const batcher = new Batcher(runner.run, { maxItems: 2, maxInFlight: 2, timeout: LONG });
    const reads = [1, 2, 3].map((n) => batcher.submit(n));
    await until(() => runner.calls.length === 2);
    runner.calls[0]?.fail(new Error('connection lost'));
    runner.calls[1]?.release();
    const settled = await Promise.allSettled(reads);
    assert.deepEqual(
      settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message)),
      ['connection lost', 'connection lost', 3],
    );
    const later = batcher.submit(4);
    await until(() => runner.calls.length === 3);
    runner.calls[2]?.release();
    assert.equal(await later, 4);
  });

  test('a statement answering the wrong number of rows rejects its reads', async () => {
    const batcher = new Batcher(async (items: readonly number[]) => items.slice(1), {
      maxItems: 10,
      maxInFlight: 1,
      timeout: LONG,
    });
    const reads = [1, 2].map((n) => batcher.submit(n));
    for (const read of reads) {
      await assert.rejects(read, /answered 1 results for 2 items/);
    }
  });

  test('a runner that throws synchronously rejects its reads instead of escaping', async () => {
    const batcher = new Batcher<number, number>(
      () => {
        throw new Error('bad statement');
      },
      { maxItems: 10, maxInFlight: 1, timeout: LONG },
    );
    await assert.rejects(batcher.submit(1), /bad statement/);
    await assert.rejects(batcher.submit(2), /bad statement/);
  });

  test('a statement that does not answer in time fails its reads and frees its slot', async () => {
    const runner = gatedRunner((n: number) => n);
    const batcher = new Batcher(runner.run, {
      maxItems: 10,
      maxInFlight: 1,
      timeout: { ms: 50, error: () => new Error('the database did not answer in time') },
    });
    const hung = [1, 2].map((n) => batcher.submit(n));
    await until(() => runner.calls.length === 1);
    for (const read of hung) {
      await assert.rejects(read, /did not answer in time/);
    }
    // The slot is free again: the next read gets its own statement and its answer.
    const next = batcher.submit(3);
    await until(() => runner.calls.length === 2);
    assert.deepEqual(runner.calls[1]?.items, [3]);
    // The hung statement answering late changes nothing, and still only one runs at a time.
    runner.calls[0]?.release();
    const third = batcher.submit(4);
    for (let i = 0; i < 5; i++) await turn();
    assert.equal(runner.calls.length, 2, 'a second statement started while one was running');
    runner.calls[1]?.release();
    assert.equal(await next, 3);
    await until(() => runner.calls.length === 3);
    runner.calls[2]?.release();
    assert.equal(await third, 4);
  });

  test('refuses limits below 1', () => {
    const run = async (items: readonly number[]) => items;
    assert.throws(
      () => new Batcher(run, { maxItems: 0, maxInFlight: 1, timeout: LONG }),
      RangeError,
    );
    assert.throws(
      () => new Batcher(run, { maxItems: 1, maxInFlight: 0, timeout: LONG }),
      RangeError,
    );
    const instant = { ms: 0, error: LONG.error };
    assert.throws(
      () => new Batcher(run, { maxItems: 1, maxInFlight: 1, timeout: instant }),
      RangeError,
    );
  });
});
