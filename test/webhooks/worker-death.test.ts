// A worker killed mid-delivery never loses the event. Real `errand worker` processes on
// PostgreSQL: the one sending a delivery is killed with SIGKILL while the receiver holds the
// request open; another worker, started after, sends the same delivery (same webhook-id) once
// the dead worker's heartbeat has lapsed.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createJob } from '../support/jobs.ts';
import { exited, startWorkerProcess } from '../support/process.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import { addWebhook, deliveryLog, Receiver, SECRET_KEY } from './receiver.ts';

/** Starts `errand worker` and resolves once it has started (its "errand started" log line). */
describe('a worker killed mid-delivery (real worker processes)', () => {
  let svc: TestService;
  let receiver: Receiver;
  const workers: ChildProcess[] = [];

  before(async () => {
    receiver = await Receiver.start();
    // The API only: deliveries are sent by the worker processes.
    svc = await startTestService({
      worker: false,
      env: {
        ERRAND_SECRET_KEY: SECRET_KEY,
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
        ERRAND_WEBHOOK_RETRY_DELAY_SECONDS: '1',
        // Longer than the test: the cut comes from the kill, not from the attempt's bound.
        ERRAND_WEBHOOK_TIMEOUT_SECONDS: '120',
      },
    });
  });
  after(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await Promise.all(workers.map((w) => exited(w)));
    await svc?.close();
    await receiver?.close();
  });

  test('another worker delivers the event again, with the same webhook-id', async () => {
    const project = await svc.createProject();
    // job.archived is the sentinel at the end: it waits for job.created's entry to be done.
    const hook = await addWebhook(svc, project.id, receiver.url, ['job.created', 'job.archived']);
    receiver.answer = (_r, i) => (i === 0 ? 'hang' : 200);
    const workerEnv = (machine: string) => ({
      ...svc.env,
      ERRAND_DATA_DIR: path.join(svc.database.dataDir, machine),
      ERRAND_PUBLIC_URL: svc.url,
    });
    const first = await startWorkerProcess(workerEnv('machine-a'));
    workers.push(first);
    const jobId = await createJob(svc, project.id, 'deliver me');
    // The job's turn is of no interest here: archived, it leaves the workers to the delivery.
    const archived = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/archive`);
    assert.equal(archived.status, 200);
    const [held] = await receiver.until(1);
    assert.ok(held);
    assert.equal(held.type, 'job.created');

    const killedAt = Date.now();
    first.kill('SIGKILL');
    await exited(first);
    // Nothing was recorded for the cut attempt: the delivery is still pending, never lost.
    assert.equal((await deliveryLog(svc, held.id)).state, 'pending');
    workers.push(await startWorkerProcess(workerEnv('machine-b')));

    const [, again] = await receiver.until(2, 60_000);
    assert.ok(again);
    assert.equal(again.id, held.id, 'the same webhook-id: a receiver can drop the repeat');
    assert.equal(again.body, held.body);
    const headers = Object.fromEntries(
      Object.entries(again.headers).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
    new Webhook(hook.secret).verify(again.body, headers);
    const tookMs = again.at - killedAt;
    assert.ok(tookMs < 30_000, `redelivered ${tookMs} ms after the kill`);
    const log = await waitFor('delivered', async () => {
      const d = await deliveryLog(svc, held.id);
      return d.state === 'delivered' ? d : undefined;
    });
    assert.deepEqual(
      log.log.map((l) => l.status),
      [200],
      'the cut attempt left no row; the redelivery is logged',
    );
    // The sentinel: the job's next event (job.archived, from the archive above) is sent to this
    // endpoint only once job.created's queue entry is done (one endpoint's deliveries of a job
    // go one after another), so no third attempt of job.created can come after it.
    const sentinel = (await receiver.until(3, 60_000))[2];
    assert.equal(sentinel?.type, 'job.archived');
    assert.deepEqual(
      receiver.requests.map((r) => r.type),
      ['job.created', 'job.created', 'job.archived'],
      'delivered once after the kill',
    );
  });
});
