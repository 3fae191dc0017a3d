// `errand webhook …` as a user runs it: the real `errand` process talking to a running
// service's admin API.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { storeDelivery } from '../support/stored-deliveries.ts';

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

type Json = Record<string, unknown>;

describe('errand webhook', () => {
  let svc: TestService;
  let projectId: string;
  let base: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: {
        ERRAND_SECRET_KEY: 'cli-webhooks-test-secret-key',
        // Loopback receivers: the address rule has its own tests.
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
      },
    });
    projectId = (await svc.createProject({ name: 'hooks' })).id;
    base = `/v2/admin/projects/${projectId}/webhooks`;
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
    runCli(svc, args, env);

  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run;
  };
  const json = async (args: string[]): Promise<Json> =>
    JSON.parse(ok(await cli([...args, '--json'])).stdout) as Json;
  const refused = async (args: string[], message: RegExp, env?: Record<string, string>) => {
    const run = await cli(args, env);
    assert.equal(run.code, 1, `${args.join(' ')} exited ${run.code}`);
    assert.equal(run.stdout, '', `${args.join(' ')} wrote to stdout`);
    assert.match(run.stderr, message, args.join(' '));
    assert.doesNotMatch(run.stderr, /\n\s+at /, `${args.join(' ')} printed a stack trace`);
  };
  // A wrong command line: exit 2, the reason and the webhook commands' usage on stderr.
  const misused = async (args: string[], message: RegExp) => {
    const run = await cli(args);
    assert.equal(run.code, 2, `${args.join(' ')} exited ${run.code}`);
    assert.equal(run.stdout, '', `${args.join(' ')} wrote to stdout`);
    assert.match(run.stderr, message, args.join(' '));
    assert.match(run.stderr, /\n\nUsage: errand webhook <subcommand>/, args.join(' '));
    assert.doesNotMatch(run.stderr, /\n\s+at /, `${args.join(' ')} printed a stack trace`);
  };
  const stored = async () => (await svc.request('GET', base)).text;
  const create = (url: string, ...more: string[]) =>
    json(['webhook', 'create', '--project', projectId, '--url', url, ...more]);

  test('create prints the secret once with a note; list and get never show it', async () => {
    const run = ok(
      await cli([
        'webhook',
        'create',
        '--project',
        projectId,
        '--url',
        'http://127.0.0.1:9/hooks/a',
        '--events',
        'job.completed, job.failed',
        '--description',
        'CI notifier',
      ]),
    );
    const lines = run.stdout.trimEnd().split('\n');
    const [, id] =
      /^created webhook (whk_\w+) {2}http:\/\/127\.0\.0\.1:9\/hooks\/a {2}job\.completed,job\.failed {2}enabled {2}CI notifier$/.exec(
        lines[0] ?? '',
      ) ?? ['', ''];
    assert.ok(id, run.stdout);
    assert.match(lines[1] ?? '', /shown once, it will not be shown again/);
    const secret = lines[2]?.trim() ?? '';
    assert.match(secret, SECRET);
    assert.equal(lines.length, 3);

    const listed = ok(await cli(['webhook', 'list', '--project', projectId]));
    assert.match(listed.stdout, new RegExp(`^${id} {2}http://127\\.0\\.0\\.1:9/hooks/a `, 'm'));
    const got = ok(await cli(['webhook', 'get', id, '--project', projectId]));
    assert.match(got.stdout, /events: {7}job\.completed, job\.failed/);
    assert.match(got.stdout, /description: {2}CI notifier/);
    const gotJson = await json(['webhook', 'get', id, '--project', projectId]);
    assert.equal(gotJson.id, id);
    assert.deepEqual(gotJson.events, ['job.completed', 'job.failed']);
    const listJson = await json(['webhook', 'list', '--project', projectId]);
    for (const shown of [
      listed.stdout,
      got.stdout,
      JSON.stringify(gotJson),
      JSON.stringify(listJson),
    ]) {
      assert.ok(!shown.includes(secret), 'the secret is shown again');
      assert.ok(!shown.includes('whsec_'), 'a secret is shown');
    }
  });

  test('create --json: all event types by default, --disabled, the secret in the document', async () => {
    const created = await create('http://127.0.0.1:9/hooks/b', '--disabled');
    assert.match(String(created.id), /^whk_/);
    assert.equal(created.enabled, false);
    assert.equal(created.description, null);
    assert.ok((created.events as string[]).includes('job.archived'));
    assert.ok((created.events as string[]).includes('pull_request.opened'));
    assert.match(String(created.secret), SECRET);
  });

  test('refused input: a bad --events value, a bad URL, missing flags; nothing is written', async () => {
    const before = await stored();
    await refused(
      [
        'webhook',
        'create',
        '--project',
        projectId,
        '--url',
        'http://127.0.0.1:9/x',
        '--events',
        'job.completed,job.exploded',
      ],
      /job\.exploded.*HTTP 400/,
    );
    await refused(
      [
        'webhook',
        'create',
        '--project',
        projectId,
        '--url',
        'http://127.0.0.1:9/x',
        '--events',
        '',
      ],
      /HTTP 400/,
    );
    await refused(
      ['webhook', 'create', '--project', projectId, '--url', 'ftp://example.com/hook'],
      /HTTP 400/,
    );
    await misused(['webhook', 'create', '--project', projectId], /--url is required/);
    await misused(['webhook', 'create', '--url', 'http://127.0.0.1:9/x'], /--project is required/);
    await misused(
      [
        'webhook',
        'create',
        '--project',
        projectId,
        '--url',
        'http://127.0.0.1:9/x',
        '--enabled',
        'yes',
      ],
      /--enabled must be true or false/,
    );
    await misused(['webhook', 'get', '--project', projectId], /webhook: missing ID/);
    await misused(
      ['webhook', 'frobnicate', '--project', projectId],
      /unknown command: webhook frobnicate/,
    );
    await refused(
      ['webhook', 'list', '--project', 'prj_00000000000000000000'],
      /not found.*HTTP 404/,
    );
    const { key } = await svc.createProjectKey(projectId);
    await refused(['webhook', 'list', '--project', projectId], /HTTP 403/, {
      ERRAND_API_KEY: key,
    });
    assert.equal(await stored(), before, 'a refused command wrote nothing');
  });

  test('update changes what it is given; an unknown webhook id is a 404', async () => {
    const created = await create('http://127.0.0.1:9/hooks/c', '--description', 'old');
    const id = String(created.id);
    const updated = await json([
      'webhook',
      'update',
      id,
      '--project',
      projectId,
      '--url',
      'http://127.0.0.1:9/hooks/c2',
      '--events',
      'job.archived',
      '--enabled',
      'false',
    ]);
    assert.equal(updated.url, 'http://127.0.0.1:9/hooks/c2');
    assert.deepEqual(updated.events, ['job.archived']);
    assert.equal(updated.enabled, false);
    assert.equal(updated.description, 'old', 'a field not given is kept');
    const text = ok(
      await cli([
        'webhook',
        'update',
        id,
        '--project',
        projectId,
        '--description',
        '',
        '--enabled',
        'true',
      ]),
    );
    assert.match(text.stdout, new RegExp(`^updated webhook ${id} .* enabled\\n$`));
    const got = await json(['webhook', 'get', id, '--project', projectId]);
    assert.equal(got.description, null, 'an empty description removes it');
    assert.equal(got.enabled, true);

    const before = await stored();
    await misused(['webhook', 'update', id, '--project', projectId], /nothing to change/);
    await refused(
      ['webhook', 'update', id, '--project', projectId, '--events', 'job.nope'],
      /job\.nope.*HTTP 400/,
    );
    for (const unknown of ['whk_00000000000000000000', 'not-an-id']) {
      await refused(
        ['webhook', 'update', unknown, '--project', projectId, '--url', 'http://127.0.0.1:9/y'],
        /not found.*HTTP 404/,
      );
      await refused(['webhook', 'get', unknown, '--project', projectId], /not found.*HTTP 404/);
      await refused(['webhook', 'delete', unknown, '--project', projectId], /not found.*HTTP 404/);
      await refused(['webhook', 'rotate', unknown, '--project', projectId], /not found.*HTTP 404/);
      await refused(
        ['webhook', 'deliveries', unknown, '--project', projectId],
        /not found.*HTTP 404/,
      );
    }
    // A webhook of this project named under another project is not found either.
    const other = await svc.createProject({ name: 'other' });
    await refused(['webhook', 'get', id, '--project', other.id], /not found.*HTTP 404/);
    assert.equal(await stored(), before);
  });

  test('rotate prints a new secret once; the old one signs for the overlap, or not at all with 0', async () => {
    const created = await create('http://127.0.0.1:9/hooks/d');
    const id = String(created.id);
    const start = Date.now();
    const run = ok(
      await cli(['webhook', 'rotate', id, '--project', projectId, '--overlap-hours', '2']),
    );
    const lines = run.stdout.trimEnd().split('\n');
    assert.match(
      lines[0] ?? '',
      new RegExp(`^rotated the secret of webhook ${id}; the previous secret also signs until `),
    );
    assert.match(lines[1] ?? '', /shown once, it will not be shown again/);
    const secret = lines[2]?.trim() ?? '';
    assert.match(secret, SECRET);
    assert.notEqual(secret, created.secret);
    const got = await json(['webhook', 'get', id, '--project', projectId]);
    const until = Date.parse(String(got.previousSecretExpiresAt));
    assert.ok(
      Math.abs(until - (start + 2 * 3_600_000)) < 60_000,
      String(got.previousSecretExpiresAt),
    );

    const defaulted = await json(['webhook', 'rotate', id, '--project', projectId]);
    const day = Date.parse(String(defaulted.previousSecretExpiresAt)) - Date.now();
    assert.ok(Math.abs(day - 24 * 3_600_000) < 60_000, 'the overlap is 24 h by default');
    assert.match(String(defaulted.secret), SECRET);

    const dropped = ok(
      await cli(['webhook', 'rotate', id, '--project', projectId, '--overlap-hours', '0']),
    );
    assert.match(dropped.stdout, /the previous secret no longer signs/);
    assert.equal(
      (await json(['webhook', 'get', id, '--project', projectId])).previousSecretExpiresAt,
      null,
    );
    await misused(
      ['webhook', 'rotate', id, '--project', projectId, '--overlap-hours', 'soon'],
      /--overlap-hours must be a whole number/,
    );
    await refused(
      ['webhook', 'rotate', id, '--project', projectId, '--overlap-hours', '1000'],
      /HTTP 400/,
    );
  });

  test('deliveries: one line each, newest first, pages; redeliver queues one again', async () => {
    const created = await create(
      'http://127.0.0.1:9/hooks/e',
      '--events',
      'job.completed,job.failed',
    );
    const id = String(created.id);
    const job = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'something to be notified about' },
    });
    assert.equal(job.status, 201);
    const jobId = String(job.json.id);
    const t0 = Date.now() - 60_000;
    const delivered = await storeDelivery(svc, {
      webhookId: id,
      jobId,
      type: 'job.completed',
      state: 'delivered',
      attempts: [
        { status: 500, latencyMs: 12 },
        { status: 200, latencyMs: 8 },
      ],
      createdAt: new Date(t0),
    });
    const failed = await storeDelivery(svc, {
      webhookId: id,
      jobId,
      type: 'job.failed',
      state: 'failed',
      attempts: [{ status: null, error: 'timed out after 10 s', latencyMs: 10_000 }],
      createdAt: new Date(t0 + 10_000),
    });

    const text = ok(await cli(['webhook', 'deliveries', id, '--project', projectId]));
    const lines = text.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 2, text.stdout);
    assert.match(
      lines[0] ?? '',
      new RegExp(
        `^${failed} {2}job\\.failed {2}${jobId} {2}failed {2}attempts 1 {2}last: no answer \\(timed out after 10 s\\) `,
      ),
    );
    assert.match(
      lines[1] ?? '',
      new RegExp(
        `^${delivered} {2}job\\.completed {2}${jobId} {2}delivered {2}attempts 2 {2}last status 200 `,
      ),
    );

    const page = ok(
      await cli(['webhook', 'deliveries', id, '--project', projectId, '--limit', '1']),
    );
    const [first, more] = page.stdout.trimEnd().split('\n');
    assert.match(first ?? '', new RegExp(`^${failed} `));
    const cursor = /^older deliveries: --cursor (\S+)$/.exec(more ?? '')?.[1];
    assert.ok(cursor, page.stdout);
    const next = await json([
      'webhook',
      'deliveries',
      id,
      '--project',
      projectId,
      '--limit',
      '1',
      '--cursor',
      cursor,
    ]);
    const deliveries = next.deliveries as Array<{
      id: string;
      attempts: Array<{ status: number }>;
    }>;
    assert.deepEqual(
      deliveries.map((d) => d.id),
      [delivered],
    );
    assert.deepEqual(
      deliveries[0]?.attempts.map((a) => a.status),
      [500, 200],
    );
    assert.equal(next.nextCursor, null);

    const again = ok(
      await cli(['webhook', 'redeliver', failed, '--webhook', id, '--project', projectId]),
    );
    assert.equal(again.stdout, `delivery ${failed} queued again (pending)\n`);
    const after = await json(['webhook', 'deliveries', id, '--project', projectId]);
    const states = (after.deliveries as Array<{ id: string; state: string }>).map((d) => [
      d.id,
      d.state,
    ]);
    assert.deepEqual(states, [
      [failed, 'pending'],
      [delivered, 'delivered'],
    ]);
    const redelivered = await json([
      'webhook',
      'redeliver',
      delivered,
      '--webhook',
      id,
      '--project',
      projectId,
    ]);
    assert.equal(redelivered.state, 'pending');

    await misused(
      ['webhook', 'redeliver', failed, '--project', projectId],
      /--webhook is required/,
    );
    await refused(
      ['webhook', 'redeliver', 'msg_00000000000000000000', '--webhook', id, '--project', projectId],
      /not found.*HTTP 404/,
    );
    await refused(
      ['webhook', 'deliveries', id, '--project', projectId, '--limit', '0'],
      /HTTP 400/,
    );
  });

  test('delete removes the webhook and says so', async () => {
    const created = await create('http://127.0.0.1:9/hooks/f');
    const id = String(created.id);
    const run = ok(await cli(['webhook', 'delete', id, '--project', projectId]));
    assert.equal(run.stdout, `deleted webhook ${id}\n`);
    assert.ok(!(await stored()).includes(id));
    await refused(['webhook', 'get', id, '--project', projectId], /not found.*HTTP 404/);
    await refused(['webhook', 'delete', id, '--project', projectId], /not found.*HTTP 404/);
  });
});
