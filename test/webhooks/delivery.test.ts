// Webhook delivery end to end: a real service (API, queue, workers, database)
// sends a job's events to a real receiver on loopback, and every request is checked with the
// Standard Webhooks reference library (standardwebhooks), not with Errand's own code.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TestClock } from 'pg-boss';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { WebhookPayload } from '../../src/features/webhooks/outbox.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { runFast } from '../support/queue-clock.ts';
import { RecordingRunner } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import {
  addWebhook,
  deliveryLog,
  newSecret,
  type Received,
  Receiver,
  SECRET_KEY,
} from './receiver.ts';

const PR_LINK = 'https://forge.example.test/acme/app/pull/7';

/** Verifies a request with the reference library and returns its payload. */
function verified(secret: string, request: Received): WebhookPayload {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers)) if (typeof v === 'string') headers[k] = v;
  return new Webhook(secret).verify(request.body, headers) as WebhookPayload;
}

/** A runner standing in for the agent: a step, a pull request opened, a summary. */
function prRunner(): RecordingRunner {
  return new RecordingRunner(async (input) => {
    await input.emit('command.started', { command: 'step 1', cwd: '.' });
    await input.emit('pull_request.opened', {
      forge: 'github',
      number: 7,
      url: PR_LINK,
      draft: false,
      notes: [],
    });
    return { summary: `did ${input.turn.prompt}`, prLink: PR_LINK, prNumber: 7 };
  });
}

describe('webhook delivery', () => {
  let svc: TestService;
  const receivers: Receiver[] = [];
  // The queue's time, run ten times faster than real time once the service is up.
  const clock = new TestClock();
  let stopClock: (() => Promise<void>) | undefined;

  before(async () => {
    svc = await startTestService({
      clock,
      runner: prRunner(),
      env: {
        ERRAND_SECRET_KEY: SECRET_KEY,
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
        ERRAND_WEBHOOK_RETRY_DELAY_SECONDS: '1',
        ERRAND_WEBHOOK_TIMEOUT_SECONDS: '1',
      },
    });
    stopClock = runFast(clock);
  });
  after(async () => {
    await stopClock?.();
    await svc?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  async function setup(): Promise<{ project: ProjectRecord; receiver: Receiver }> {
    const receiver = await Receiver.start(() => clock.now());
    receivers.push(receiver);
    return { project: await svc.createProject(), receiver };
  }

  test("a job's events arrive in order, signed, with the documented payload; only the types asked for", async () => {
    const { project, receiver } = await setup();
    const wanted = ['job.created', 'pull_request.opened', 'turn.finished', 'job.completed'];
    // And job.archived, the sentinel at the end: archiving comes after all of these.
    const hook = await addWebhook(svc, project.id, `${receiver.url}/hooks?x=1`, [
      ...wanted,
      'job.archived',
    ]);
    const jobId = await createJob(svc, project.id, 'add a readme');
    const completed = await untilStatus(svc, project.id, jobId, 'completed', { failFast: true });
    const requests = await receiver.until(4);
    const payloads = requests.map((r) => verified(hook.secret, r));
    assert.deepEqual(
      payloads.map((p) => p.type),
      wanted,
    );

    // The payload as docs/api.md documents it, event by event as the events API has them.
    const events = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}/events`);
    const log = events.json.events ?? [];
    const seqs = payloads.map((p) => p.data.event.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'seqs in order',
    );
    for (const [i, p] of payloads.entries()) {
      const event = log.find((e) => e.seq === p.data.event.seq);
      assert.ok(event, `event ${p.data.event.seq} is in the job's log`);
      assert.deepEqual(p.data.event, event);
      assert.equal(p.timestamp, event.at);
      assert.equal(p.data.projectId, project.id);
      assert.equal(p.data.jobId, jobId);
      assert.equal(p.data.job.id, jobId);
      const request = requests[i];
      assert.ok(request);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.match(String(request.headers['user-agent']), /^Errand-Webhooks\/\d+\.\d+\.\d+$/);
      assert.match(request.id, /^msg_[0-9A-Za-z]{20}$/);
    }
    assert.equal(new Set(requests.map((r) => r.id)).size, 4, 'one webhook-id per delivery');
    assert.deepEqual(payloads[0]?.data.job.status, 'active');
    assert.deepEqual(payloads[1]?.data.event.data, {
      forge: 'github',
      number: 7,
      url: PR_LINK,
      draft: false,
      notes: [],
    });
    // The job's record at each moment: the final event carries what GET returns now.
    const { json: now } = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`);
    assert.deepEqual(payloads[3]?.data.job, now);
    assert.equal(completed.prLink, PR_LINK);
    assert.equal(payloads[3]?.data.job.prLink, PR_LINK);
    assert.equal(payloads[0]?.data.job.prLink, null);
    // Nothing of the service's secrets in any payload.
    for (const r of requests) {
      assert.ok(!r.body.includes(SECRET_KEY));
      assert.ok(!r.body.includes(svc.adminKey));
      assert.ok(!r.body.includes(hook.secret.slice(6)));
    }

    // The delivery log: one attempt each, 2xx, delivered.
    for (const r of requests) {
      const entry = await waitFor('delivered', async () => {
        const d = await deliveryLog(svc, r.id);
        return d.state === 'delivered' ? d : undefined;
      });
      assert.equal(entry.attempts, 1);
      assert.equal(entry.log[0]?.status, 200);
      assert.equal(entry.log[0]?.error, null);
    }
    // Types not asked for (job.created is, turn.started and command.started are not) never arrive.
    // The sentinel: archiving the job sends job.archived, which an endpoint gets only after
    // every earlier event of the job (its deliveries of one job go one after another).
    const archived = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/archive`);
    assert.equal(archived.status, 200);
    const sentinel = (await receiver.until(5))[4];
    assert.equal(sentinel?.type, 'job.archived');
    assert.deepEqual(
      receiver.requests.map((r) => r.type),
      [...wanted, 'job.archived'],
    );
  });

  test('a receiver answering 500 twice then 200 gets the event three times; the log shows it', async () => {
    const { project, receiver } = await setup();
    const hook = await addWebhook(svc, project.id, receiver.url, ['job.created', 'job.archived']);
    receiver.answer = (_r, i) => (i < 2 ? 500 : 200);
    const jobId = await createJob(svc, project.id, 'retry me');
    const requests = await receiver.until(3);
    const first = requests[0];
    assert.ok(first);
    assert.deepEqual(
      requests.map((r) => r.id),
      [first.id, first.id, first.id],
      'the same webhook-id on every attempt',
    );
    for (const r of requests) verified(hook.secret, r);
    // Exponential backoff from 1 s: at least 1 s, then at least 2 s more, on the queue's clock.
    const [a, b, c] = requests.map((r) => r.at);
    assert.ok(a !== undefined && b !== undefined && c !== undefined);
    assert.ok(b - a >= 1000, `first retry after ${b - a} ms`);
    assert.ok(c - b >= 2000, `second retry after ${c - b} ms`);
    const log = await waitFor('delivered', async () => {
      const d = await deliveryLog(svc, first.id);
      return d.state === 'delivered' ? d : undefined;
    });
    assert.equal(log.attempts, 3);
    assert.deepEqual(
      log.log.map((l) => [l.attempt, l.status, l.error]),
      [
        [1, 500, 'answered 500'],
        [2, 500, 'answered 500'],
        [3, 200, null],
      ],
    );
    // The sentinel: the job's next event (archiving it) is sent to this endpoint only once the
    // retried delivery's queue entry is done, so no attempt of it can come after.
    await untilStatus(svc, project.id, jobId, 'completed');
    const archived = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/archive`);
    assert.equal(archived.status, 200);
    const sentinel = (await receiver.until(4))[3];
    assert.equal(sentinel?.type, 'job.archived');
    assert.deepEqual(
      receiver.requests.map((r) => r.type),
      ['job.created', 'job.created', 'job.created', 'job.archived'],
      'nothing more after the 200',
    );
  });

  test('a receiver that hangs is cut at the timeout, and the event is delivered on retry', async () => {
    const { project, receiver } = await setup();
    await addWebhook(svc, project.id, receiver.url, ['job.created']);
    receiver.answer = (_r, i) => (i === 0 ? 'hang' : 204);
    await createJob(svc, project.id, 'hang on');
    const [first] = await receiver.until(2);
    assert.ok(first);
    const log = await waitFor('delivered', async () => {
      const d = await deliveryLog(svc, first.id);
      return d.state === 'delivered' ? d : undefined;
    });
    const [cut, ok] = log.log;
    assert.equal(cut?.status, null);
    assert.equal(cut?.error, 'timed out after 1 s');
    assert.ok(
      cut && cut.latencyMs >= 950 && cut.latencyMs < 2000,
      `cut after ${cut?.latencyMs} ms`,
    );
    assert.equal(ok?.status, 204);
  });

  test("in order per job: a job's next event waits for the one before; other jobs are not held", async () => {
    const { project, receiver } = await setup();
    const hook = await addWebhook(svc, project.id, receiver.url, ['job.created', 'job.completed']);
    let failuresLeft = 3;
    let heldJob = '';
    receiver.answer = (r) => {
      const p = JSON.parse(r.body) as WebhookPayload;
      if (p.data.jobId === heldJob && p.type === 'job.created' && failuresLeft > 0) {
        failuresLeft--;
        return 503;
      }
      return 200;
    };
    heldJob = await createJob(svc, project.id, 'held');
    await untilStatus(svc, project.id, heldJob, 'completed');
    const otherJob = await createJob(svc, project.id, 'free');
    await untilStatus(svc, project.id, otherJob, 'completed');
    await receiver.until(7);
    const seen = receiver.requests.map((r) => {
      const p = verified(hook.secret, r);
      return `${p.data.jobId === heldJob ? 'held' : 'other'} ${p.type}`;
    });
    const held = seen.filter((s) => s.startsWith('held'));
    assert.deepEqual(held, [
      'held job.created',
      'held job.created',
      'held job.created',
      'held job.created',
      'held job.completed',
    ]);
    // The other job's events went out while the held one's first event was being retried.
    const otherFirst = seen.indexOf('other job.created');
    const heldDone = seen.lastIndexOf('held job.created');
    assert.ok(otherFirst >= 0 && otherFirst < heldDone, seen.join(', '));
  });

  test('while a rotated secret overlaps, both secrets sign; after it, only the new one', async () => {
    const { project, receiver } = await setup();
    const previous = newSecret();
    const hook = await addWebhook(svc, project.id, receiver.url, ['job.created', 'job.archived'], {
      previousSecret: previous,
      previousExpiresAt: new Date(Date.now() + 3_600_000),
    });
    const jobId = await createJob(svc, project.id, 'rotate');
    const [during] = await receiver.until(1);
    assert.ok(during);
    assert.equal(String(during.headers['webhook-signature']).split(' ').length, 2);
    assert.equal(verified(hook.secret, during).type, 'job.created');
    assert.equal(verified(previous, during).type, 'job.created');

    await svc.service.ctx.db
      .updateTable('webhooks')
      .set({ previous_secret_expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', hook.id)
      .execute();
    await untilStatus(svc, project.id, jobId, 'completed');
    const archived = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/archive`);
    assert.equal(archived.status, 200);
    const [, afterExpiry] = await receiver.until(2);
    assert.ok(afterExpiry);
    assert.equal(String(afterExpiry.headers['webhook-signature']).split(' ').length, 1);
    assert.equal(verified(hook.secret, afterExpiry).type, 'job.archived');
    assert.throws(() => verified(previous, afterExpiry), WebhookVerificationError);
  });

  test('a disabled or deleted webhook is sent nothing more', async () => {
    const { project, receiver } = await setup();
    const { db } = svc.service.ctx;
    const disabled = await addWebhook(svc, project.id, receiver.url, ['job.created']);
    const deleted = await addWebhook(svc, project.id, `${receiver.url}/deleted`, ['job.created']);
    // Both fail until they are changed, so their deliveries are still pending then.
    receiver.answer = () => 500;
    await createJob(svc, project.id, 'stop sending');
    await receiver.until(2);
    await db
      .updateTable('webhooks')
      .set({ enabled: false })
      .where('id', '=', disabled.id)
      .execute();
    // The deleted endpoint's delivery goes with it; its queue entry's retry then finds nothing
    // to send, which the worker counts as skipped.
    const skipped = () =>
      svc.service.ctx.metrics.value('errand_webhook_deliveries_total', { outcome: 'skipped' });
    const skippedBefore = await skipped();
    await db.deleteFrom('webhooks').where('id', '=', deleted.id).execute();
    const disabledDelivery = await db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('webhook_id', '=', disabled.id)
      .executeTakeFirstOrThrow();
    const settled = await waitFor('the disabled delivery to fail', async () => {
      const d = await deliveryLog(svc, disabledDelivery.id);
      return d.state === 'failed' ? d : undefined;
    });
    assert.deepEqual(settled.log.at(-1), {
      attempt: settled.attempts,
      status: null,
      error: 'not sent: the webhook is disabled',
      latencyMs: 0,
    });
    const count = receiver.requests.length;
    // The sentinel: the retry of each has run (the disabled one failed above, the deleted one
    // skipped) and returned, so its queue entry is done and nothing of it can be sent after.
    await waitFor("the deleted webhook's retry to find nothing to send", async () =>
      (await skipped()) > skippedBefore ? true : undefined,
    );
    assert.equal(receiver.requests.length, count, 'nothing sent after the change');
    // A new event of the project goes to neither. The sentinel: an endpoint added now, on a
    // receiver of its own, gets the new job's job.created; the outbox writes every endpoint's
    // delivery in the transaction that records the event, so any to the others exists by then.
    const witness = await Receiver.start(() => clock.now());
    receivers.push(witness);
    await addWebhook(svc, project.id, witness.url, ['job.created']);
    const afterJob = await createJob(svc, project.id, 'after');
    const [witnessed] = await witness.until(1);
    assert.equal(witnessed?.type, 'job.created');
    assert.deepEqual(
      await db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('job_id', '=', afterJob)
        .where('webhook_id', 'in', [disabled.id, deleted.id])
        .execute(),
      [],
    );
    assert.equal(receiver.requests.length, count);
  });
});

describe('webhook delivery to private addresses, setting off', () => {
  let svc: TestService;
  let receiver: Receiver;

  before(async () => {
    receiver = await Receiver.start();
    svc = await startTestService({
      runner: prRunner(),
      env: {
        ERRAND_SECRET_KEY: SECRET_KEY,
        ERRAND_WEBHOOK_RETRY_DELAY_SECONDS: '1',
        // No retries: the first failure gives a delivery up.
        ERRAND_WEBHOOK_RETRY_HOURS: '0',
      },
    });
  });
  after(async () => {
    await svc?.close();
    await receiver?.close();
  });

  test('is refused at every attempt, the receiver gets nothing, and the job goes on', async () => {
    const project = await svc.createProject();
    const hooks = [
      await addWebhook(svc, project.id, `https://127.0.0.1:${receiver.port}/`, [
        'job.created',
        'job.completed',
      ]),
      await addWebhook(svc, project.id, `https://localhost:${receiver.port}/`, ['job.created']),
      await addWebhook(svc, project.id, `https://[::ffff:127.0.0.1]:${receiver.port}/`, [
        'job.created',
      ]),
      await addWebhook(svc, project.id, receiver.url, ['job.created']),
    ];
    const jobId = await createJob(svc, project.id, 'private');
    await untilStatus(svc, project.id, jobId, 'completed');
    const { db } = svc.service.ctx;
    const rows = await waitFor('every delivery given up', async () => {
      const all = await db
        .selectFrom('webhook_deliveries')
        .select(['id', 'webhook_id', 'type', 'state'])
        .where('job_id', '=', jobId)
        .execute();
      return all.length === 5 && all.every((d) => d.state === 'failed') ? all : undefined;
    });
    const errors = new Map<string, string[]>();
    for (const row of rows) {
      const log = await deliveryLog(svc, row.id);
      assert.equal(log.attempts, 1, 'given up after the first attempt');
      assert.equal(log.log[0]?.status, null);
      errors.set(
        `${row.webhook_id} ${row.type}`,
        log.log.map((l) => String(l.error)),
      );
    }
    const [literal, name, mapped, http] = hooks.map((h) => h?.id);
    assert.deepEqual(errors.get(`${literal} job.created`), ['address 127.0.0.1 is loopback']);
    // A given-up delivery does not hold back the next event of the job to that endpoint.
    assert.deepEqual(errors.get(`${literal} job.completed`), ['address 127.0.0.1 is loopback']);
    assert.match(
      errors.get(`${name} job.created`)?.[0] ?? '',
      /^host localhost resolves to address (127\.0\.0\.1|::1) is loopback$/,
    );
    assert.deepEqual(errors.get(`${mapped} job.created`), [
      'address ::ffff:7f00:1 is loopback (IPv4-mapped 127.0.0.1)',
    ]);
    assert.deepEqual(errors.get(`${http} job.created`), [
      'the webhook url must use https:// (not http://)',
    ]);
    assert.equal(receiver.requests.length, 0, 'the receiver got nothing');
  });
});
