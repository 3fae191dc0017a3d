// Each record the API answers with is built from its rows by one mapping function and declared
// by one schema (src/records/; the webhook records in src/features/webhooks/types.ts). Here each
// mapping runs on real rows with every optional part filled, and its result must have exactly
// the schema's fields at every depth: a field the mapping adds that the schema does not declare,
// or one the schema declares that the mapping leaves out, fails here. (The OpenAPI components and
// the client's types come from the same schemas; test/client/generated.test.ts keeps them in step.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { toDeliveryRecord, toWebhookRecord } from '../../src/features/webhooks/endpoints.ts';
import {
  deliveryRecord,
  webhookRecord,
  webhookWithSecret,
} from '../../src/features/webhooks/types.ts';
import { JOB_VIEW_COLUMNS, toJobRecord } from '../../src/jobs/record.ts';
import { isRecord } from '../../src/json.ts';
import { toKeyRecord } from '../../src/keys/service.ts';
import { toRoleRecord, toUserRecord } from '../../src/keys/users.ts';
import { toEnvironmentRecord } from '../../src/projects/environments.ts';
import { toSecretRecord } from '../../src/projects/secrets.ts';
import { toProjectRecord } from '../../src/projects/service.ts';
import { environmentRecord } from '../../src/records/environment.ts';
import { jobRecord } from '../../src/records/job.ts';
import { createdKeyRecord, keyRecord } from '../../src/records/key.ts';
import { projectRecord } from '../../src/records/project.ts';
import { secretRecord } from '../../src/records/secret.ts';
import { roleRecord, userRecord } from '../../src/records/user.ts';
import { errorBody } from '../../src/responses.ts';
import { createJobId } from '../support/route-cases.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { createUser } from '../support/users.ts';

/**
 * Where `value` and `schema` disagree on which fields there are, as `at.field: why` lines: at
 * every depth, through nullable, optional and array parts. The values themselves are the
 * schema's to check (parse).
 */
function fieldDrift(schema: z.ZodType, value: unknown, at: string): string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable)
    return value === null || value === undefined
      ? []
      : fieldDrift(schema.unwrap() as z.ZodType, value, at);
  if (schema instanceof z.ZodArray && Array.isArray(value))
    return value.flatMap((item, i) => fieldDrift(schema.element as z.ZodType, item, `${at}[${i}]`));
  if (!(schema instanceof z.ZodObject) || !isRecord(value)) return [];
  const shape: Record<string, z.ZodType> = schema.shape;
  const drift = Object.keys(value)
    .filter((field) => !(field in shape))
    .map((field) => `${at}.${field}: in the record, not in the schema`);
  for (const [field, part] of Object.entries(shape)) {
    if (!(field in value)) drift.push(`${at}.${field}: in the schema, not in the record`);
    else drift.push(...fieldDrift(part, value[field], `${at}.${field}`));
  }
  return drift;
}

/** The record has exactly the schema's fields, and the schema accepts its values. */
function assertExactly(schema: z.ZodType, value: unknown, name: string): void {
  assert.deepEqual(fieldDrift(schema, value, name), [], `${name} drifted from its schema`);
  const parsed = schema.safeParse(value);
  assert.ok(parsed.success, `${name}: ${parsed.error?.message}`);
}

/** Every part of a record, down to its nested objects, had a value to be checked by. */
function assertFilled(value: unknown, name: string, mayBeNull: readonly string[] = []): void {
  assert.ok(isRecord(value), name);
  for (const [field, part] of Object.entries(value)) {
    if (mayBeNull.includes(field)) continue;
    assert.notEqual(part, null, `${name}.${field} is null: fill its row so that it is checked`);
    if (isRecord(part)) assertFilled(part, `${name}.${field}`);
  }
}

describe('records and their schemas', () => {
  let svc: TestService;
  let projectId: string;
  let jobId: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'records-test-secret-key', ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true' },
    });
    projectId = (await svc.createProject({ name: 'records' })).id;
    jobId = await createJobId(svc, projectId, 'a job to map');
  });
  after(async () => {
    await svc?.close();
  });

  test('the fields check finds a field on either side', () => {
    const schema = z.object({ a: z.string(), b: z.object({ c: z.number() }).nullable() });
    assert.deepEqual(fieldDrift(schema, { a: 'x', b: { c: 1 } }, 'r'), []);
    assert.deepEqual(fieldDrift(schema, { a: 'x', b: { c: 1, d: 2 } }, 'r'), [
      'r.b.d: in the record, not in the schema',
    ]);
    assert.deepEqual(fieldDrift(schema, { b: null }, 'r'), [
      'r.a: in the schema, not in the record',
    ]);
  });

  test('the job record', async () => {
    const db = svc.service.ctx.db;
    await db
      .insertInto('eval_runs')
      .values({ id: 'evr_records0000000000000', name: 'records', suite: '{}' })
      .execute();
    await db
      .updateTable('jobs')
      .set({
        pr_link: 'https://github.com/acme/app/pull/7',
        pr_number: 7,
        error: 'the last turn failed',
        origin: JSON.stringify({
          forge: 'github',
          number: 12,
          url: 'https://github.com/acme/app/issues/12',
          title: 'Fix the build',
        }),
        archived_at: new Date(),
        mode: 'plan',
        summary: 'Plan: 1. fix the build.',
        awaiting_approval: true,
        output: JSON.stringify({ verdict: 'yes', files: ['src/main.ts'] }),
        pr: JSON.stringify({
          number: 7,
          url: 'https://github.com/acme/app/pull/7',
          state: 'merged',
          mergedAt: '2025-06-01T12:00:00.000Z',
          headSha: 'a'.repeat(40),
          mergeable: true,
          approved: true,
          checks: [{ name: 'ci/test', state: 'success', url: 'https://ci.example.com/runs/1' }],
          watch: { state: 'ended', reason: 'the pull request was merged', autofixes: 1 },
          observedAt: '2025-06-01T12:00:05.000Z',
        }),
        attempts: JSON.stringify([
          {
            n: 1,
            engine: 'codex',
            model: 'openai:gpt-5',
            branch: `errand/${jobId}-1`,
            outcome: 'failed',
            check: { exitCode: 1, outputTail: '1 test failed', durationMs: 1200 },
            costUsd: 0.02,
            diff: { files: 1, lines: 4 },
            commitSha: 'b'.repeat(40),
            error: 'none',
            winner: false,
          },
        ]),
        eval_run_id: 'evr_records0000000000000',
      })
      .where('id', '=', jobId)
      .execute();
    const row = await db
      .selectFrom('jobs')
      .select(JOB_VIEW_COLUMNS)
      .where('id', '=', jobId)
      .executeTakeFirstOrThrow();
    const record = toJobRecord(row);
    assertFilled(record, 'job', ['costUsd']);
    assertExactly(jobRecord, record, 'job');
  });

  test('the project record', async () => {
    const db = svc.service.ctx.db;
    await db
      .updateTable('projects')
      .set({
        model: 'anthropic:claude-sonnet-4-5',
        forge_kind: 'gitlab',
        forge_api_url: 'https://gitlab.example.com/api/v4',
        forge_token_env: 'GITLAB_TOKEN',
        forge_webhook_secret: 'sealed',
        setup_command: 'npm ci',
        maintenance_command: 'npm run build',
        check_command: 'npm test',
        environment_key_files: ['package-lock.json'],
        network_allow: ['@npm'],
        job_budget_usd: 5,
        monthly_budget_usd: 100,
        autofix_checks: ['ci/*'],
        mcp_servers: JSON.stringify({
          docs: { command: 'node', args: ['docs-mcp.js'], env: { DOCS_TOKEN: 'x' } },
          tracker: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' } },
        }),
      })
      .where('id', '=', projectId)
      .execute();
    const row = await db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirstOrThrow();
    const record = toProjectRecord(svc.service.ctx, row);
    assertFilled(record, 'project');
    assertExactly(projectRecord, record, 'project');
  });

  test('the key record, and a new key', async () => {
    const created = await svc.request('POST', '/v2/admin/keys', {
      body: { projectId, name: 'records' },
    });
    assert.equal(created.status, 201, created.text);
    assertExactly(createdKeyRecord, created.json, 'created key');
    const keyId = createdKeyRecord.parse(created.json).id;
    const db = svc.service.ctx.db;
    await db
      .updateTable('api_keys')
      .set({ last_used_at: new Date(), revoked_at: new Date() })
      .where('id', '=', keyId)
      .execute();
    const row = await db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', keyId)
      .executeTakeFirstOrThrow();
    const record = toKeyRecord(row);
    assertFilled(record, 'key');
    assertExactly(keyRecord, record, 'key');
  });

  test('the user record and the project role record', async () => {
    const db = svc.service.ctx.db;
    const userId = await createUser(db, { groups: ['ops'], roles: { [projectId]: 'member' } });
    await db
      .updateTable('users')
      .set({ last_seen_at: new Date(), deactivated_at: new Date() })
      .where('id', '=', userId)
      .execute();
    const user = await db
      .selectFrom('users')
      .selectAll()
      .where('id', '=', userId)
      .executeTakeFirstOrThrow();
    const roles = await db
      .selectFrom('project_roles')
      .selectAll()
      .where('grantee', '=', userId)
      .execute();
    const record = toUserRecord(user, roles);
    assertFilled(record, 'user');
    assertExactly(userRecord, record, 'user');
    const role = roles[0];
    assert.ok(role);
    const roleRow = toRoleRecord(role);
    assertFilled(roleRow, 'role');
    assertExactly(roleRecord, roleRow, 'role');
  });

  test('the secret record', async () => {
    const put = await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`, {
      body: { value: 'npm_0123456789abcdef', exposure: 'commands' },
    });
    assert.equal(put.status, 201, put.text);
    const row = await svc.service.ctx.db
      .selectFrom('project_secrets')
      .selectAll()
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    const record = toSecretRecord(row);
    assertFilled(record, 'secret');
    assertExactly(secretRecord, record, 'secret');
  });

  test('the environment record', async () => {
    const db = svc.service.ctx.db;
    await db
      .insertInto('environments')
      .values({
        project_id: projectId,
        key: 'k'.repeat(64),
        worker: 'worker-1',
        size_bytes: 1_234_567,
        files: 300,
        build_ms: 61_500,
        base_commit: 'a'.repeat(40),
        created_at: new Date(),
        last_used_at: new Date(),
      })
      .execute();
    const row = await db
      .selectFrom('environments')
      .selectAll()
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    const record = toEnvironmentRecord(row);
    assertFilled(record, 'environment');
    assertExactly(environmentRecord, record, 'environment');
  });

  test('the webhook and delivery records, and an endpoint with its secret', async () => {
    const base = `/v2/admin/projects/${projectId}/webhooks`;
    const created = await svc.request('POST', base, {
      body: { url: 'http://127.0.0.1:9/hook', description: 'records', events: ['job.created'] },
    });
    assert.equal(created.status, 201, created.text);
    assertExactly(webhookWithSecret, created.json, 'webhook with secret');
    const webhookId = webhookWithSecret.parse(created.json).id;
    const rotated = await svc.request('POST', `${base}/${webhookId}/rotate-secret`, {
      body: { overlapSeconds: 3600 },
    });
    assert.equal(rotated.status, 200, rotated.text);
    const db = svc.service.ctx.db;
    const row = await db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', '=', webhookId)
      .executeTakeFirstOrThrow();
    const record = toWebhookRecord(row);
    assertFilled(record, 'webhook');
    assertExactly(webhookRecord, record, 'webhook');

    const now = new Date();
    await db
      .insertInto('webhook_deliveries')
      .values({
        id: 'msg_records0000000000000',
        webhook_id: webhookId,
        job_id: jobId,
        event_seq: 1,
        type: 'job.created',
        payload: '{}',
        state: 'failed',
        created_at: now,
        delivered_at: now,
        failed_at: now,
      })
      .execute();
    await db
      .insertInto('webhook_attempts')
      .values({
        delivery_id: 'msg_records0000000000000',
        attempt: 1,
        at: now,
        status: 500,
        error: 'the receiver answered 500',
        latency_ms: 12,
      })
      .execute();
    const delivery = await db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .executeTakeFirstOrThrow();
    const attempts = await db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', '=', delivery.id)
      .execute();
    const deliveryAsRecord = toDeliveryRecord(delivery, attempts);
    assertFilled(deliveryAsRecord, 'delivery');
    for (const attempt of deliveryAsRecord.attempts) assertFilled(attempt, 'delivery attempt');
    assertExactly(deliveryRecord, deliveryAsRecord, 'delivery');
  });

  test('the error body', async () => {
    const res = await svc.request('GET', `/v2/agent/${projectId}/job/job_00000000000000000000`);
    assert.equal(res.status, 404, res.text);
    assertExactly(errorBody, res.json, 'error');
  });
});
