// Shared cases for the route tests: every route gets the same authentication, body and job-id
// checks from here, and every refused request is checked to have left the database unchanged.
// Route files add only what is particular to their route.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { TurnFailedError, type TurnInput, type TurnOutput } from '../../src/jobs/runner.ts';
import { mintKey } from '../../src/keys/format.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { RecordingRunner, type TurnCall, work } from './runners.ts';
import { type HttpResult, type RequestOptions, type TestService, waitFor } from './service.ts';

// ---------------------------------------------------------------------------------------------
// Fixture: two projects, a key and a job in each, and a spare key.

export interface RouteFixture {
  svc: TestService;
  /** Project A: the project the happy paths act on. */
  project: ProjectRecord;
  projectKey: string;
  jobId: string;
  /** Project B: projectKey is not valid for it. */
  otherProject: ProjectRecord;
  otherProjectKey: string;
  otherJobId: string;
  /** A project key of project A that routes acting on a key (revoke) may name. */
  spareKeyId: string;
}

export async function createRouteFixture(svc: TestService): Promise<RouteFixture> {
  const project = await svc.createProject({ name: 'fixture project A' });
  const otherProject = await svc.createProject({ name: 'fixture project B' });
  const { key: projectKey } = await svc.createProjectKey(project.id);
  const { key: otherProjectKey } = await svc.createProjectKey(otherProject.id);
  const { id: spareKeyId } = await svc.createProjectKey(project.id);
  const jobId = await createJobId(svc, project.id, 'fixture job A');
  const otherJobId = await createJobId(svc, otherProject.id, 'fixture job B');
  return {
    svc,
    project,
    projectKey,
    jobId,
    otherProject,
    otherProjectKey,
    otherJobId,
    spareKeyId,
  };
}

export async function createJobId(
  svc: TestService,
  projectId: string,
  prompt: string,
  key?: string,
): Promise<string> {
  const res = await svc.request('POST', `/v2/agent/${projectId}/job`, {
    body: { prompt },
    ...(key ? { key } : {}),
  });
  assert.equal(res.status, 201, `job create failed: ${res.status} ${res.text}`);
  assert.ok(res.json.id);
  return res.json.id;
}

// ---------------------------------------------------------------------------------------------
// Assertions.

/** Every field of a job record: the seed interface's, then Errand's own. */
export const JOB_FIELDS = [
  'archivedAt',
  'attempts',
  'awaitingApproval',
  'branch',
  'createdAt',
  'createdBy',
  'error',
  'evalRunId',
  'id',
  'mode',
  'model',
  'origin',
  'output',
  'pr',
  'prLink',
  'projectId',
  'source',
  'status',
  'summary',
  'turns',
  'updatedAt',
  'usage',
];

export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const JOB_ID = /^job_[0-9A-Za-z]{20}$/;
export const PROJECT_ID = /^prj_[0-9A-Za-z]{20}$/;
export const KEY_ID = /^key_[0-9A-Za-z]{20}$/;

/** Asserts an error response: the status, the code, and exactly {error, code, requestId}. */
export function assertError(res: HttpResult, status: number, code: string): void {
  assert.equal(res.status, status, `expected ${status} ${code}, got ${res.status}: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  const body: unknown = JSON.parse(res.text);
  assert.ok(typeof body === 'object' && body !== null && !Array.isArray(body));
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'requestId']);
  assert.equal(res.json.code, code);
  assert.equal(typeof res.json.error, 'string');
  assert.ok((res.json.error ?? '').length > 0, 'the error message is empty');
  assert.match(res.json.requestId ?? '', /^req_[0-9A-Za-z]{16}$/);
  assert.equal(res.headers.get('x-request-id'), res.json.requestId);
  assert.doesNotMatch(res.text, /\n\s+at /, 'the error leaks a stack trace');
  if (status === 401) assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer\b/);
}

export function isoNear(value: string | null | undefined, ms = 60_000): void {
  assert.match(value ?? '', ISO_UTC);
  const at = Date.parse(value ?? '');
  assert.ok(Math.abs(Date.now() - at) < ms, `${value} is not close to now`);
}

/** Everything the API writes, minus what workers change on their own (job status, events). */
export interface Snapshot {
  projects: string[];
  keys: string[];
  jobs: string[];
  turns: string[];
  rateLimits: string[];
  webhooks: string[];
  idempotencyKeys: string[];
  secrets: string[];
  environments: string[];
  /** The environment builds asked for, from the build queue. */
  environmentBuilds: string[];
  schedules: string[];
  attachments: string[];
  /** Eval runs with their results' states (src/features/eval/). */
  evalRuns: string[];
}

const iso = (d: Date | null): string => (d ? d.toISOString() : '-');

export async function snapshot(svc: TestService): Promise<Snapshot> {
  const db = svc.service.ctx.db;
  const [
    projects,
    keys,
    jobs,
    turns,
    rateLimits,
    webhooks,
    idempotencyKeys,
    secrets,
    environments,
    environmentBuilds,
    schedules,
    attachments,
    evalRuns,
  ] = await Promise.all([
    db.selectFrom('projects').selectAll().orderBy('id').execute(),
    db.selectFrom('api_keys').selectAll().orderBy('id').execute(),
    db.selectFrom('jobs').selectAll().orderBy('id').execute(),
    db
      .selectFrom('turns')
      .select(['job_id', 'seq', 'prompt'])
      .orderBy('job_id')
      .orderBy('seq')
      .execute(),
    db.selectFrom('rate_limits').selectAll().orderBy('project_id').orderBy('operation').execute(),
    db.selectFrom('webhooks').selectAll().orderBy('id').execute(),
    db.selectFrom('idempotency_keys').selectAll().orderBy('project_id').orderBy('key').execute(),
    db.selectFrom('project_secrets').selectAll().orderBy('project_id').orderBy('name').execute(),
    db
      .selectFrom('environments')
      .selectAll()
      .orderBy('project_id')
      .orderBy('key')
      .orderBy('worker')
      .execute(),
    environmentBuildRequests(svc),
    db.selectFrom('schedules').selectAll().orderBy('id').execute(),
    db
      .selectFrom('attachments')
      .select(['job_id', 'seq', 'n', 'size'])
      .orderBy('job_id')
      .orderBy('seq')
      .orderBy('n')
      .execute(),
    db
      .selectFrom('eval_runs as r')
      .leftJoin('eval_results as e', 'e.run_id', 'r.id')
      .select(['r.id', 'r.state', 'e.n', 'e.state as result'])
      .orderBy('r.id')
      .orderBy('e.n')
      .execute(),
  ]);
  return {
    projects: projects.map(
      (p) => `${p.id} ${p.name} ${p.repository} ${p.ref} ${p.model} ${iso(p.updated_at)}`,
    ),
    keys: keys.map((k) => `${k.id} ${k.project_id} ${iso(k.revoked_at)}`),
    jobs: jobs.map(
      (j) => `${j.id} ${j.project_id} turns=${j.turn_count} archived=${iso(j.archived_at)}`,
    ),
    turns: turns.map((t) => `${t.job_id} ${t.seq} ${t.prompt.length}`),
    rateLimits: rateLimits.map(
      (r) => `${r.project_id} ${r.operation} ${iso(r.window_start)} ${r.count}`,
    ),
    webhooks: webhooks.map(
      (w) =>
        `${w.id} ${w.project_id} ${w.url} ${w.events.join(',')} ${w.description} ${w.enabled} ${w.secret} ${w.previous_secret} ${iso(w.previous_secret_expires_at)} ${iso(w.updated_at)}`,
    ),
    idempotencyKeys: idempotencyKeys.map(
      (k) => `${k.project_id} ${k.key} ${k.fingerprint} ${k.status} ${iso(k.created_at)}`,
    ),
    secrets: secrets.map(
      (r) => `${r.project_id} ${r.name} ${r.sealed_value} ${r.exposure} ${iso(r.updated_at)}`,
    ),
    environments: environments.map(
      (r) => `${r.project_id} ${r.key} ${r.worker} ${r.size_bytes} ${iso(r.last_used_at)}`,
    ),
    environmentBuilds: environmentBuilds.map((r) => `${r.projectId} ${r.reason}`),
    schedules: schedules.map(
      (r) =>
        `${r.id} ${r.project_id} ${r.name} ${r.cron} ${r.timezone} ${r.mode} ${r.model} ${r.paused} ${iso(r.updated_at)}`,
    ),
    attachments: attachments.map((a) => `${a.job_id} ${a.seq} ${a.n} ${a.size}`),
    evalRuns: evalRuns.map((r) => `${r.id} ${r.state} ${r.n} ${r.result}`),
  };
}

/** The environment builds asked for so far, oldest first, as the build queue holds them. */
export async function environmentBuildRequests(
  svc: TestService,
): Promise<{ projectId: string; reason: string }[]> {
  const { rows } = await sql<{ data: { projectId: string; reason: string } }>`
    SELECT data FROM pgboss.job WHERE name = 'environment-builds'
    ORDER BY created_on, id`.execute(svc.service.ctx.db);
  return rows.map((row) => row.data);
}

/**
 * The reasons of the environment builds asked for `projectId` since the last call, oldest first:
 * read and taken off the queue, so that each request shows. (The queue keeps one waiting build
 * per project: a request made while one waits is that one, and writes nothing.)
 */
export async function takeEnvironmentBuildRequests(
  svc: TestService,
  projectId: string,
): Promise<string[]> {
  const { rows } = await sql<{ reason: string }>`
    WITH taken AS (
      DELETE FROM pgboss.job
      WHERE name = 'environment-builds' AND data->>'projectId' = ${projectId}
      RETURNING data, created_on, id
    )
    SELECT data->>'reason' AS reason FROM taken ORDER BY created_on, id`.execute(
    svc.service.ctx.db,
  );
  return rows.map((row) => row.reason);
}

/** Runs `act` and asserts that it changed nothing the API stores. */
export async function unchanged<T>(svc: TestService, act: () => Promise<T>): Promise<T> {
  const before = await snapshot(svc);
  const result = await act();
  assert.deepEqual(await snapshot(svc), before, 'a refused request changed stored state');
  return result;
}

export async function countRows(
  svc: TestService,
  table: 'jobs' | 'turns' | 'projects' | 'api_keys',
): Promise<number> {
  const row = await svc.service.ctx.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

// ---------------------------------------------------------------------------------------------
// Keys.

export function randomProjectId(): string {
  return `prj_${mintKey().slice(7, 27)}`;
}

export function randomJobId(): string {
  return `job_${mintKey().slice(7, 27)}`;
}

/** A key with one character of its body changed: the checksum no longer matches. */
export function flipOneChar(key: string): string {
  const i = 12;
  const c = key[i] === 'a' ? 'b' : 'a';
  return `${key.slice(0, i)}${c}${key.slice(i + 1)}`;
}

// ---------------------------------------------------------------------------------------------
// A scripted runner for files whose tests need turns to finish: the prompt's first word says
// what the turn does. Anything else fails at once, like the service's default runner.

export function scriptedRunner(): RecordingRunner {
  return new RecordingRunner(async (input: TurnInput): Promise<TurnOutput> => {
    const word = input.turn.prompt.split(/\s/)[0];
    if (word === 'complete') return { summary: `did: ${input.turn.prompt}` };
    if (word === 'steps') {
      for (const step of ['one', 'two', 'three'])
        await input.emit('command.started', { command: step, cwd: '.' });
      return { summary: 'three steps' };
    }
    if (word === 'hold') {
      await work(120_000, input.signal);
      return { summary: 'held turn finished' };
    }
    throw new TurnFailedError('the agent is not available');
  });
}

/**
 * Waits until the runner has started a turn. Tests that archive a held job wait for this first,
 * so that they do not race the worker's start of the turn (that race has its own test in
 * archive-job.test.ts).
 */
export function turnStarted(runner: RecordingRunner, jobId: string, seq = 1): Promise<TurnCall> {
  return waitFor(`turn ${seq} of ${jobId} to start`, async () =>
    runner.calls.find((c) => c.jobId === jobId && c.seq === seq),
  );
}

/** Environment for services running the scripted runner: held turns must not starve others. */
export const SCRIPTED_ENV = { ERRAND_CONCURRENCY: '32' };

// ---------------------------------------------------------------------------------------------
// The common cases.

export interface PathIds {
  projectId: string;
  jobId: string;
  keyId: string;
}

export interface RouteSpec {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** 'project' routes live under /v2/agent/{projectId}; 'admin' routes need an admin key. */
  scope: 'project' | 'admin';
  path(ids: PathIds): string;
  /** A valid JSON body, for routes that read one. */
  body?: (fx: RouteFixture) => unknown;
  /** The route's own body limit, for a route that sets one; else the app's. */
  bodyLimit?: (fx: RouteFixture) => number;
}

function ids(fx: RouteFixture, over: Partial<PathIds> = {}): PathIds {
  return { projectId: fx.project.id, jobId: fx.jobId, keyId: fx.spareKeyId, ...over };
}

function send(
  spec: RouteSpec,
  fx: RouteFixture,
  path: string,
  opts: RequestOptions = {},
): Promise<HttpResult> {
  const body = spec.body?.(fx);
  return fx.svc.request(spec.method, path, {
    ...(body !== undefined ? { body } : {}),
    ...opts,
  });
}

/** A key that works on the route: the project key for project routes, else the admin key. */
function validKey(spec: RouteSpec, fx: RouteFixture): string {
  return spec.scope === 'project' ? fx.projectKey : fx.svc.adminKey;
}

/** 401 and 403 cases, each checked to change nothing. Call inside the file's security block. */
export function authCases(spec: RouteSpec, fixture: () => RouteFixture): void {
  const refused = async (status: 401 | 403, opts: RequestOptions, over: Partial<PathIds> = {}) => {
    const fx = fixture();
    const res = await unchanged(fx.svc, () => send(spec, fx, spec.path(ids(fx, over)), opts));
    assertError(res, status, status === 401 ? 'unauthorized' : 'forbidden');
    return res;
  };

  describe('common auth cases', () => {
    test('401 without an Authorization header', async () => {
      await refused(401, { key: null });
    });

    test('401 with an empty Authorization header or a bare "Bearer"', async () => {
      await refused(401, { key: null, headers: { authorization: '' } });
      await refused(401, { key: null, headers: { authorization: 'Bearer' } });
      await refused(401, { key: null, headers: { authorization: 'Bearer   ' } });
    });

    test('401 for a valid key under another scheme or no scheme', async () => {
      const key = validKey(spec, fixture());
      for (const authorization of [
        `Basic ${Buffer.from(`user:${key}`).toString('base64')}`,
        `Token ${key}`,
        key,
        `Bearer: ${key}`,
        `Bearer ${key} ${key}`,
      ]) {
        await refused(401, { key: null, headers: { authorization } });
      }
    });

    test('401 for a key with the wrong prefix', async () => {
      const key = validKey(spec, fixture());
      for (const bad of [`errant_${key.slice(7)}`, `sk_${key.slice(7)}`, key.slice(7)]) {
        const res = await refused(401, { key: bad });
        assert.match(res.json.error ?? '', /malformed/);
      }
    });

    test('401 for a key with a bad checksum or the wrong length', async () => {
      const key = validKey(spec, fixture());
      const last = key.at(-1) === '0' ? '1' : '0';
      for (const bad of [
        flipOneChar(key),
        `${key.slice(0, -1)}${last}`,
        `${key}0`,
        key.slice(0, -1),
      ]) {
        // Refused for its shape, before any database lookup.
        const res = await refused(401, { key: bad });
        assert.match(res.json.error ?? '', /malformed/);
      }
    });

    test('401 for a well-formed key that was never issued', async () => {
      const res = await refused(401, { key: mintKey() });
      assert.match(res.json.error ?? '', /unknown/);
    });

    test('401 for a revoked key, from the very next request', async () => {
      const fx = fixture();
      const minted = await fx.svc.request('POST', '/v2/admin/keys', {
        body: spec.scope === 'project' ? { projectId: fx.project.id } : { admin: true },
      });
      assert.equal(minted.status, 201);
      const key = minted.json.key ?? '';
      const probe =
        spec.scope === 'project' ? `/v2/agent/${fx.project.id}/jobs` : '/v2/admin/projects';
      assert.equal((await fx.svc.request('GET', probe, { key })).status, 200);
      const revoked = await fx.svc.request('POST', `/v2/admin/keys/${minted.json.id}/revoke`);
      assert.equal(revoked.status, 200);
      const res = await refused(401, { key });
      assert.match(res.json.error ?? '', /revoked/);
    });

    if (spec.method === 'POST' || spec.method === 'PUT')
      test('authentication comes before the body is read', async () => {
        const fx = fixture();
        const res = await unchanged(fx.svc, () =>
          fx.svc.request(spec.method, spec.path(ids(fx)), {
            key: null,
            rawBody: '{"prompt": ',
            headers: { 'content-type': 'application/json' },
          }),
        );
        assertError(res, 401, 'unauthorized');
      });

    if (spec.scope === 'project') {
      test("403 for a project key on another project's route", async () => {
        const fx = fixture();
        await refused(
          403,
          { key: fx.projectKey },
          {
            projectId: fx.otherProject.id,
            jobId: fx.otherJobId,
          },
        );
        await refused(403, { key: fx.otherProjectKey });
      });

      test('403 for a project key on a project that does not exist (nothing revealed)', async () => {
        const fx = fixture();
        await refused(
          403,
          { key: fx.projectKey },
          {
            projectId: randomProjectId(),
          },
        );
      });

      test('404 for an unknown or malformed project id with an admin key', async () => {
        const fx = fixture();
        for (const projectId of [randomProjectId(), 'not-a-project', `${fx.project.id}x`]) {
          const res = await unchanged(fx.svc, () =>
            send(spec, fx, spec.path(ids(fx, { projectId })), { key: fx.svc.adminKey }),
          );
          assertError(res, 404, 'not_found');
        }
      });
    } else {
      test('403 for a project key on an admin route', async () => {
        const fx = fixture();
        await refused(403, { key: fx.projectKey });
      });
    }
  });
}

/** 404 cases for a job id in the path. Call inside the file's errors block. */
export function jobIdCases(spec: RouteSpec, fixture: () => RouteFixture): void {
  const notFound = async (over: Partial<PathIds>, key?: string) => {
    const fx = fixture();
    const res = await unchanged(fx.svc, () =>
      send(spec, fx, spec.path(ids(fx, over)), { key: key ?? fx.svc.adminKey }),
    );
    assertError(res, 404, 'not_found');
  };

  describe('common job id cases', () => {
    test('404 for a well-formed job id that does not exist', async () => {
      await notFound({ jobId: randomJobId() });
    });

    test('404 for a malformed job id', async () => {
      const fx = fixture();
      for (const jobId of [
        'not-a-job',
        `${fx.jobId}x`,
        fx.jobId.slice(0, -1),
        fx.jobId.toUpperCase(),
        fx.project.id,
        '%20',
      ]) {
        await notFound({ jobId });
      }
    });

    test("404 for another project's job, even with the admin key", async () => {
      const fx = fixture();
      await notFound({ projectId: fx.otherProject.id, jobId: fx.jobId });
      await notFound({ projectId: fx.project.id, jobId: fx.otherJobId });
    });

    test("404 for another project's job through a project key's own project", async () => {
      const fx = fixture();
      await notFound({ projectId: fx.project.id, jobId: fx.otherJobId }, fx.projectKey);
    });
  });
}

/** 400, 413 and 415 cases for routes that read a JSON body. Call inside the errors block. */
export function jsonBodyCases(spec: RouteSpec, fixture: () => RouteFixture): void {
  const raw = async (rawBody: string, contentType: string | null) => {
    const fx = fixture();
    return unchanged(fx.svc, () =>
      fx.svc.request(spec.method, spec.path(ids(fx)), {
        key: validKey(spec, fx),
        rawBody,
        headers: contentType ? { 'content-type': contentType } : {},
      }),
    );
  };

  describe('common JSON body cases', () => {
    test('400 invalid_json for a body that is not JSON', async () => {
      for (const body of ['{"prompt": ', '{prompt: "x"}', "{'prompt': 'x'}", 'nope', '{"a":1}}']) {
        assertError(await raw(body, 'application/json'), 400, 'invalid_json');
      }
    });

    test('400 for an empty body sent as JSON', async () => {
      assertError(await raw('', 'application/json'), 400, 'invalid_json');
    });

    test('400 for a JSON body that is not an object', async () => {
      for (const body of ['[]', '[{"prompt":"x"}]', '"a prompt"', '42', 'null', 'true']) {
        const res = await raw(body, 'application/json');
        assert.equal(res.status, 400, `${body} gave ${res.status} ${res.text}`);
        assertError(res, 400, res.json.code ?? '');
        assert.ok(['bad_request', 'invalid_prompt'].includes(res.json.code ?? ''));
      }
    });

    test('415 for text/plain, form and other non-JSON content types', async () => {
      const body = JSON.stringify(spec.body?.(fixture()) ?? {});
      for (const type of [
        'text/plain',
        'text/plain; charset=utf-8',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
      ]) {
        assertError(await raw(body, type), 415, 'unsupported_media_type');
      }
    });

    test('a JSON content type with parameters is accepted', async () => {
      const fx = fixture();
      const res = await fx.svc.request(spec.method, spec.path(ids(fx)), {
        key: validKey(spec, fx),
        rawBody: JSON.stringify(spec.body?.(fx) ?? {}),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      assert.ok(res.status === 200 || res.status === 201, `${res.status} ${res.text}`);
    });

    test('400 for a NUL character (\\u0000) in any string or key of the body', async () => {
      // PostgreSQL cannot store U+0000: without the check, the INSERT fails with a 500.
      const fx = fixture();
      const valid = spec.body?.(fx);
      assert.ok(typeof valid === 'object' && valid !== null, 'the route spec needs a body');
      const variants: [body: Record<string, unknown>, field: string][] = [
        [{ ...valid, 'odd\u0000key': 'x' }, 'odd\\u0000key'],
      ];
      for (const [field, value] of Object.entries(valid)) {
        if (typeof value === 'string')
          variants.push([{ ...valid, [field]: `${value}\u0000!` }, field]);
      }
      assert.ok(variants.length > 1, 'the valid body has no string field to spoil');
      for (const [body, field] of variants) {
        const res = await unchanged(fx.svc, () =>
          fx.svc.request(spec.method, spec.path(ids(fx)), { key: validKey(spec, fx), body }),
        );
        assertError(res, 400, field === 'prompt' ? 'invalid_prompt' : 'bad_request');
        assert.equal(
          res.json.error,
          `"${field}" contains a NUL character (\\u0000), which cannot be stored`,
        );
      }
    });

    test('413 for a body one byte over the limit; exactly the limit is read', async () => {
      const fx = fixture();
      const appLimit = fx.svc.service.app?.initialConfig.bodyLimit ?? 0;
      // Room for the largest prompt, but bounded: these services allow at most 100k characters.
      assert.ok(appLimit >= 1024 * 1024 && appLimit <= 4 * 1024 * 1024, `body limit ${appLimit}`);
      // A route with images (create, message) has room for them too (docs/images.md).
      const limit = spec.bodyLimit?.(fx) ?? appLimit;
      // {"prompt":"xxx…"} padded to an exact size.
      const sized = (n: number) => `{"prompt":"${'x'.repeat(n - 13)}"}`;
      assert.equal(sized(limit).length, limit);
      assertError(await raw(sized(limit + 1), 'application/json'), 413, 'payload_too_large');
      const atLimit = await raw(sized(limit), 'application/json');
      assert.equal(atLimit.status, 400, `a body at the limit: ${atLimit.status} ${atLimit.text}`);
    });
  });
}

/** Prompt validation for create and message. `maxChars` is the service's ERRAND_MAX_PROMPT_CHARS. */
export function promptCases(spec: RouteSpec, fixture: () => RouteFixture, maxChars: number): void {
  const invalid = async (body: unknown) => {
    const fx = fixture();
    const res = await unchanged(fx.svc, () =>
      fx.svc.request(spec.method, spec.path(ids(fx)), { key: validKey(spec, fx), body }),
    );
    assertError(res, 400, 'invalid_prompt');
    return res;
  };

  describe('common prompt cases', () => {
    test('400 invalid_prompt when the prompt is missing', async () => {
      const res = await invalid({});
      assert.match(res.json.error ?? '', /"prompt" is required/);
      await invalid({ promt: 'typo' });
    });

    test('400 invalid_prompt for an empty or whitespace-only prompt', async () => {
      for (const prompt of ['', ' ', '   ', '\n', '\t \r\n', '\u00a0', '\u2003\u3000']) {
        await invalid({ prompt });
      }
    });

    test('400 invalid_prompt for a prompt that is not a string', async () => {
      for (const prompt of [42, 0, null, true, ['do it'], { text: 'do it' }]) {
        const res = await invalid({ prompt });
        assert.match(res.json.error ?? '', /string/);
      }
    });

    test('400 invalid_prompt for a body that is an array or a string', async () => {
      await invalid([{ prompt: 'do it' }]);
      await invalid('do it');
    });

    test(`400 invalid_prompt for a prompt over ${maxChars} characters`, async () => {
      const res = await invalid({ prompt: 'x'.repeat(maxChars + 1) });
      assert.match(res.json.error ?? '', new RegExp(`maximum is ${maxChars}`));
      await invalid({ prompt: 'y'.repeat(maxChars * 10) });
    });

    test(`a prompt of exactly ${maxChars} characters is accepted and stored whole`, async () => {
      const fx = fixture();
      const prompt = `${'z'.repeat(maxChars - 1)}!`;
      const res = await fx.svc.request(spec.method, spec.path(ids(fx)), {
        key: validKey(spec, fx),
        body: { prompt },
      });
      assert.ok(res.status === 200 || res.status === 201, `${res.status} ${res.text}`);
      const stored = await fx.svc.service.ctx.db
        .selectFrom('turns')
        .select('prompt')
        .where('job_id', '=', res.json.id ?? '')
        .where('seq', '=', res.json.turns ?? 0)
        .executeTakeFirstOrThrow();
      assert.equal(stored.prompt, prompt);
    });
  });
}
