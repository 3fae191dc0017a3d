// Environment snapshots in real turns: a real service and database, real git, real bubblewrap
// and the scripted fake model over loopback. The setup runs once per key on this worker; later
// turns of any job of the project restore what it made, each into a copy of its own, and a
// turn's changes never reach the snapshot. A changed lock file, a dropped row, a secret in
// what the setup made, the cache's bound and a hostile tree each do what they must.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import { discardsSettled } from '../../src/workspace/discard.ts';
import {
  type FakeLlm,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService } from '../support/service.ts';

const OPENAI_KEY = 'sk-test-openai-environments-7f3a';
const NPM_TOKEN = `npm_${randomBytes(18).toString('hex')}`;

const sandbox = await checkSandbox();
const skip = sandbox.available ? false : `bubblewrap does not work here: ${sandbox.reason}`;
if (skip) process.stdout.write(`# environment tests skipped: ${skip}\n`);

type Event = { type: string; data: Record<string, unknown> };

/**
 * Makes node_modules/dep/index.js, counts its runs in HOME (the package cache, kept between
 * setups: a file no checkout has) and prints the count.
 */
const SETUP =
  'mkdir -p node_modules/dep && echo original > node_modules/dep/index.js && ' +
  'echo keep > node_modules/dep/other.js && echo run >> "$HOME/runs" && wc -l < "$HOME/runs"';

/** The last tool result of a recorded OpenAI request. */
function lastToolResult(request: RecordedRequest | undefined): string {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  const results = (body?.messages ?? [])
    .filter((m) => m.role === 'tool')
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
  return results.at(-1) ?? '';
}

/** The user messages of a recorded request (the prompt and Errand's notes). */
function userText(request: RecordedRequest | undefined): string {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  return JSON.stringify((body?.messages ?? []).filter((m) => m.role === 'user'));
}

interface Harness {
  svc: TestService;
  llm: FakeLlm;
  origin: Origin;
  tmp: string;
}

async function startHarness(name: string, env: Record<string, string> = {}): Promise<Harness> {
  const tmp = await makeTempDir(name);
  const origin = await makeOrigin(tmp, {
    'README.md': '# Demo\n',
    '.gitignore': 'node_modules/\n',
    'package-lock.json': '{"lockfileVersion":3}\n',
    'pkg/index.txt': 'a tracked folder\n',
  });
  const llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
  const svc = await startTestService({
    env: {
      OPENAI_API_KEY: OPENAI_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
      ERRAND_TURN_RETRIES: '0',
      ERRAND_SECRET_KEY: 'environments-e2e-secret-key',
      ...env,
    },
  });
  return { svc, llm, origin, tmp };
}

async function stopHarness(h: Harness | undefined): Promise<void> {
  await h?.svc.close();
  await h?.llm.close();
  if (h) await removeDir(h.tmp);
}

function helpers(h: Harness) {
  const { svc } = h;
  const events = async (projectId: string, jobId: string): Promise<Event[]> =>
    ((await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ??
      []) as unknown as Event[];
  const types = async (projectId: string, jobId: string) =>
    (await events(projectId, jobId)).map((e) => e.type);
  const until = (projectId: string, jobId: string, status = 'completed') =>
    untilStatus(svc, projectId, jobId, status, { timeoutMs: 90_000 });
  /**
   * A project with `setupCommand`, set in the database: through the API it would ask for a
   * background build (tested in src/http/routes/admin-projects.environment.test.ts), which the
   * worker here would run beside each test's first job. The build worker's test asks for one.
   */
  const project = async (setupCommand: string, extra: Record<string, unknown> = {}) => {
    const { id } = await svc.createProject({ repository: h.origin.url, ref: 'main' });
    if (Object.keys(extra).length > 0) {
      const patched = await svc.request('PATCH', `/v2/admin/projects/${id}`, { body: extra });
      assert.equal(patched.status, 200, patched.text);
    }
    await svc.service.ctx.db
      .updateTable('projects')
      .set({ setup_command: setupCommand })
      .where('id', '=', id)
      .execute();
    return id;
  };
  /** A job whose one turn runs `command` and ends; its events. */
  const job = async (projectId: string, command: string): Promise<[string, Event[]]> => {
    h.llm.script(toolCalls([{ name: 'run_command', input: { command } }]), reply('Looked'));
    const jobId = await createJob(svc, projectId, 'Look at the dependency');
    await until(projectId, jobId);
    return [jobId, await events(projectId, jobId)];
  };
  const followUp = async (projectId: string, jobId: string, command: string) => {
    h.llm.script(toolCalls([{ name: 'run_command', input: { command } }]), reply('Looked again'));
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'Again' },
    });
    assert.equal(res.status, 200, res.text);
    await until(projectId, jobId);
    return events(projectId, jobId);
  };
  const rows = (projectId: string) =>
    svc.service.ctx.db
      .selectFrom('environments')
      .selectAll()
      .where('project_id', '=', projectId)
      .execute();
  const envDir = (...parts: string[]) => path.join(svc.database.dataDir, 'environments', ...parts);
  const runs = async (projectId: string) =>
    (await readFile(envDir('homes', projectId, 'runs'), 'utf8')).split('\n').filter(Boolean).length;
  const settled = async () => {
    await svc.service.ctx.environments.settled();
    await discardsSettled();
  };
  return { events, types, until, project, job, followUp, rows, envDir, runs, settled };
}

describe('environment snapshots in turns', { skip }, () => {
  let h: Harness;
  let x: ReturnType<typeof helpers>;

  before(async () => {
    h = await startHarness('environments');
    x = helpers(h);
  });
  after(() => stopHarness(h));
  afterEach(() => {
    try {
      h.llm.assertDone();
    } finally {
      h.llm.reset();
    }
  });

  test('the setup runs once: a follow-up and a second job restore it, each its own copy', async () => {
    const projectId = await x.project(SETUP);
    // Job A: the setup runs, what it made is kept; the agent then changes and deletes it.
    const [jobA, first] = await x.job(
      projectId,
      'cat node_modules/dep/index.js && echo changed-by-a > node_modules/dep/index.js && rm node_modules/dep/other.js',
    );
    const kinds = first.map((e) => e.type);
    assert.ok(kinds.includes('setup.finished'), kinds.join(','));
    const built = first.find((e) => e.type === 'environment.built')?.data ?? {};
    assert.match(String(built.key), /^[0-9a-f]{64}$/);
    assert.equal(built.files, 2);
    assert.ok(Number(built.bytes) > 0);
    assert.ok(
      kinds.indexOf('environment.built') < kinds.indexOf('tool.call'),
      'the snapshot was taken after the agent started',
    );
    assert.match(lastToolResult(h.llm.requests[1]), /original/);
    const [row] = await x.rows(projectId);
    assert.equal(row?.key, built.key);
    assert.equal(row?.files, 2);
    assert.equal(row?.worker, h.svc.service.ctx.config.environments.worker);
    await x.settled();

    // A follow-up of job A: restored from the spare, the setup does not run; the turn's own
    // change of the last turn is gone with the pristine tree, and the snapshot has the original.
    const again = await x.followUp(
      projectId,
      jobA,
      'cat node_modules/dep/index.js node_modules/dep/other.js && rm -rf node_modules',
    );
    const second = again.slice(first.length);
    assert.deepEqual(
      second.filter((e) => e.type.startsWith('setup.')).map((e) => e.type),
      [],
      'the setup ran again',
    );
    const restored = second.find((e) => e.type === 'environment.restored')?.data ?? {};
    assert.equal(restored.key, built.key);
    assert.equal(restored.from, 'spare');
    assert.equal(typeof restored.ms, 'number');
    assert.match(lastToolResult(h.llm.requests.at(-1)), /original\nkeep\n/);
    assert.match(userText(h.llm.requests.at(-1)), /environment was restored from a snapshot/);
    assert.equal(await x.runs(projectId), 1);

    // Job B, right after (no spare ready yet: copied while it waits), sees the original too,
    // though job A deleted all of it in the turn before.
    const [, other] = await x.job(
      projectId,
      'cat node_modules/dep/index.js node_modules/dep/other.js',
    );
    const restoredB = other.find((e) => e.type === 'environment.restored')?.data ?? {};
    assert.equal(restoredB.key, built.key);
    assert.ok(!other.some((e) => e.type === 'setup.started'), 'the setup ran for job B');
    assert.match(lastToolResult(h.llm.requests.at(-1)), /original\nkeep\n/);
    assert.equal(await x.runs(projectId), 1);
    const snapshot = x.envDir('snapshots', projectId, String(built.key), 'tree', 'node_modules');
    assert.equal(await readFile(path.join(snapshot, 'dep', 'index.js'), 'utf8'), 'original\n');
    assert.equal(await readFile(path.join(snapshot, 'dep', 'other.js'), 'utf8'), 'keep\n');
  });

  test('the build worker builds before any job; the first job restores; a second request builds nothing', async () => {
    const projectId = await x.project(SETUP);
    const { queue } = h.svc.service.ctx;
    await queue.environmentBuilds.request(projectId, 'created');
    const deadline = Date.now() + 90_000;
    while ((await x.rows(projectId)).length === 0) {
      assert.ok(Date.now() < deadline, 'no environment was built');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const [row] = await x.rows(projectId);
    assert.equal(row?.base_commit, h.origin.head('main'));
    assert.equal(await x.runs(projectId), 1);
    await x.settled();
    const [, log] = await x.job(projectId, 'cat node_modules/dep/index.js');
    assert.ok(!log.some((e) => e.type.startsWith('setup.')), 'the setup ran in the job');
    const restored = log.find((e) => e.type === 'environment.restored')?.data ?? {};
    assert.equal(restored.key, row?.key);
    assert.equal(restored.from, 'spare');
    assert.match(lastToolResult(h.llm.requests.at(-1)), /original/);
    // Asked again: this worker has it, nothing runs (the setup would count a second run).
    await queue.environmentBuilds.request(projectId, 'rebuild');
    const open = async () =>
      (
        await sql<{ n: number }>`SELECT count(*)::int AS n FROM pgboss.job
          WHERE name = 'environment-builds' AND singleton_key = ${projectId}
            AND state <> 'completed'`.execute(h.svc.service.ctx.db)
      ).rows[0]?.n ?? 0;
    while ((await open()) > 0) {
      assert.ok(Date.now() < deadline, 'the second build request never ended');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(await x.runs(projectId), 1, 'the second request ran the setup');
  });

  test('the maintenance command runs after a restore, with the setup’s HOME; the model is told', async () => {
    const projectId = await x.project(SETUP);
    await h.svc.service.ctx.db
      .updateTable('projects')
      .set({ maintenance_command: 'echo m >> node_modules/dep/maintained && echo maintained-ok' })
      .where('id', '=', projectId)
      .execute();
    const [, first] = await x.job(projectId, 'true');
    assert.ok(!first.some((e) => e.type.startsWith('maintenance.')), 'maintenance after a build');
    const [, second] = await x.job(projectId, 'cat node_modules/dep/maintained');
    const kinds = second.map((e) => e.type);
    assert.ok(
      kinds.indexOf('environment.restored') < kinds.indexOf('maintenance.started') &&
        kinds.indexOf('maintenance.finished') < kinds.indexOf('tool.call'),
      kinds.join(','),
    );
    const finished = second.find((e) => e.type === 'maintenance.finished')?.data ?? {};
    assert.equal(finished.exitCode, 0);
    assert.equal(finished.outputTail, 'maintained-ok\n');
    assert.match(lastToolResult(h.llm.requests.at(-1)), /\n\nm\n$/);
    const note = userText(h.llm.requests.at(-1));
    assert.match(note, /Then its maintenance command ran: it succeeded/);
    assert.match(note, /maintained-ok/);
  });

  test('a changed lock file runs the setup again, with the package cache of the last run', async () => {
    const projectId = await x.project(SETUP);
    const [, first] = await x.job(projectId, 'true');
    const key1 = first.find((e) => e.type === 'environment.built')?.data.key;
    await h.origin.commit({ 'package-lock.json': '{"lockfileVersion":3,"changed":true}\n' });
    const [, second] = await x.job(projectId, 'true');
    const finished = second.find((e) => e.type === 'setup.finished')?.data ?? {};
    // HOME kept its file: the second run counted two.
    assert.equal(finished.outputTail, '2\n');
    const key2 = second.find((e) => e.type === 'environment.built')?.data.key;
    assert.ok(key2 && key2 !== key1, 'no new snapshot');
    assert.ok(!second.some((e) => e.type === 'environment.restored'));
    assert.equal((await x.rows(projectId)).length, 2);
    await h.origin.commit({ 'package-lock.json': '{"lockfileVersion":3}\n' });
  });

  test('a deleted row is not restored, and its files go', async () => {
    const projectId = await x.project(SETUP);
    const [, first] = await x.job(projectId, 'true');
    const key = String(first.find((e) => e.type === 'environment.built')?.data.key);
    await x.settled();
    await h.svc.service.ctx.db
      .deleteFrom('environments')
      .where('project_id', '=', projectId)
      .execute();
    const [, second] = await x.job(projectId, 'true');
    assert.ok(!second.some((e) => e.type === 'environment.restored'), 'restored a dropped one');
    assert.ok(second.some((e) => e.type === 'setup.finished'));
    assert.ok(second.some((e) => e.type === 'environment.built'));
    assert.equal((await x.rows(projectId)).length, 1, 'the rebuild was not recorded');
    // Dropped by a reconcile too when nobody asks for it: rows and files agree afterwards. The
    // rebuild's spare, copied in the background, is made first: a copy that lands after the
    // reconcile is the next reconcile's to remove.
    await x.settled();
    await h.svc.service.ctx.db
      .deleteFrom('environments')
      .where('project_id', '=', projectId)
      .execute();
    await h.svc.service.ctx.environments.reconcile();
    await x.settled();
    assert.deepEqual(await readdir(x.envDir('snapshots', projectId)), []);
    assert.deepEqual(
      await readdir(x.envDir('spares', projectId)).catch(() => []),
      [],
      `spares of ${key} stayed`,
    );
  });

  test('a setup that writes a setup-only secret into an ignored file: no snapshot, the event names it', async () => {
    const projectId = await x.project(
      'mkdir -p node_modules && printf "//registry/:_authToken=%s\\n" "$NPM_TOKEN" > node_modules/.npmrc',
    );
    const put = await h.svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`, {
      body: { value: NPM_TOKEN, exposure: 'setup' },
    });
    assert.equal(put.status, 201, put.text);
    const [, log] = await x.job(projectId, 'true');
    const notKept = log.find((e) => e.type === 'environment.not_kept')?.data ?? {};
    assert.equal(notKept.secret, 'NPM_TOKEN');
    assert.match(String(notKept.reason), /secret NPM_TOKEN/);
    assert.ok(!JSON.stringify(log).includes(NPM_TOKEN), 'the value is in the events');
    assert.ok(!log.some((e) => e.type === 'environment.built'));
    assert.deepEqual(await x.rows(projectId), []);
    await x.settled();
    assert.deepEqual(await readdir(x.envDir('snapshots', projectId)).catch(() => []), []);
  });

  test('a tracked folder that became a symlink: nothing is restored through it', async () => {
    const outside = path.join(h.tmp, 'outside');
    await mkdir(outside);
    const projectId = await x.project(
      'mkdir -p pkg/node_modules/x && echo made > pkg/node_modules/x/a',
    );
    const [, first] = await x.job(projectId, 'true');
    assert.ok(first.some((e) => e.type === 'environment.built'));
    // Same lock file, same key; pkg is now a symlink to a folder outside the checkout.
    await h.origin.commit({ 'pkg/index.txt': null }, 'pkg goes');
    await rm(path.join(h.origin.work, 'pkg'), { recursive: true, force: true });
    await symlink(outside, path.join(h.origin.work, 'pkg'));
    await h.origin.commit({}, 'pkg is a link');
    const [, second] = await x.job(projectId, 'ls -la pkg/ ; true');
    const restored = second.find((e) => e.type === 'environment.restored')?.data ?? {};
    assert.equal(restored.skipped, 1);
    assert.deepEqual(await readdir(outside), [], 'written through the symlink');
    assert.ok((await lstat(path.join(h.origin.work, 'pkg'))).isSymbolicLink());
    // Back to a folder for the other tests.
    await h.origin.commit({ pkg: null }, 'no link');
    await h.origin.commit({ 'pkg/index.txt': 'a tracked folder\n' }, 'pkg again');
  });
});

describe('the environment cache’s bound', { skip }, () => {
  let h: Harness;
  let x: ReturnType<typeof helpers>;

  before(async () => {
    h = await startHarness('environments-bound', { ERRAND_ENVIRONMENT_CACHE_MB: '5' });
    x = helpers(h);
  });
  after(() => stopHarness(h));
  afterEach(() => h.llm.reset());

  test('evicts the least recently used snapshot, its row and its files', async () => {
    // ~1 MB each, twice on disk with its spare: two fit under 5 MiB with their spares, not three.
    const setup = (tag: string) =>
      `mkdir -p node_modules && head -c 1000000 /dev/urandom > node_modules/${tag}.bin`;
    const first = await x.project(setup('first'));
    const second = await x.project(setup('second'));
    const third = await x.project(setup('third'));
    await x.job(first, 'true');
    await x.settled();
    await x.job(second, 'true');
    await x.settled();
    // The first is used again: the second is now the least recently used.
    const [, again] = await x.job(first, 'true');
    assert.ok(again.some((e) => e.type === 'environment.restored'));
    await x.settled();
    await x.job(third, 'true');
    await x.settled();
    assert.equal((await x.rows(first)).length, 1, 'the recently used one went');
    assert.equal((await x.rows(second)).length, 0, 'the least recently used one stayed');
    assert.equal((await x.rows(third)).length, 1);
    assert.deepEqual(await readdir(x.envDir('snapshots', second)), []);
    const metrics = await h.svc.service.ctx.metrics.registry.metrics();
    assert.match(metrics, /errand_environment_restores_total\{result="hit"\} 1/);
    assert.match(metrics, /errand_environment_restores_total\{result="miss"\} 3/);
    assert.match(metrics, /errand_environment_builds_total\{outcome="kept"\} 3/);
    assert.match(metrics, /errand_environment_bytes\{kind="snapshots"\} [1-9]/);
  });
});
