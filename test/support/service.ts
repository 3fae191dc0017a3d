// Starts a real Errand service in the test process (API and/or workers on a real database)
// and gives tests an HTTP client for it.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import type { EventRecord } from '../../src/events/log.ts';
import { loadTurnInputs, recordReviewDiff } from '../../src/jobs/lifecycle.ts';
import type { TurnOutput, TurnRunner } from '../../src/jobs/runner.ts';
import { jobBudgetLeft, monthBudgetLeft } from '../../src/jobs/spend.ts';
import type { Logger } from '../../src/log.ts';
import type { QueueClock } from '../../src/queue/queue.ts';
import type { JobRecord } from '../../src/records/job.ts';
import type { KeyRecord } from '../../src/records/key.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { type RunningService, startService } from '../../src/service.ts';
import { TurnPipeline } from '../../src/turns/pipeline.ts';
import { createEmbeddedDataDir, createTestDatabase, type TestDatabase } from './databases.ts';
import { onQueueClock } from './queue-clock.ts';

/** Every field any Errand response may carry, so tests can read them without casts. */
export type ApiBody = Partial<
  JobRecord &
    ProjectRecord &
    KeyRecord & {
      key: string;
      error: string;
      code: string;
      requestId: string;
      jobs: JobRecord[];
      nextCursor: string | null;
      events: EventRecord[];
      nextAfter: number;
      keys: KeyRecord[];
      projects: ProjectRecord[];
    }
>;

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  json: ApiBody;
}

export interface RequestOptions {
  key?: string | null;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
}

export async function http(
  base: string,
  method: string,
  path: string,
  opts: RequestOptions = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  const text = await response.text();
  let json: ApiBody = {};
  try {
    json = text ? (JSON.parse(text) as ApiBody) : {};
  } catch {
    json = {};
  }
  return { status: response.status, headers: response.headers, text, json };
}

export interface TestService {
  url: string;
  service: RunningService;
  database: TestDatabase;
  adminKey: string;
  env: Record<string, string>;
  request(method: string, path: string, opts?: RequestOptions): Promise<HttpResult>;
  createProject(
    fields?: Partial<{
      name: string;
      repository: string;
      ref: string;
      model: string;
      jobBudgetUsd: number;
      monthlyBudgetUsd: number;
    }>,
  ): Promise<ProjectRecord>;
  createProjectKey(projectId: string): Promise<{ id: string; key: string }>;
  /** Stops the service; the database stays for a restart. */
  stop(): Promise<void>;
  /** Stops the service and drops its database. */
  close(): Promise<void>;
}

export interface TestServiceOptions {
  /** Runs the service in the embedded mode, on a PostgreSQL of its own (default: the test server). */
  embedded?: boolean;
  env?: Record<string, string>;
  runner?: TurnRunner;
  worker?: boolean;
  /** Where the service logs (default: the level of ERRAND_TEST_LOG_LEVEL, to stderr). */
  log?: Logger;
  /** Reuse a database (restart tests). */
  database?: TestDatabase;
  adminKey?: string;
  /**
   * The queue's clock (a TestClock of pg-boss's, to move its time by hand; test/support/queue-clock.ts);
   * the system's by default.
   */
  clock?: QueueClock;
}

export function testEnv(
  database: TestDatabase,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    ERRAND_DATA_DIR: database.dataDir,
    ERRAND_PORT: '0',
    ERRAND_LOG_LEVEL: process.env.ERRAND_TEST_LOG_LEVEL ?? 'silent',
    ERRAND_TURN_RETRY_DELAY_SECONDS: '0',
    // Test files share one server three at a time, each with services of its own.
    ERRAND_DB_POOL_SIZE: '4',
    // The default model must resolve for jobs to be accepted; no test reaches this vendor.
    ANTHROPIC_API_KEY: 'sk-ant-test-0000000000000000',
    ...(database.databaseUrl
      ? { DATABASE_URL: database.databaseUrl, ERRAND_ALLOW_LOCAL_REPOS: 'true' }
      : {}),
    ...extra,
  };
}

export async function startTestService(opts: TestServiceOptions = {}): Promise<TestService> {
  const database =
    opts.database ?? (await (opts.embedded ? createEmbeddedDataDir() : createTestDatabase()));
  const env = testEnv(database, opts.env);
  if (opts.clock) {
    if (!env.DATABASE_URL) throw new Error('a test service on a queue clock needs a database URL');
    env.DATABASE_URL = onQueueClock(env.DATABASE_URL);
  }
  let adminKey = opts.adminKey;
  const service = await startService(loadConfig(env), {
    api: true,
    worker: opts.worker ?? true,
    ...(opts.runner ? { runner: opts.runner } : {}),
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
    onAdminKey: (key) => {
      adminKey = key;
    },
  });
  if (!adminKey || !service.url)
    throw new Error('the test service did not start with an admin key and a URL');
  const url = service.url;
  const key = adminKey;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await service.stop();
  };
  const request = (method: string, path: string, o: RequestOptions = {}) =>
    http(url, method, path, { key, ...o });
  return {
    url,
    service,
    database,
    adminKey: key,
    env,
    request,
    async createProject(fields = {}) {
      const res = await request('POST', '/v2/admin/projects', {
        body: { name: 'test project', repository: database.dataDir, ...fields },
      });
      if (res.status !== 201) throw new Error(`project create failed: ${res.status} ${res.text}`);
      return res.json as ProjectRecord;
    },
    async createProjectKey(projectId) {
      const res = await request('POST', '/v2/admin/keys', { body: { projectId } });
      if (res.status !== 201) throw new Error(`key create failed: ${res.status} ${res.text}`);
      return { id: res.json.id as string, key: res.json.key as string };
    },
    stop,
    async close() {
      await stop();
      await database.drop();
    },
  };
}

/** Polls `fn` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Delivers a finished turn to the turn pipeline once more, as a worker on another machine (no local
 * clone) would after a crash between the push and recording the turn. Returns the runner's
 * output and the events it emitted.
 */
export async function redeliverTurn(
  svc: TestService,
  jobId: string,
  seq: number,
): Promise<{ output: TurnOutput; events: string[] }> {
  const { ctx } = svc.service;
  await rm(path.join(svc.database.dataDir, 'workspaces', 'jobs', jobId), {
    recursive: true,
    force: true,
  });
  const job = await ctx.db
    .selectFrom('jobs')
    .selectAll()
    .where('id', '=', jobId)
    .executeTakeFirstOrThrow();
  const turn = await ctx.db
    .selectFrom('turns')
    .selectAll()
    .where('job_id', '=', jobId)
    .where('seq', '=', seq)
    .executeTakeFirstOrThrow();
  const events: string[] = [];
  const runner = new TurnPipeline({
    // As the service gives its own pipeline: the address its API listens on.
    config: { ...ctx.config, publicUrl: ctx.config.publicUrl ?? svc.url },
    log: ctx.log,
    metrics: ctx.metrics,
    models: ctx.models,
    forges: ctx.forges,
    jobBudgetLeft: (job) => jobBudgetLeft(ctx, job),
    monthBudgetLeft: (job) => monthBudgetLeft(ctx, job),
    environments: ctx.environments,
  });
  const output = await runner.run({
    job,
    turn,
    ...(await loadTurnInputs(ctx, job, seq)),
    signal: new AbortController().signal,
    emit: async (type) => {
      events.push(type);
    },
    saveReviewDiff: (diff, truncated) => recordReviewDiff(ctx, jobId, diff, truncated),
  });
  return { output, events };
}
