// `errand export` and `errand import` as a user runs them: real `errand` processes, an embedded
// `serve` exported while it runs, imported into a fresh PostgreSQL database, and a service on
// that database that finds the same projects, keys, jobs and events and goes on with the work.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { loadMigrations } from '../../src/db/migrate.ts';
import type { AttemptResult } from '../../src/db/schema.ts';
import type { WebhookPayload } from '../../src/features/webhooks/outbox.ts';
import { turnSecrets } from '../../src/projects/secrets.ts';
import type { KeyRecord } from '../../src/records/key.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { open } from '../../src/secrets/box.ts';
import {
  createEmbeddedDataDir,
  createTestDatabase,
  type TestDatabase,
} from '../support/databases.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import {
  captureOutput,
  killStrays,
  type Run,
  runErrand,
  type ServeProcess,
  startServe,
} from '../support/process.ts';
import { type HttpResult, http, startTestService, waitFor } from '../support/service.ts';
import { Receiver } from '../webhooks/receiver.ts';

const LLM_KEY = 'sk-test-transfer-5e1f0c3b';
/** A project secret's value: it crosses sealed, and opens on the other side with the same key. */
const PROJECT_SECRET = 'npm-transfer-secret-7c1b95e0a4';
const TABLES = [
  'projects',
  'project_secrets',
  'api_keys',
  'webhooks',
  'schedules',
  'jobs',
  'turns',
  'events',
  'webhook_deliveries',
  'webhook_attempts',
  'audit_log',
];

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;

async function errand(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return captureOutput(runErrand(args, env)).done;
}

/** `errand …` with `input` on its stdin (runErrand gives it none). */
async function errandReading(
  args: string[],
  env: Record<string, string>,
  input: Buffer,
): Promise<Run> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { ...process.env, DATABASE_URL: '', ERRAND_LOG_LEVEL: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const done = captureOutput(child).done;
  child.stdin?.end(input);
  return done;
}

function ok(run: Run, what: string): Run {
  assert.equal(run.code, 0, `${what} exited ${run.code}: ${run.stderr}`);
  return run;
}

/** A refusal: exit 1, the reason on stderr, no stack trace, nothing on stdout. */
function refused(run: Run, message: RegExp, what: string): void {
  assert.equal(run.code, 1, `${what} exited ${run.code}: ${run.stderr}`);
  assert.match(run.stderr, message, what);
  assert.doesNotMatch(run.stderr, /\n\s+at /, `${what} printed a stack trace`);
  assert.equal(run.stdout, '', `${what} wrote to stdout`);
}

function expectStatus(res: HttpResult, status: number, what: string): HttpResult {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text}`);
  return res;
}

async function digest(file: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
}

/** The file's lines, parsed. */
async function fileLines(file: string): Promise<Record<string, unknown>[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** What a database holds of Errand's: each table's rows (as text), or null when it has none. */
async function contents(url: string): Promise<Record<string, string[]> | null> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const present = await client.query<{ present: boolean }>(
      "SELECT to_regclass('errand_migrations') IS NOT NULL AS present",
    );
    if (!present.rows[0]?.present) return null;
    const out: Record<string, string[]> = {};
    for (const table of [...TABLES, 'errand_migrations']) {
      const rows = await client.query<{ row: string }>(
        `SELECT to_jsonb(t)::text AS row FROM ${table} t ORDER BY 1`,
      );
      out[table] = rows.rows.map((r) => r.row);
    }
    return out;
  } finally {
    await client.end();
  }
}

describe('errand export and import', () => {
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let receiver: Receiver;
  let source: TestDatabase;
  let llmEnv: Record<string, string>;
  const dbs: TestDatabase[] = [];

  // What the source held when it was exported.
  let file: string;
  let secretKey: string;
  let adminKey: string;
  let projectKey: string;
  let projectId: string;
  let jobIds: string[];
  let hookSecret: string;
  let newestMigration: number;
  /** The order the first job's two queued turns started in after the import. */
  let startedOrder: number[] = [];
  let before_: {
    projects: unknown;
    secrets: unknown;
    keys: Omit<KeyRecord, 'lastUsedAt'>[];
    webhooks: unknown;
    schedules: { schedules: { id: string; paused: boolean }[] };
    roles: unknown;
    jobs: unknown[];
    events: unknown[];
  };

  const fresh = async (): Promise<TestDatabase> => {
    const db = await createTestDatabase();
    dbs.push(db);
    return db;
  };
  /** Exports `from` to the file `name` and imports that into a fresh database. */
  const move = async (from: TestDatabase, name: string) => {
    const out = path.join(tmp, name);
    const exported = ok(
      await errand(['export', out], { DATABASE_URL: from.databaseUrl ?? '' }),
      `export to ${name}`,
    );
    const to = await fresh();
    ok(
      await errand(['import', out], {
        DATABASE_URL: to.databaseUrl ?? '',
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
      }),
      'import',
    );
    return { summary: exported.stderr, to };
  };

  before(async () => {
    tmp = await makeTempDir('transfer');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: LLM_KEY, models: ['gpt-test'] });
    receiver = await Receiver.start();
    llmEnv = {
      OPENAI_API_KEY: LLM_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
      // Loopback receivers: the address rule has its own tests.
      ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    newestMigration = Math.max(...(await loadMigrations()).map((m) => m.id));
    source = await createEmbeddedDataDir();
    file = path.join(tmp, 'errand.jsonl');

    const serve: ServeProcess = await startServe(source.dataDir, ['--no-worker'], llmEnv);
    try {
      adminKey = serve.adminKey;
      const call = (method: string, url: string, body?: unknown, key = adminKey) =>
        http(serve.url, method, url, { key, ...(body === undefined ? {} : { body }) });
      const project = expectStatus(
        await call('POST', '/v2/admin/projects', { name: 'moving', repository: origin.url }),
        201,
        'project create',
      );
      projectId = project.json.id ?? '';
      // A project with a sealed forge token: it must come across still sealed.
      expectStatus(
        await call('POST', '/v2/admin/projects', {
          name: 'forge',
          repository: 'https://github.com/acme/app.git',
          forge: 'github',
          forgeToken: 'ghp_transfertesttoken000000000000000000',
        }),
        201,
        'forge project create',
      );
      projectKey =
        expectStatus(
          await call('POST', '/v2/admin/keys', { projectId, name: 'ci' }),
          201,
          'key create',
        ).json.key ?? '';
      const hook = expectStatus(
        await call('POST', `/v2/admin/projects/${projectId}/webhooks`, {
          url: `${receiver.url}/hook`,
          events: ['job.created', 'job.completed'],
        }),
        201,
        'webhook create',
      );
      hookSecret = (JSON.parse(hook.text) as { secret: string }).secret;
      // Two schedules, one paused: they come across as they were, the active one fired again.
      for (const body of [
        { cron: '0 0 1 1 *', prompt: 'a new year chore', name: 'yearly' },
        { cron: '0 6 * * 1', prompt: 'a weekly chore', paused: true },
      ])
        expectStatus(
          await call('POST', `/v2/admin/projects/${projectId}/schedules`, body),
          201,
          'schedule create',
        );
      expectStatus(
        await call('PUT', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`, {
          value: PROJECT_SECRET,
          exposure: 'commands',
        }),
        201,
        'secret set',
      );
      // A role given to a group of the identity provider's: who may do what comes across.
      expectStatus(
        await call('PUT', `/v2/admin/projects/${projectId}/roles/group/platform`, {
          role: 'maintainer',
        }),
        200,
        'role given',
      );
      jobIds = [];
      for (const prompt of ['first job', 'second job']) {
        const job = expectStatus(
          await call('POST', `/v2/agent/${projectId}/job`, { prompt }, projectKey),
          201,
          'job create',
        );
        jobIds.push(job.json.id ?? '');
      }
      expectStatus(
        await call(
          'POST',
          `/v2/agent/${projectId}/job/${jobIds[0]}/message`,
          { prompt: 'a follow-up' },
          projectKey,
        ),
        200,
        'follow-up',
      );
      const jobPath = (id: string) => `/v2/agent/${projectId}/job/${id}`;
      before_ = {
        projects: (await call('GET', '/v2/admin/projects')).json.projects,
        secrets: JSON.parse((await call('GET', `/v2/admin/projects/${projectId}/secrets`)).text),
        keys: ((await call('GET', '/v2/admin/keys')).json.keys ?? []).map(
          ({ lastUsedAt, ...k }) => k,
        ),
        webhooks: JSON.parse((await call('GET', `/v2/admin/projects/${projectId}/webhooks`)).text),
        schedules: JSON.parse(
          (await call('GET', `/v2/admin/projects/${projectId}/schedules`)).text,
        ) as { schedules: { id: string; paused: boolean }[] },
        roles: JSON.parse((await call('GET', `/v2/admin/projects/${projectId}/roles`)).text),
        jobs: await Promise.all(jobIds.map(async (id) => (await call('GET', jobPath(id))).json)),
        events: await Promise.all(
          jobIds.map(async (id) => (await call('GET', `${jobPath(id)}/events`)).json),
        ),
      };

      // The export runs beside serve, while serve takes writes: projects and their keys are
      // made as it reads. Its snapshot holds no key without its project (the import's foreign
      // keys would refuse it).
      let writing = true;
      const writes = (async () => {
        for (let i = 0; writing && i < 50; i += 1) {
          const p = await call('POST', '/v2/admin/projects', {
            name: `busy ${i}`,
            repository: origin.url,
          });
          await call('POST', '/v2/admin/keys', { projectId: p.json.id });
        }
      })();
      const exported = await errand(['export', file, '--data-dir', source.dataDir]);
      writing = false;
      await writes;
      ok(exported, 'export beside serve');
      assert.match(
        exported.stderr,
        new RegExp(
          `^exported \\d+ projects, 0 users, 1 project role, 0 personal API tokens, 1 project secret, \\d+ API keys, 1 webhook endpoint, 2 schedules, 0 schedule firings, 0 eval runs, 0 eval results, 2 jobs, 3 turns, 0 images, \\d+ events, 0 forge answers, 0 pull request watches, 0 forge refusals, 0 forge events, 2 webhook deliveries, 0 webhook delivery attempts, \\d+ audit log rows to ${file}\\n$`,
        ),
      );
      assert.equal(exported.stdout, '');
      secretKey = (await readFile(path.join(source.dataDir, 'secret.key'), 'utf8')).trim();
    } finally {
      assert.equal(await serve.stop(), 0);
    }
  });

  afterEach(() => killStrays());
  after(async () => {
    killStrays();
    await llm?.close();
    await receiver?.close();
    for (const db of dbs) await db.drop();
    await source?.drop();
    await removeDir(tmp);
  });

  test('the file: 0600, a header, the rows parents first, an end line with the counts', async () => {
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.deepEqual(
      (await readdir(tmp)).filter((f) => f.endsWith('.partial')),
      [],
    );
    const lines = await fileLines(file);
    const [header, ...rest] = lines;
    const end = rest.pop();
    assert.equal(header?.format, 'errand-export');
    assert.equal(header?.version, 1);
    assert.equal(header?.migration, newestMigration);
    assert.match(String(header?.secretKeyFingerprint), /^[0-9a-f]{16}$/);
    assert.ok(!JSON.stringify(lines).includes(secretKey), 'the secret key is in the file');
    assert.ok(!JSON.stringify(lines).includes(adminKey), 'the admin key is in the file');
    assert.ok(!JSON.stringify(lines).includes(projectKey), 'a project key is in the file');
    assert.ok(!JSON.stringify(lines).includes(hookSecret.slice(6)), 'a webhook secret is in clear');
    assert.ok(!JSON.stringify(lines).includes(PROJECT_SECRET), 'a project secret is in clear');
    const sealed = rest.find((l) => l.table === 'project_secrets')?.row as
      | { sealed_value: string; name: string; exposure: string }
      | undefined;
    assert.equal(sealed?.name, 'NPM_TOKEN');
    assert.equal(sealed?.exposure, 'commands');
    assert.equal(open(secretKey, sealed?.sealed_value ?? ''), PROJECT_SECRET);
    const tables = rest.map((l) => String(l.table));
    assert.deepEqual(
      [...new Set(tables)],
      [
        'projects',
        'project_roles',
        'project_secrets',
        'api_keys',
        'webhooks',
        'schedules',
        'jobs',
        'turns',
        'events',
        'webhook_deliveries',
        // The projects, keys, secrets and webhooks made through the API, each a row.
        'audit_log',
      ],
    );
    const counts: Record<string, number> = {};
    for (const t of tables) counts[t] = (counts[t] ?? 0) + 1;
    assert.deepEqual(end, {
      end: true,
      rows: {
        ...counts,
        users: 0,
        user_tokens: 0,
        forge_replies: 0,
        pr_watches: 0,
        forge_refusals: 0,
        forge_events: 0,
        webhook_attempts: 0,
        schedule_firings: 0,
        eval_runs: 0,
        eval_results: 0,
        attachments: 0,
      },
    });
    // The busy projects made during the export: every key's project is in the file.
    const projects = new Set(
      rest.filter((l) => l.table === 'projects').map((l) => (l.row as { id: string }).id),
    );
    for (const l of rest.filter((l) => l.table === 'api_keys')) {
      const owner = (l.row as { project_id: string | null }).project_id;
      assert.ok(owner === null || projects.has(owner), `key of a project not in the file`);
    }
  });

  test('imported into PostgreSQL: the same keys, jobs, events and webhooks; the work goes on', async () => {
    const target = await fresh();
    assert.ok(target.databaseUrl);
    const imported = ok(
      await errand(['import', file], {
        DATABASE_URL: target.databaseUrl,
        ERRAND_SECRET_KEY: secretKey,
        // The projects are on local repositories (file://), as the source's were.
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
      }),
      'import',
    );
    assert.match(
      imported.stdout,
      /^imported \d+ projects, 0 users, 1 project role, 0 personal API tokens, 1 project secret, \d+ API keys, 1 webhook endpoint, 2 schedules, 0 schedule firings, 0 eval runs, 0 eval results, 2 jobs, 3 turns, 0 images, \d+ events, 0 forge answers, 0 pull request watches, 0 forge refusals, 0 forge events, 2 webhook deliveries, 0 webhook delivery attempts, \d+ audit log rows; queued again: 3 turns and 2 webhook deliveries\n$/,
    );
    assert.equal(imported.stderr, '');

    const env = { ...llmEnv, ERRAND_SECRET_KEY: secretKey };
    const api = await startTestService({ database: target, adminKey, worker: false, env });
    try {
      const jobPath = (id: string) => `/v2/agent/${projectId}/job/${id}`;
      const projects = (await api.request('GET', '/v2/admin/projects')).json.projects;
      assert.deepEqual(
        projects?.filter((p) => !p.name.startsWith('busy ')),
        before_.projects,
      );
      const keys = (await api.request('GET', '/v2/admin/keys')).json.keys?.map(
        ({ lastUsedAt, ...k }) => k,
      );
      assert.deepEqual(
        keys?.filter((k) => before_.keys.some((b) => b.id === k.id)),
        before_.keys,
      );
      assert.deepEqual(
        JSON.parse((await api.request('GET', `/v2/admin/projects/${projectId}/webhooks`)).text),
        before_.webhooks,
      );
      assert.deepEqual(
        JSON.parse((await api.request('GET', `/v2/admin/projects/${projectId}/roles`)).text),
        before_.roles,
      );
      assert.deepEqual(
        JSON.parse((await api.request('GET', `/v2/admin/projects/${projectId}/schedules`)).text),
        before_.schedules,
      );
      // The audit log came across, the import's own row after it; the next rows follow on.
      const rowsInFile = (await fileLines(file)).filter((l) => l.table === 'audit_log');
      // Every page of it: the projects and keys made while the export ran are rows too.
      const log: { id: string; action: string; actor: unknown }[] = [];
      for (let cursor: string | null = ''; cursor !== null; ) {
        const page = (
          await api.request(
            'GET',
            `/v2/admin/audit?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          )
        ).json as unknown as {
          entries: { id: string; action: string; actor: unknown }[];
          nextCursor: string | null;
        };
        log.push(...page.entries);
        cursor = page.nextCursor;
      }
      assert.equal(log.length, rowsInFile.length + 1);
      assert.deepEqual(
        { action: log[0]?.action, actor: log[0]?.actor },
        { action: 'import', actor: null },
      );
      assert.ok(log.some((e) => e.action === 'secret.set'));
      assert.ok(log.some((e) => e.action === 'role.grant'));
      // The project's secret: listed as before, and a turn here opens it with the source's key.
      assert.deepEqual(
        JSON.parse((await api.request('GET', `/v2/admin/projects/${projectId}/secrets`)).text),
        before_.secrets,
      );
      assert.deepEqual(await turnSecrets(api.service.ctx, projectId), [
        { name: 'NPM_TOKEN', value: PROJECT_SECRET, exposure: 'commands' },
      ]);
      for (const [i, id] of jobIds.entries()) {
        // Both keys work as before: the project key and the admin key of the old data directory.
        const byProject = await api.request('GET', jobPath(id), { key: projectKey });
        expectStatus(byProject, 200, 'GET with the project key');
        assert.deepEqual(byProject.json, before_.jobs[i]);
        const byAdmin = await api.request('GET', jobPath(id));
        assert.deepEqual(byAdmin.json, before_.jobs[i]);
        const events = await api.request('GET', `${jobPath(id)}/events`, { key: projectKey });
        assert.deepEqual(events.json, before_.events[i]);
      }
      // A new job's events continue the sequence past the imported ones.
      const created = expectStatus(
        await api.request('POST', `/v2/agent/${projectId}/job`, {
          key: projectKey,
          body: { prompt: 'a job made after the move' },
        }),
        201,
        'job create after import',
      );
      jobIds.push(created.json.id ?? '');
      const imported = (await fileLines(file))
        .filter((l) => l.table === 'events')
        .map((l) => Number((l.row as { seq: number }).seq));
      const fresh = (await api.request('GET', `${jobPath(created.json.id ?? '')}/events`)).json
        .events;
      assert.ok(fresh?.length);
      for (const e of fresh) assert.ok(e.seq > Math.max(...imported), `event seq ${e.seq} reused`);
    } finally {
      await api.stop();
    }

    // With a worker, the turns that were queued at the export run, and the webhook deliveries
    // that were pending are sent, signed with the endpoint's secret (its sealed copy opened with
    // the source's key).
    llm.script(reply('Nothing needs to change.'), reply('Nothing to do.'), reply('Done.'));
    llm.script(reply('Nothing at all.'));
    const worker = await startTestService({ database: target, adminKey, worker: true, env });
    try {
      // The worker gave pg-boss's scheduler the active schedule, and only it.
      const { rows: fired } = await sql<{ key: string }>`
        SELECT key FROM pgboss.schedule WHERE name = 'schedules'`.execute(worker.service.ctx.db);
      assert.deepEqual(
        fired.map((r) => r.key),
        before_.schedules.schedules.filter((s) => !s.paused).map((s) => s.id),
      );
      for (const id of jobIds) {
        await waitFor(
          `job ${id} to complete`,
          async () => {
            const res = await worker.request('GET', `/v2/agent/${projectId}/job/${id}`);
            const events = (await worker.request('GET', `/v2/agent/${projectId}/job/${id}/events`))
              .json.events;
            const settled =
              events?.filter((e) => e.type === 'turn.finished').length ===
              (id === jobIds[0] ? 2 : 1);
            return res.json.status === 'completed' && settled ? res.json : undefined;
          },
          60_000,
        );
      }
      // job.created of the three jobs (two of them pending in the file), job.completed of each.
      const verifier = new Webhook(hookSecret);
      const payloads = () =>
        receiver.requests.map((r) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(r.headers)) if (typeof v === 'string') headers[k] = v;
          return verifier.verify(r.body, headers) as WebhookPayload;
        });
      await waitFor('the webhook deliveries', async () => {
        const seen = payloads().map((p) => `${p.type} ${p.data.jobId}`);
        return jobIds.every(
          (id) => seen.includes(`job.created ${id}`) && seen.includes(`job.completed ${id}`),
        )
          ? true
          : undefined;
      });
      const requests = receiver.requests;
      const first = await worker.request('GET', `/v2/agent/${projectId}/job/${jobIds[0]}/events`);
      startedOrder = (first.json.events ?? [])
        .filter((e) => e.type === 'turn.started')
        .map((e) => e.turn ?? 0);
      const pending = (await fileLines(file))
        .filter((l) => l.table === 'webhook_deliveries')
        .map((l) => (l.row as { id: string }).id);
      for (const id of pending)
        assert.ok(
          requests.some((r) => r.id === id),
          `the pending delivery ${id} was not sent`,
        );
    } finally {
      await worker.stop();
    }
    assert.equal(llm.requests.length, 4, 'each turn ran once');
    llm.assertDone();
    llm.reset();
  });

  // The import queues a job's open turns in one transaction, where their entries share their
  // creation time: pg-boss then takes them in the order of their ids (TurnQueue.enqueueAll).
  test("a job's turns queued at the export run in their order after the import", () => {
    assert.deepEqual(startedOrder, [1, 2]);
  });

  test('import refuses, and changes nothing: a non-empty database, a newer file, a cut file, another key', async () => {
    const original = await digest(file);
    const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
    const variant = async (name: string, edit: (ls: string[]) => string[]) => {
      const out = path.join(tmp, name);
      await writeFile(out, `${edit([...lines]).join('\n')}\n`, { mode: 0o600 });
      return out;
    };
    const withHeader = (change: Record<string, unknown>) => (ls: string[]) => [
      JSON.stringify({ ...JSON.parse(ls[0] ?? '{}'), ...change }),
      ...ls.slice(1),
    ];

    const empty = await fresh();
    const url = empty.databaseUrl ?? '';
    const refusedHere = async (
      args: string[],
      env: Record<string, string>,
      message: RegExp,
      what: string,
    ) => {
      const target = args[1] ?? '';
      const before = await digest(target);
      refused(await errand(args, { DATABASE_URL: url, ...env }), message, what);
      assert.equal(await digest(target), before, `${what}: the file changed`);
      assert.equal(await contents(url), null, `${what}: the database was written`);
    };
    const key = { ERRAND_SECRET_KEY: secretKey, ERRAND_ALLOW_LOCAL_REPOS: 'true' };

    await refusedHere(
      ['import', await variant('v2.jsonl', withHeader({ version: 2 }))],
      key,
      /was written by Errand \S+ in export format 2, and this Errand \(\S+\) reads format 1 and older/,
      'a newer format',
    );
    await refusedHere(
      ['import', await variant('m99.jsonl', withHeader({ migration: 99 }))],
      key,
      new RegExp(
        `exported by Errand \\S+ from a database at migration 99, newer than this Errand \\(\\S+\\) knows \\(${newestMigration}\\)`,
      ),
      'a newer migration',
    );
    await refusedHere(
      ['import', await variant('cut.jsonl', (ls) => ls.slice(0, -1))],
      key,
      /cut\.jsonl is incomplete: it ends before its end line/,
      'a file without its end line',
    );
    await refusedHere(
      ['import', await variant('short.jsonl', (ls) => [...ls.slice(0, -2), ...ls.slice(-1)])],
      key,
      /short\.jsonl is damaged: its end line counts \d+ audit log rows, the file holds \d+/,
      'a file missing a row',
    );
    await refusedHere(
      ['import', await variant('other.jsonl', () => ['{"hello":"world"}'])],
      key,
      /other\.jsonl is not an Errand export/,
      'not an export',
    );
    await refusedHere(
      ['import', file],
      { ERRAND_SECRET_KEY: 'not-the-key-of-the-exporting-side' },
      /holds sealed secrets .* that the secret key here \(fingerprint [0-9a-f]{16}\) cannot open; .*set ERRAND_SECRET_KEY to the secret key of the Errand that exported it/,
      'another secret key',
    );
    await refusedHere(
      ['import', file],
      {},
      /holds sealed secrets .* no secret key is set here: set ERRAND_SECRET_KEY/,
      'no secret key',
    );
    // Project secrets alone are sealed values too: a file whose only ones they are needs the key.
    const onlySecrets = await variant('only-secrets.jsonl', (ls) => {
      const rows = ls.slice(1, -1).filter((l) => {
        const { table, row } = JSON.parse(l) as { table: string; row: Record<string, unknown> };
        return (table === 'projects' && row.forge_secret === null) || table === 'project_secrets';
      });
      const counts: Record<string, number> = {};
      for (const l of rows) {
        const { table } = JSON.parse(l) as { table: string };
        counts[table] = (counts[table] ?? 0) + 1;
      }
      assert.equal(counts.project_secrets, 1);
      return [ls[0] ?? '', ...rows, JSON.stringify({ end: true, rows: counts })];
    });
    await refusedHere(
      ['import', onlySecrets],
      { ERRAND_ALLOW_LOCAL_REPOS: 'true' },
      /holds sealed secrets \(forge credentials, webhook signing secrets or project secrets\), which open only with the key they were sealed with, and no secret key is set here/,
      'project secrets without a key',
    );

    // From stdin (`gunzip -c … | errand import -`): a cut one is refused, a whole one loads.
    const cut = await errandReading(
      ['import', '-'],
      { DATABASE_URL: url, ...key },
      Buffer.from(`${lines.slice(0, -1).join('\n')}\n`),
    );
    refused(cut, /the export on stdin is incomplete/, 'a cut file on stdin');
    assert.equal(await contents(url), null, 'a cut file on stdin: the database was written');
    // A database that holds anything is refused, and left exactly as it was.
    const whole = await errandReading(
      ['import', '-'],
      { DATABASE_URL: url, ...key },
      await readFile(file),
    );
    ok(whole, 'import from stdin');
    assert.match(whole.stdout, /^imported /);
    const held = await contents(url);
    const again = await errand(['import', file], { DATABASE_URL: url, ...key });
    refused(
      again,
      /the database already holds \d+ projects, 1 project role, 1 project secret, \d+ API keys, 1 webhook endpoint, 2 schedules, 2 jobs, 3 turns, \d+ events, 2 webhook deliveries and \d+ audit log rows: import needs an empty database/,
      'a non-empty database',
    );
    assert.deepEqual(await contents(url), held);
    assert.equal(await digest(file), original);
  });

  test('into a PostgreSQL server that refuses local repositories: the projects named, nothing written, unless told to go on', async () => {
    const target = await fresh();
    const url = target.databaseUrl ?? '';
    const before = await digest(file);
    const env = { DATABASE_URL: url, ERRAND_SECRET_KEY: secretKey };
    const run = await errand(['import', file], env);
    refused(
      run,
      /holds \d+ projects whose repositories this server refuses, so their jobs' next turns would fail\. local repositories are disabled on this server \(set ERRAND_ALLOW_LOCAL_REPOS=true to allow them\): prj_\w+ "/,
      'local repositories on a server that refuses them',
    );
    assert.match(run.stderr, /or import them anyway with --keep-refused-repos/);
    assert.equal(run.stderr.match(/ prj_\w+ "/g)?.length, 10, 'ten projects named');
    assert.match(run.stderr, /; and \d+ more\. /, 'the rest counted');
    assert.doesNotMatch(run.stderr, /"forge"/, 'a project on GitHub is named');
    assert.equal(await contents(url), null, 'the refused import wrote to the database');
    assert.equal(await digest(file), before);

    const kept = ok(await errand(['import', file, '--keep-refused-repos'], env), 'kept');
    assert.match(kept.stdout, /^imported \d+ projects, /);
    assert.match(
      kept.stderr,
      /^imported anyway \(--keep-refused-repos\), with repositories this server refuses until they are changed\. local repositories are disabled on this server .*: prj_\w+ "/,
    );
    assert.notEqual(await contents(url), null);
  });

  test('an export made before review links carried a token: its review links get one', async () => {
    const target = await fresh();
    const url = target.databaseUrl ?? '';
    const bare = `http://127.0.0.1:8080/review/${jobIds[0]}`;
    // As Errand wrote jobs before migration 0019: no token column, a bare review link.
    const old = path.join(tmp, 'before-tokens.jsonl');
    const rows = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
    await writeFile(
      old,
      `${rows
        .map((line) => {
          const parsed = JSON.parse(line) as { table?: string; row?: Record<string, unknown> };
          if (parsed.table !== 'jobs' || !parsed.row) return line;
          const { review_token: _, ...row } = parsed.row;
          if (row.id === jobIds[0]) row.pr_link = bare;
          return JSON.stringify({ ...parsed, row });
        })
        .join('\n')}\n`,
      { mode: 0o600 },
    );
    ok(
      await errand(['import', old], {
        DATABASE_URL: url,
        ERRAND_SECRET_KEY: secretKey,
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
      }),
      'import of an export without review tokens',
    );
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const job = await client.query<{ pr_link: string; review_token: string }>(
        'SELECT pr_link, review_token FROM jobs WHERE id = $1',
        [jobIds[0]],
      );
      const [row] = job.rows;
      assert.ok(row && /^[0-9a-f]{64}$/.test(row.review_token));
      assert.equal(row.pr_link, `${bare}?token=${row.review_token}`);
    } finally {
      await client.end();
    }
  });

  test('an export made before the network policy: a project with setup_network keeps an open setup network', async () => {
    const target = await fresh();
    const url = target.databaseUrl ?? '';
    // As Errand wrote projects before migration 0022: setup_network, no network columns.
    const old = path.join(tmp, 'before-network.jsonl');
    const rows = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
    await writeFile(
      old,
      `${rows
        .map((line) => {
          const parsed = JSON.parse(line) as { table?: string; row?: Record<string, unknown> };
          if (parsed.table !== 'projects' || !parsed.row) return line;
          const { network_setup: _, network_commands: __, network_allow: ___, ...row } = parsed.row;
          return JSON.stringify({
            ...parsed,
            row: { ...row, setup_network: row.id === projectId },
          });
        })
        .join('\n')}\n`,
      { mode: 0o600 },
    );
    ok(
      await errand(['import', old], {
        DATABASE_URL: url,
        ERRAND_SECRET_KEY: secretKey,
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
      }),
      'import of an export without the network policy',
    );
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const projects = await client.query<{ id: string; network_setup: string }>(
        'SELECT id, network_setup FROM projects',
      );
      assert.ok(projects.rows.length > 1);
      for (const row of projects.rows) {
        assert.equal(row.network_setup, row.id === projectId ? 'open' : 'none', row.id);
      }
    } finally {
      await client.end();
    }
  });

  test('into a new embedded data directory: refused without the source key, then the keys work', async () => {
    const target = await createEmbeddedDataDir();
    dbs.push(target);
    const run = await errand(['import', file, '--data-dir', target.dataDir]);
    refused(
      run,
      new RegExp(
        `no secret key is set here: .*or copy that file to ${target.dataDir.replaceAll('/', '\\/')}\\/secret\\.key`,
      ),
      'no key file',
    );
    // Nothing was made: the refusal came before the database was opened.
    assert.deepEqual(await readdir(target.dataDir), []);

    await copyFile(
      path.join(source.dataDir, 'secret.key'),
      path.join(target.dataDir, 'secret.key'),
    );
    await copyFile(path.join(source.dataDir, 'admin.key'), path.join(target.dataDir, 'admin.key'));
    ok(await errand(['import', file, '--data-dir', target.dataDir]), 'import into embedded');
    const serve = await startServe(target.dataDir, ['--no-worker'], llmEnv);
    try {
      assert.equal(serve.adminKey, adminKey);
      const job = await http(serve.url, 'GET', `/v2/agent/${projectId}/job/${jobIds[1]}`, {
        key: projectKey,
      });
      assert.deepEqual(job.json, before_.jobs[1]);
    } finally {
      assert.equal(await serve.stop(), 0);
    }
  });

  test('what Errand said on a forge comes across: its answers, the threads it refused, the events it took, its watches', async () => {
    const from = await fresh();
    const svc = await startTestService({ database: from, worker: false, env: llmEnv });
    try {
      const project = await svc.createProject({ name: 'forge talk', repository: origin.url });
      const created = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'from an issue' },
      });
      assert.equal(created.status, 201, created.text);
      const db = svc.service.ctx.db;
      await db
        .insertInto('forge_replies')
        .values({ job_id: created.json.id ?? '', seq: 1, kind: 'accepted' })
        .execute();
      // A pull request the watch gave up on after two fixes: it does not start over after a move.
      await db
        .insertInto('pr_watches')
        .values({
          job_id: created.json.id ?? '',
          state: 'paused',
          reason: 'test still fails after 2 attempts to fix it',
          autofixes: 2,
          failed_sha: 'a'.repeat(40),
        })
        .execute();
      await db
        .insertInto('forge_refusals')
        .values([
          { project_id: project.id, thread: 'github:issue:7' },
          { project_id: project.id, thread: 'github:pull-request:9' },
        ])
        .execute();
      await db
        .insertInto('forge_events')
        .values({
          project_id: project.id,
          key: 'github:issue-comment:77',
          delivery_id: 'delivery-77',
          forge: 'github',
          kind: 'comment',
          thread_kind: 'issue',
          thread_number: 7,
          author: 'reviewer',
          url: 'https://github.com/acme/app/issues/7#issuecomment-77',
          outcome: 'accepted',
          reason: 'a new job',
          job_id: created.json.id ?? '',
          turn: 1,
          decided_at: new Date(),
        })
        .execute();
    } finally {
      await svc.stop();
    }
    const { summary, to } = await move(from, 'forge-talk.jsonl');
    assert.match(
      summary,
      /, 1 forge answer, 1 pull request watch, 2 forge refusals, 1 forge event, /,
    );
    const rows = async (url: string) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const read = async (table: string) =>
          (
            await client.query<{ row: string }>(
              `SELECT to_jsonb(t)::text AS row FROM ${table} t ORDER BY 1`,
            )
          ).rows.map((r) => r.row);
        return {
          replies: await read('forge_replies'),
          watches: await read('pr_watches'),
          refusals: await read('forge_refusals'),
          events: await read('forge_events'),
        };
      } finally {
        await client.end();
      }
    };
    const before = await rows(from.databaseUrl ?? '');
    assert.equal(before.replies.length, 1);
    assert.equal(before.watches.length, 1);
    assert.equal(before.refusals.length, 2);
    assert.equal(before.events.length, 1);
    assert.deepEqual(await rows(to.databaseUrl ?? ''), before);
  });

  test("a turn's images come across byte for byte: bytea through the file's JSON", async () => {
    const from = await fresh();
    const svc = await startTestService({ database: from, worker: false, env: llmEnv });
    // Every byte value, after a PNG's signature.
    const bytes = Buffer.concat([
      Buffer.from('89504e470d0a1a0a', 'hex'),
      Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
    ]);
    try {
      const project = await svc.createProject({ name: 'images', repository: origin.url });
      const created = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'with an image' },
      });
      assert.equal(created.status, 201, created.text);
      await svc.service.ctx.db
        .insertInto('attachments')
        .values({
          job_id: created.json.id ?? '',
          seq: 1,
          n: 1,
          media_type: 'image/png',
          size: bytes.length,
          data: bytes,
          source: 'https://images.example/shot.png',
        })
        .execute();
    } finally {
      await svc.stop();
    }
    const { summary, to } = await move(from, 'images.jsonl');
    assert.match(summary, /, 1 turn, 1 image, /);
    const client = new pg.Client({ connectionString: to.databaseUrl ?? '' });
    await client.connect();
    try {
      const { rows } = await client.query<{ data: Buffer; media_type: string; source: string }>(
        'SELECT data, media_type, source FROM attachments',
      );
      assert.equal(rows.length, 1);
      assert.ok(rows[0]?.data.equals(bytes), 'the bytes changed on the way');
      assert.equal(rows[0]?.media_type, 'image/png');
      assert.equal(rows[0]?.source, 'https://images.example/shot.png');
    } finally {
      await client.end();
    }
  });

  test("best-of-N comes across: the project's check command, a job's own, its attempts and its turn's", async () => {
    const from = await fresh();
    const svc = await startTestService({ database: from, worker: false, env: llmEnv });
    let project: ProjectRecord;
    let jobId: string;
    let before: { project: unknown; job: unknown };
    const attempts: AttemptResult[] = [1, 2].map((n) => ({
      n,
      engine: 'errand',
      model: 'openai:gpt-test',
      branch: `errand/job-${n}`,
      outcome: n === 1 ? 'failed' : 'passed',
      check: {
        exitCode: n === 1 ? 1 : 0,
        outputTail: n === 1 ? 'FAIL <a>\n' : 'ok\n',
        durationMs: 420,
      },
      costUsd: n === 1 ? 0.0123 : null,
      diff: { files: n, lines: 10 * n },
      commitSha: String(n).repeat(40),
      error: null,
      winner: n === 2,
    }));
    try {
      const made = await svc.request('POST', '/v2/admin/projects', {
        body: { name: 'checked', repository: origin.url, checkCommand: 'npm test' },
      });
      assert.equal(made.status, 201, made.text);
      project = made.json as ProjectRecord;
      const created = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: {
          prompt: 'two tries',
          attempts: { count: 2, agents: [{ engine: 'errand' }, { model: 'openai:gpt-test' }] },
          checkCommand: "grep -q 'right' answer.txt",
        },
      });
      assert.equal(created.status, 201, created.text);
      jobId = created.json.id ?? '';
      await svc.service.ctx.db
        .updateTable('jobs')
        .set({ attempts: JSON.stringify(attempts) })
        .where('id', '=', jobId)
        .execute();
      before = {
        project: (await svc.request('GET', `/v2/admin/projects/${project.id}`)).json,
        job: (await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`)).json,
      };
    } finally {
      await svc.stop();
    }
    assert.equal((before.project as ProjectRecord).checkCommand, 'npm test');
    assert.deepEqual((before.job as { attempts: unknown }).attempts, attempts);

    const { to } = await move(from, 'best-of.jsonl');
    const api = await startTestService({
      database: to,
      adminKey: svc.adminKey,
      worker: false,
      env: llmEnv,
    });
    try {
      assert.deepEqual(
        (await api.request('GET', `/v2/admin/projects/${project.id}`)).json,
        before.project,
      );
      assert.deepEqual(
        (await api.request('GET', `/v2/agent/${project.id}/job/${jobId}`)).json,
        before.job,
      );
      const job = await api.service.ctx.db
        .selectFrom('jobs')
        .select(['check_command', 'attempts'])
        .where('id', '=', jobId)
        .executeTakeFirstOrThrow();
      assert.equal(job.check_command, "grep -q 'right' answer.txt");
      assert.deepEqual(job.attempts, attempts);
      const turn = await api.service.ctx.db
        .selectFrom('turns')
        .select('best_of')
        .where('job_id', '=', jobId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(turn.best_of, {
        count: 2,
        agents: [{ engine: 'errand' }, { model: 'openai:gpt-test' }],
      });
    } finally {
      await api.stop();
    }
  });

  test('export to stdout; a failed export leaves no file behind', async () => {
    // Without serve running, export starts the embedded database itself.
    const out = ok(await errand(['export', '-', '--data-dir', source.dataDir]), 'export -');
    assert.match(out.stderr, /(^|\n)exported .* to stdout\n$/);
    const second = path.join(tmp, 'second.jsonl');
    ok(await errand(['export', second, '--data-dir', source.dataDir]), 'export FILE');
    // Stdout gets what a file gets: a header, then the same rows and end line.
    const streamed = out.stdout.split('\n');
    const saved = (await readFile(second, 'utf8')).split('\n');
    assert.equal(JSON.parse(streamed[0] ?? '{}').format, 'errand-export');
    assert.deepEqual(streamed.slice(1), saved.slice(1));

    const dir = path.join(tmp, 'a-directory');
    await mkdir(dir);
    await writeFile(path.join(dir, 'keep'), 'kept');
    const failed = await errand(['export', dir, '--data-dir', source.dataDir]);
    refused(failed, /cannot write .*a-directory: it is a directory/, 'export over a directory');
    assert.deepEqual(await readdir(dir), ['keep']);
    assert.deepEqual(
      (await readdir(tmp)).filter((f) => f.endsWith('.partial')),
      [],
    );

    const nowhere = await errand([
      'export',
      path.join(tmp, 'e.jsonl'),
      '--data-dir',
      path.join(tmp, 'none'),
    ]);
    refused(nowhere, /there is no Errand database in .*none/, 'export of no database');
    assert.equal(await stat(path.join(tmp, 'none')).catch(() => undefined), undefined);

    const usage = await errand(['export']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /errand export: missing FILE\n\nUsage: errand export FILE/);
  });
});
