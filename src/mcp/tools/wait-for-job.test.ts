// wait_for_job's time: the wait that runs out and the heartbeat meanwhile, on a clock the test
// runs (the client's and the tool's), through the MCP SDK's own client in process, against a
// real service whose turn is held. Eleven seconds pass on that clock and none in real time.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { scriptedRunner, turnStarted } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { type Clock, ErrandClient, type Job } from '../../client/index.ts';
import { createMcpServer } from '../server.ts';

/**
 * Time moves only when `waiters` sleeps are pending at once (here the tool's heartbeat and the
 * client's poll), and then to the earliest of them: never while a request is under way, so the
 * run is the same however long the service takes to answer.
 */
class SteppingClock implements Clock {
  #time = Date.now();
  readonly #sleeps: Array<{ due: number; wake: () => void }> = [];
  readonly #waiters: number;

  constructor(waiters: number) {
    this.#waiters = waiters;
  }

  now = (): number => this.#time;

  sleep = (ms: number, signal: AbortSignal | undefined): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const abort = () => {
        this.#sleeps.splice(this.#sleeps.indexOf(entry), 1);
        reject(signal?.reason);
      };
      const entry = {
        due: this.#time + ms,
        wake: () => {
          signal?.removeEventListener('abort', abort);
          resolve();
        },
      };
      signal?.addEventListener('abort', abort, { once: true });
      this.#sleeps.push(entry);
      this.#step();
    });

  #step(): void {
    if (this.#sleeps.length < this.#waiters) return;
    this.#sleeps.sort((a, b) => a.due - b.due);
    const next = this.#sleeps.shift();
    if (!next) return;
    this.#time = Math.max(this.#time, next.due);
    next.wake();
  }
}

describe('wait_for_job on a clock the test runs', () => {
  const turns = scriptedRunner();
  const clock = new SteppingClock(2);
  let svc: TestService;
  let mcp: Client;

  before(async () => {
    svc = await startTestService({ runner: turns });
    const project = await svc.createProject({ name: 'waited on' });
    const { key } = await svc.createProjectKey(project.id);
    const client = new ErrandClient({
      baseUrl: svc.url,
      apiKey: key,
      projectId: project.id,
      clock,
    });
    const server = await createMcpServer({ client, defaultProject: project.id, clock });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    mcp = new Client({ name: 'errand-mcp-test', version: '1.0.0' });
    await mcp.connect(clientSide);
  });
  after(async () => {
    await mcp?.close();
    await svc?.close();
  });

  /** The tool's answer: its summary line and the job record. */
  async function call(
    name: string,
    args: Record<string, unknown>,
    onprogress?: (progress: Progress) => void,
  ): Promise<{ summary: string; job: Job }> {
    const res = await mcp.callTool({ name, arguments: args }, undefined, {
      ...(onprogress ? { onprogress } : {}),
    });
    assert.notEqual(res.isError, true, JSON.stringify(res.content));
    const [summary, record] = (res.content as Array<{ type: string; text?: string }>).map(
      (c) => c.text ?? '',
    );
    return { summary: summary ?? '', job: JSON.parse(record ?? '') as Job };
  }

  test('answers with the active job when its time is up, and reports progress meanwhile', async () => {
    const held = (await call('create_job', { prompt: 'hold this one' })).job;
    // From the start of its turn the held job does not change, so the only notifications are
    // the first read and the heartbeat (the worker's start would be one more).
    await turnStarted(turns, held.id);
    const progress: Progress[] = [];
    const started = clock.now();
    const waited = await call('wait_for_job', { jobId: held.id, timeoutSeconds: 11 }, (p) =>
      progress.push(p),
    );
    // The wait gives up at its deadline, not before and not after.
    assert.equal(clock.now() - started, 11_000);
    assert.equal(waited.job.status, 'active');
    assert.equal(waited.job.id, held.id);
    assert.match(waited.summary, /still active after 11 s.*keeps running.*wait_for_job again/);
    // The first read of the job, then a heartbeat every 10 s for clients that reset their own
    // timeout on progress (which must grow at each one, so the first is not 0).
    assert.deepEqual(
      progress.map((p) => [p.progress, p.total, p.message]),
      [
        [0.001, 11, `job ${held.id} is active after 0 s`],
        [10, 11, `job ${held.id} is active after 10 s`],
      ],
    );
    const archived = await call('archive_job', { jobId: held.id });
    assert.equal(archived.job.status, 'archived');
  });
});
