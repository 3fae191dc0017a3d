// The audit stream's buffer: lines wait for a slow reader in order; past the bound, new lines
// are dropped (never a request held up) and a line counting them follows once it drains.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from '../log.ts';
import type { AuditRecord } from '../records/audit.ts';
import { AuditStream } from './stream.ts';

const row = (id: number): AuditRecord => ({
  id: String(id),
  at: '2026-11-28T00:00:00.000Z',
  actor: { kind: 'key', id: 'key_00000000000000000000' },
  address: '127.0.0.1',
  action: 'job.create',
  target: { kind: 'job', id: 'job_00000000000000000000' },
  outcome: 'success',
  errorCode: null,
  requestId: 'req_1',
  details: {},
});

/** A reader that takes one line and then waits until it is let go. */
class SlowReader extends Writable {
  readonly lines: string[] = [];
  #held: (() => void)[] = [];
  constructor() {
    super({ highWaterMark: 1 });
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(chunk.toString('utf8'));
    this.#held.push(done);
  }
  release(): void {
    for (const done of this.#held.splice(0)) done();
  }
}

test('a slow reader: lines wait in order; past the bound they are dropped, then counted', async () => {
  const reader = new SlowReader();
  const oneLine = Buffer.byteLength(`${JSON.stringify(row(1))}\n`);
  // Room for three lines waiting besides the one the reader holds.
  const stream = new AuditStream(reader, createLogger('silent'), oneLine * 3);
  const started = Date.now();
  stream.written([1, 2, 3, 4, 5, 6, 7].map(row));
  // Nothing waited for the reader.
  assert.ok(Date.now() - started < 100);
  assert.equal(reader.lines.length, 1);
  for (let i = 0; i < 10 && reader.lines.length < 5; i++) {
    reader.release();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const parsed = reader.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    parsed.slice(0, 4).map((l) => l.id),
    ['1', '2', '3', '4'],
  );
  assert.equal(parsed[4]?.dropped, 3);
  // Drained: new lines go through again.
  stream.written([row(8)]);
  reader.release();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(JSON.parse(reader.lines.at(-1) ?? '{}').id, '8');
  reader.release();
  await stream.close();
});
