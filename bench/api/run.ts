// The API benchmark. For each backend (the embedded mode: serve without DATABASE_URL, which runs
// its own PostgreSQL server; PostgreSQL: serve with DATABASE_URL), in one run:
//   1. GET job (the polling hot path) against the real service,
//   2. POST job (each request creates a job and queues its first turn),
//   3. the database bound: `pgbench -S` against the service's own PostgreSQL server (for the
//      embedded mode, through the embedded server's Unix socket),
//   4. the "bare route" upper bound: Fastify answering the same GET body with no auth, no DB,
// with autocannon in this process and the service / bare server in child processes, one
// measurement at a time, each after a warm-up. Results go to bench/results/api-<time>.json
// and a Markdown table to stdout.
//
//   node bench/api/run.ts [--duration 10] [--connections 64] [--backend embedded|postgres|both]
//                         [--warmup 2] [--pg-url URL] [--pgbench PATH] [--cpu-prof]
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import {
  type Child,
  killAllChildrenNow,
  startChild,
  stopAllChildren,
  stopChild,
} from './children.ts';
import { CpuRecorder, type CpuUse, cpuAccountingAvailable, type Roles } from './cpu.ts';
import { type BenchDatabase, embeddedDatabase, urlDatabase } from './database.ts';
import { type LoadTarget, type Measurement, measure } from './load.ts';
import { findPgbench, initPgbench, type PgbenchResult, runPgbench } from './pgbench.ts';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const DEFAULT_PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';
const PGBENCH_SCALE = 1;
const PGBENCH_THREADS = 2;
/** GET, in both modes, must reach this share of the bare route's throughput (issue 19)… */
const TARGET_GET_SHARE_OF_BARE = 0.4;
/** …with a p99 below this. */
const TARGET_GET_P99_MS = 20;
const BENCH_MODEL = 'openai-compatible:bench-model';
const BENCH_MODEL_BASE_URL = 'http://127.0.0.1:9/v1';

export type Backend = 'embedded' | 'postgres';

export interface ApiBenchOptions {
  durationSec: number;
  warmupSec: number;
  connections: number;
  backends: Backend[];
  /** Whether PostgreSQL was asked for explicitly (then an unreachable server is an error). */
  postgresRequired: boolean;
  /** Admin connection used to create and drop the bench database. */
  pgAdminUrl: string;
  pgbench: string | undefined;
  /** Write a V8 CPU profile of each service child to bench/results/. */
  cpuProf: boolean;
  resultsDir: string;
}

/** Per-table activity and transaction count in the bench database, per request. */
export interface DbActivity {
  transactionsPerRequest: number;
  /** "schema.table" → index + sequential scans per request (tables with any). */
  scansPerRequest: Record<string, number>;
  /** "schema.table" → rows inserted + updated per request (tables with any). */
  writesPerRequest: Record<string, number>;
}

export interface PgbenchSection {
  result: PgbenchResult | null;
  cpu: CpuUse | null;
  /** Why there is no result, when there is none. */
  na: string | null;
}

export interface BackendReport {
  backend: Backend;
  getJob: Measured;
  postJob: Measured;
  bareRoute: Measured;
  pgbench: PgbenchSection;
  ratios: {
    getVsBare: number;
    postVsBare: number;
    getVsPgbench: number | null;
    postVsPgbench: number | null;
  };
  target: { getShareOfBare: number; getP99Ms: number; met: boolean } | null;
  /** The GET job response body served by the bare route. */
  responseBytes: number;
  serverVersion: string | null;
  elapsedSec: number;
}

export interface ApiBenchReport {
  benchmark: 'api';
  startedAt: string;
  finishedAt: string;
  elapsedSec: number;
  machine: {
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    platform: string;
    node: string;
    /** 1-minute load average at the start and at the end (other work on the machine). */
    loadAverage: { start: number; end: number };
  };
  options: {
    durationSec: number;
    warmupSec: number;
    connections: number;
    backends: Backend[];
    pgbench: string | null;
  };
  backends: BackendReport[];
  skipped: { backend: Backend; reason: string }[];
  resultsFile: string;
}

const USAGE = `Usage: node bench/api/run.ts [options]
  --duration S      seconds per measurement (default 10)
  --warmup S        seconds of warm-up before each measurement (default 2)
  --connections N   concurrent connections / pgbench clients (default 64)
  --backend B       embedded, postgres or both (default both; PostgreSQL is skipped when
                    unreachable unless asked for with --backend postgres or --pg-url)
  --pg-url URL      admin connection to the PostgreSQL server, used to create and drop the
                    bench database (default $DATABASE_URL, else ${DEFAULT_PG_ADMIN_URL})
  --pgbench PATH    pgbench binary (default: PATH, then /usr/lib/postgresql/*/bin)
  --cpu-prof        write a CPU profile of each service child to bench/results/
`;

export class UsageError extends Error {
  override name = 'UsageError';
}

function positiveInt(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      backend: { type: 'string' },
      'pg-url': { type: 'string' },
      pgbench: { type: 'string' },
      'cpu-prof': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
}

export function parseOptions(argv: string[]): ApiBenchOptions | 'help' {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values } = parsed;
  if (values.help) return 'help';
  const backend = values.backend ?? 'both';
  if (backend !== 'embedded' && backend !== 'postgres' && backend !== 'both') {
    throw new UsageError('--backend must be embedded, postgres or both');
  }
  const warmup = values.warmup === '0' ? 0 : positiveInt(values.warmup, 'warmup', 2);
  const envUrl = process.env.DATABASE_URL || undefined;
  return {
    durationSec: positiveInt(values.duration, 'duration', 10),
    warmupSec: warmup,
    connections: positiveInt(values.connections, 'connections', 64),
    backends: backend === 'both' ? ['embedded', 'postgres'] : [backend],
    postgresRequired:
      backend === 'postgres' || values['pg-url'] !== undefined || envUrl !== undefined,
    pgAdminUrl: values['pg-url'] ?? envUrl ?? DEFAULT_PG_ADMIN_URL,
    pgbench: values.pgbench,
    cpuProf: values['cpu-prof'] ?? false,
    resultsDir: path.join(REPO_ROOT, 'bench', 'results'),
  };
}

// ---- cleanup: every resource registers how to release it; run in reverse, each bounded ----

const cleanups: { name: string; fn: () => Promise<void> }[] = [];

function onCleanup(name: string, fn: () => Promise<void>): () => Promise<void> {
  const entry = { name, fn };
  cleanups.push(entry);
  return async () => {
    const i = cleanups.indexOf(entry);
    if (i >= 0) cleanups.splice(i, 1);
    await fn();
  };
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function cleanUpAll(): Promise<void> {
  await withTimeout(stopAllChildren(), 30_000, 'stopping child processes').catch((err: unknown) => {
    log(`cleanup: ${String(err)}`);
    killAllChildrenNow();
  });
  while (cleanups.length > 0) {
    const entry = cleanups.pop();
    if (!entry) break;
    await withTimeout(entry.fn(), 30_000, entry.name).catch((err: unknown) =>
      log(`cleanup of ${entry.name} failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  }
}

// ---- helpers ----

const t0 = Date.now();

function log(message: string): void {
  process.stderr.write(
    `[bench ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${message}\n`,
  );
}

function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

async function http(
  method: 'GET' | 'POST',
  url: string,
  key: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, text: await res.text() };
}

async function expectJson<T>(
  what: string,
  expected: number,
  p: Promise<{ status: number; text: string }>,
): Promise<T> {
  const { status, text } = await p;
  if (status !== expected) throw new Error(`${what}: expected ${expected}, got ${status}: ${text}`);
  return JSON.parse(text) as T;
}

async function pgClient(connection: string | BenchDatabase['client']): Promise<pg.Client> {
  const settings = typeof connection === 'string' ? { connectionString: connection } : connection;
  const client = new pg.Client({ ...settings, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  await client.connect();
  return client;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

interface DbCounters {
  xacts: number;
  tables: Record<string, { scans: number; writes: number }>;
}

async function readCounters(db: BenchDatabase): Promise<DbCounters> {
  const client = await pgClient(db.client);
  try {
    const x = await client.query<{ xacts: string }>(
      'SELECT xact_commit + xact_rollback AS xacts FROM pg_stat_database WHERE datname = current_database()',
    );
    const t = await client.query<{ name: string; scans: string; writes: string }>(
      `SELECT schemaname || '.' || relname AS name,
              coalesce(seq_scan, 0) + coalesce(idx_scan, 0) AS scans,
              n_tup_ins + n_tup_upd AS writes
         FROM pg_stat_user_tables`,
    );
    const tables: DbCounters['tables'] = {};
    for (const row of t.rows)
      tables[row.name] = { scans: Number(row.scans), writes: Number(row.writes) };
    return { xacts: Number(x.rows[0]?.xacts ?? 0), tables };
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * PostgreSQL backends flush their statistics at most once a second while busy and, once idle,
 * up to 10 s later (PGSTAT_IDLE_INTERVAL): counters are read this long after the load stops.
 */
const STATS_FLUSH_WAIT_MS = 11_000;

export type Measured = Measurement & { cpu: CpuUse | null; dbActivity: DbActivity | null };

/**
 * Measures `target`; records where the CPU went during the measurement and, given `statsDb`,
 * what the service's database did per request (warm-up included: its counters are read before
 * the warm-up and after the measurement).
 */
async function measureAll(
  target: LoadTarget,
  opts: { connections: number; durationSec: number; warmupSec: number },
  roles: Roles,
  statsDb: BenchDatabase | undefined,
): Promise<Measured> {
  const before = statsDb ? await readCounters(statsDb) : undefined;
  const recorder = cpuAccountingAvailable() ? new CpuRecorder(roles) : undefined;
  let cpu: CpuUse | null = null;
  const m = await measure(target, opts, {
    before: () => recorder?.start(),
    after: () => {
      cpu = recorder?.stop() ?? null;
    },
  });
  if (!statsDb || !before) return { ...m, cpu, dbActivity: null };
  await new Promise((r) => setTimeout(r, STATS_FLUSH_WAIT_MS));
  const after = await readCounters(statsDb);
  const n = Math.max(1, m.requests + m.warmupRequests);
  const scansPerRequest: Record<string, number> = {};
  const writesPerRequest: Record<string, number> = {};
  for (const [name, a] of Object.entries(after.tables)) {
    const b = before.tables[name] ?? { scans: 0, writes: 0 };
    const scans = round((a.scans - b.scans) / n);
    const writes = round((a.writes - b.writes) / n);
    if (scans >= 0.001) scansPerRequest[name] = scans;
    if (writes >= 0.001) writesPerRequest[name] = writes;
  }
  return {
    ...m,
    cpu,
    dbActivity: {
      transactionsPerRequest: round((after.xacts - before.xacts) / n),
      scansPerRequest,
      writesPerRequest,
    },
  };
}

// ---- one backend ----

interface ServiceHandle {
  child: Child;
  url: string;
  adminKey: string;
}

async function startService(
  backend: Backend,
  dataDir: string,
  databaseUrl: string | undefined,
  profileDir: string | undefined,
): Promise<ServiceHandle> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ERRAND_LOG_LEVEL: 'warn',
    ERRAND_RATE_LIMIT_CREATE: '0',
    // The project's repository is a local directory; PostgreSQL deployments refuse those
    // by default.
    ERRAND_ALLOW_LOCAL_REPOS: 'true',
    ERRAND_HOST: '127.0.0.1',
    // Jobs must name a usable model to be accepted. The bench project uses an OpenAI-compatible
    // model at an address where nothing listens: with --no-worker no turn runs, so it is
    // never called.
    ERRAND_OPENAI_COMPATIBLE_BASE_URL: BENCH_MODEL_BASE_URL,
  };
  delete env.DATABASE_URL;
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  const { child, match } = await startChild({
    name: `errand service (${backend})`,
    args: [
      ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
      path.join(REPO_ROOT, 'src', 'main.ts'),
      'serve',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--no-worker',
    ],
    cwd: REPO_ROOT,
    env,
    ready: /errand listening on (http:\/\/\S+)/,
    timeoutMs: 90_000,
  });
  const adminKey = (await readFile(path.join(dataDir, 'admin.key'), 'utf8')).trim();
  return { child, url: match, adminKey };
}

async function benchBackend(
  backend: Backend,
  opts: ApiBenchOptions,
  pgbenchBin: string | undefined,
  profileDir: string | undefined,
): Promise<BackendReport> {
  const started = Date.now();
  const load = {
    connections: opts.connections,
    durationSec: opts.durationSec,
    warmupSec: opts.warmupSec,
  };
  const tmp = await mkdtemp(path.join(os.tmpdir(), `errand-bench-${backend}-`));
  const releaseTmp = onCleanup(`temporary directory ${tmp}`, () =>
    rm(tmp, { recursive: true, force: true }),
  );
  const dataDir = path.join(tmp, 'data');
  const repoDir = path.join(tmp, 'repo');
  await mkdir(repoDir);

  let benchUrl: string | undefined;
  let serverVersion: string | null = null;
  let releaseDb: (() => Promise<void>) | undefined;
  if (backend === 'postgres') {
    const name = `errand_bench_${Date.now().toString(36)}_${process.pid}`;
    const admin = await pgClient(opts.pgAdminUrl);
    try {
      serverVersion =
        (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]
          ?.server_version ?? null;
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end().catch(() => {});
    }
    releaseDb = onCleanup(`database ${name}`, async () => {
      const c = await pgClient(opts.pgAdminUrl);
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        log(`dropped database ${name}`);
      } finally {
        await c.end().catch(() => {});
      }
    });
    benchUrl = withDatabase(opts.pgAdminUrl, name);
    log(`created database ${name} (PostgreSQL ${serverVersion})`);
  }

  try {
    // ---- the real service ----
    log(`${backend}: starting the service (--no-worker)`);
    const svc = await startService(backend, dataDir, benchUrl, profileDir);
    log(`${backend}: service at ${svc.url}`);
    // The service's own database: the bench database, or the embedded server it started.
    const db = benchUrl ? urlDatabase(benchUrl) : await embeddedDatabase(dataDir);
    if (!benchUrl) {
      const c = await pgClient(db.client);
      try {
        serverVersion =
          (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]
            ?.server_version ?? null;
      } finally {
        await c.end().catch(() => {});
      }
    }
    const project = await expectJson<{ id: string }>(
      'create project',
      201,
      http('POST', `${svc.url}/v2/admin/projects`, svc.adminKey, {
        name: 'bench',
        repository: repoDir,
        model: BENCH_MODEL,
      }),
    );
    const { key } = await expectJson<{ key: string }>(
      'create project key',
      201,
      http('POST', `${svc.url}/v2/admin/keys`, svc.adminKey, {
        projectId: project.id,
        name: 'bench',
      }),
    );
    const jobsUrl = `${svc.url}/v2/agent/${project.id}/job`;
    const job = await expectJson<{ id: string }>(
      'create job',
      201,
      http('POST', jobsUrl, key, { prompt: 'benchmark job' }),
    );
    const jobUrl = `${jobsUrl}/${job.id}`;
    const got = await http('GET', jobUrl, key);
    if (got.status !== 200)
      throw new Error(`GET job: expected 200, got ${got.status}: ${got.text}`);
    const bodyFile = path.join(tmp, 'job.json');
    await writeFile(bodyFile, got.text);

    log(`${backend}: GET job, ${opts.connections} connections, ${opts.durationSec} s`);
    const serviceRoles: Roles = {
      serverPid: svc.child.proc.pid,
      loadGeneratorPids: [process.pid],
      benchDb: db.name,
    };
    const getJob = await measureAll(
      { url: jobUrl, method: 'GET', headers: { authorization: `Bearer ${key}` } },
      load,
      serviceRoles,
      db,
    );
    log(`${backend}: GET job ${getJob.reqPerSec} req/s, p99 ${getJob.latencyMs.p99} ms`);

    log(`${backend}: POST job, ${opts.connections} connections, ${opts.durationSec} s`);
    const postJob = await measureAll(
      {
        url: jobsUrl,
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'benchmark job: say hello' }),
      },
      load,
      serviceRoles,
      db,
    );
    log(`${backend}: POST job ${postJob.reqPerSec} req/s, p99 ${postJob.latencyMs.p99} ms`);

    // ---- the database bound, while the service (and so the embedded server) still runs ----
    let pgbench: PgbenchSection;
    if (!pgbenchBin) {
      pgbench = { result: null, cpu: null, na: 'pgbench not found (give --pgbench PATH)' };
    } else {
      log(`${backend}: pgbench -i -s ${PGBENCH_SCALE}`);
      await initPgbench(pgbenchBin, db, PGBENCH_SCALE);
      log(`${backend}: pgbench -S -c ${opts.connections} -j ${PGBENCH_THREADS}`);
      const roles: Roles = { serverPid: undefined, loadGeneratorPids: [], benchDb: db.name };
      const recorder = cpuAccountingAvailable() ? new CpuRecorder(roles) : undefined;
      let cpu: CpuUse | null = null;
      const result = await runPgbench(
        pgbenchBin,
        db,
        {
          clients: opts.connections,
          threads: PGBENCH_THREADS,
          durationSec: opts.durationSec,
          warmupSec: opts.warmupSec,
          scale: PGBENCH_SCALE,
        },
        {
          before: () => recorder?.start(),
          after: () => {
            cpu = recorder?.stop() ?? null;
          },
        },
      );
      log(`${backend}: pgbench ${result.tps} TPS, average ${result.latencyAverageMs} ms`);
      pgbench = { result, cpu, na: null };
    }
    await stopChild(svc.child);

    // ---- the bare route ----
    const bare = await startChild({
      name: 'bare route server',
      args: [path.join(REPO_ROOT, 'bench', 'api', 'bare-server.ts'), bodyFile],
      cwd: REPO_ROOT,
      env: process.env,
      ready: /bare listening on (http:\/\/\S+)/,
      timeoutMs: 30_000,
    });
    log(`${backend}: bare route, ${opts.connections} connections, ${opts.durationSec} s`);
    const bareRoute = await measureAll(
      { url: `${bare.match}/v2/agent/${project.id}/job/${job.id}`, method: 'GET', headers: {} },
      load,
      { serverPid: bare.child.proc.pid, loadGeneratorPids: [process.pid], benchDb: db.name },
      undefined,
    );
    await stopChild(bare.child);
    log(`${backend}: bare route ${bareRoute.reqPerSec} req/s, p99 ${bareRoute.latencyMs.p99} ms`);

    const tps = pgbench.result?.tps;
    const getVsBare = round(getJob.reqPerSec / bareRoute.reqPerSec);
    return {
      backend,
      getJob,
      postJob,
      bareRoute,
      pgbench,
      ratios: {
        getVsBare,
        postVsBare: round(postJob.reqPerSec / bareRoute.reqPerSec),
        getVsPgbench: tps ? round(getJob.reqPerSec / tps) : null,
        postVsPgbench: tps ? round(postJob.reqPerSec / tps) : null,
      },
      target: {
        getShareOfBare: TARGET_GET_SHARE_OF_BARE,
        getP99Ms: TARGET_GET_P99_MS,
        met:
          getVsBare >= TARGET_GET_SHARE_OF_BARE &&
          getJob.latencyMs.p99 < TARGET_GET_P99_MS &&
          getJob.non2xx === 0 &&
          getJob.errors === 0,
      },
      responseBytes: Buffer.byteLength(got.text),
      serverVersion,
      elapsedSec: round((Date.now() - started) / 1000, 1),
    };
  } finally {
    await stopAllChildren();
    await releaseDb?.();
    await releaseTmp();
  }
}

// ---- output ----

function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function pct(r: number | null): string {
  return r === null ? 'n/a' : `${(r * 100).toFixed(1)} %`;
}

export function toMarkdown(report: ApiBenchReport): string {
  const lines: string[] = [];
  lines.push(
    `| Backend | Measurement | Throughput | Latency avg | p50 | p99 | Non-2xx / errors |`,
    `|---|---|---:|---:|---:|---:|---:|`,
  );
  for (const b of report.backends) {
    const row = (name: string, m: Measurement) =>
      `| ${b.backend} | ${name} | ${fmt(m.reqPerSec)} req/s | ${fmt(m.latencyMs.average, 2)} ms | ${m.latencyMs.p50} ms | ${m.latencyMs.p99} ms | ${m.non2xx} / ${m.errors} |`;
    lines.push(
      row('GET job', b.getJob),
      row('POST job', b.postJob),
      row('bare route', b.bareRoute),
    );
    const p = b.pgbench.result;
    lines.push(
      p
        ? `| ${b.backend} | pgbench -S | ${fmt(p.tps)} TPS | ${fmt(p.latencyAverageMs, 2)} ms | – | – | – |`
        : `| ${b.backend} | pgbench -S | n/a | n/a | – | – | – |`,
    );
  }
  lines.push(
    '',
    `| Backend | GET / bare | GET / pgbench | POST / bare | POST / pgbench | GET target (≥ ${TARGET_GET_SHARE_OF_BARE * 100} % of bare, p99 < ${TARGET_GET_P99_MS} ms) |`,
    `|---|---:|---:|---:|---:|---|`,
  );
  for (const b of report.backends) {
    const target = b.target ? (b.target.met ? 'met' : 'missed') : '–';
    lines.push(
      `| ${b.backend} | ${pct(b.ratios.getVsBare)} | ${pct(b.ratios.getVsPgbench)} | ${pct(b.ratios.postVsBare)} | ${pct(b.ratios.postVsPgbench)} | ${target} |`,
    );
  }
  const withCpu = report.backends.filter((b) => b.getJob.cpu);
  if (withCpu.length > 0) {
    lines.push(
      '',
      'CPU during each measurement, in cores (of ' +
        `${withCpu[0]?.getJob.cpu?.machineCores ?? '?'}), and CPU time per request:`,
      '',
      '| Backend | Measurement | Server | PostgreSQL (bench db) | PostgreSQL (other) | Load generator | IRQ / softirq | Other processes | Server CPU / request | PostgreSQL CPU / request |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    const perRequest = (cores: number, rate: number) =>
      rate > 0 ? `${fmt((cores / rate) * 1_000_000)} µs` : '–';
    for (const b of withCpu) {
      const rows: [string, CpuUse | null, number][] = [
        ['GET job', b.getJob.cpu, b.getJob.reqPerSec],
        ['POST job', b.postJob.cpu, b.postJob.reqPerSec],
        ['bare route', b.bareRoute.cpu, b.bareRoute.reqPerSec],
        ['pgbench -S', b.pgbench.cpu, b.pgbench.result?.tps ?? 0],
      ];
      for (const [name, cpu, rate] of rows) {
        if (!cpu) continue;
        const c = cpu.cores;
        const server = name === 'pgbench -S' ? '–' : fmt(c.server, 2);
        const serverPer = name === 'pgbench -S' ? '–' : perRequest(c.server, rate);
        const pgPer = name === 'bare route' ? '–' : perRequest(c.postgresBenchDb, rate);
        lines.push(
          `| ${b.backend} | ${name} | ${server} | ${fmt(c.postgresBenchDb, 2)} | ${fmt(c.postgresOther, 2)} | ${fmt(c.loadGenerator, 2)} | ${fmt(c.irq, 2)} | ${fmt(c.other, 2)} | ${serverPer} | ${pgPer} |`,
        );
      }
    }
  }
  const activity = report.backends.filter((b) => b.getJob.dbActivity);
  if (activity.length > 0) {
    lines.push(
      '',
      "Database work per request (PostgreSQL statistics of the service's database):",
      '',
    );
    for (const b of activity) {
      for (const [name, m] of [
        ['GET job', b.getJob],
        ['POST job', b.postJob],
      ] as const) {
        const a = m.dbActivity;
        if (!a) continue;
        const scans = Object.entries(a.scansPerRequest)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ');
        const writes = Object.entries(a.writesPerRequest)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ');
        lines.push(
          `- ${b.backend} ${name}: ${a.transactionsPerRequest} transactions; scans: ${scans || 'none'}; rows written: ${writes || 'none'}`,
        );
      }
    }
  }
  for (const b of report.backends) {
    if (b.pgbench.na) lines.push('', `pgbench on ${b.backend}: n/a (${b.pgbench.na}).`);
  }
  for (const s of report.skipped) lines.push('', `${s.backend} skipped: ${s.reason}.`);
  lines.push(
    '',
    `${report.options.connections} connections, ${report.options.durationSec} s per measurement after ${report.options.warmupSec} s of warm-up; ` +
      `${report.machine.cpus} CPUs (${report.machine.cpuModel}), ${report.machine.memoryGiB} GiB, Node ${report.machine.node}; ` +
      `load average ${report.machine.loadAverage.start} at the start, ${report.machine.loadAverage.end} at the end; total ${report.elapsedSec} s.`,
  );
  return `${lines.join('\n')}\n`;
}

// ---- entry point ----

async function postgresReachable(url: string): Promise<string | undefined> {
  try {
    const c = await pgClient(url);
    await c.end().catch(() => {});
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

export async function main(argv: string[] = []): Promise<ApiBenchReport | undefined> {
  const parsed = parseOptions(argv);
  if (parsed === 'help') {
    process.stdout.write(USAGE);
    return undefined;
  }
  const opts = parsed;
  const startedAt = new Date();
  const loadAtStart = os.loadavg()[0] ?? 0;
  if (loadAtStart > 0.5 * os.availableParallelism()) {
    log(
      `warning: 1-minute load average is ${loadAtStart.toFixed(2)} on ${os.availableParallelism()} CPUs; other work on this machine will disturb the numbers (see "Other processes" in the CPU table)`,
    );
  }
  const skipped: ApiBenchReport['skipped'] = [];
  const backends: Backend[] = [];
  for (const b of opts.backends) {
    if (b === 'postgres') {
      const problem = await postgresReachable(opts.pgAdminUrl);
      if (problem) {
        if (opts.postgresRequired) throw new Error(`PostgreSQL at ${opts.pgAdminUrl}: ${problem}`);
        skipped.push({ backend: b, reason: `PostgreSQL at ${opts.pgAdminUrl}: ${problem}` });
        log(`skipping PostgreSQL: ${problem}`);
        continue;
      }
    }
    backends.push(b);
  }
  const pgbenchBin = backends.includes('postgres') ? findPgbench(opts.pgbench) : undefined;
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const profileDir = opts.cpuProf ? path.join(opts.resultsDir, `api-${stamp}-profiles`) : undefined;

  // Bounds the whole run: per backend four measurements plus start-up, pgbench init, stops.
  const perBackendSec = 4 * (opts.warmupSec + opts.durationSec + 30) + 240;
  const budgetMs = (backends.length * perBackendSec + 60) * 1000;
  let watchdog: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    watchdog = setTimeout(
      () => reject(new Error(`the benchmark exceeded its time budget of ${budgetMs / 1000} s`)),
      budgetMs,
    );
  });
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: cleaning up`);
    cleanUpAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', killAllChildrenNow);

  try {
    const reports: BackendReport[] = [];
    const run = async () => {
      for (const b of backends) reports.push(await benchBackend(b, opts, pgbenchBin, profileDir));
    };
    await Promise.race([run(), expired]);
    const finishedAt = new Date();
    await mkdir(opts.resultsDir, { recursive: true });
    const resultsFile = path.join(opts.resultsDir, `api-${stamp}.json`);
    const report: ApiBenchReport = {
      benchmark: 'api',
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      elapsedSec: round((finishedAt.getTime() - startedAt.getTime()) / 1000, 1),
      machine: {
        cpus: os.availableParallelism(),
        cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
        memoryGiB: round(os.totalmem() / 1024 ** 3, 1),
        platform: `${os.type()} ${os.release()} ${os.arch()}`,
        node: process.versions.node,
        loadAverage: { start: round(loadAtStart, 2), end: round(os.loadavg()[0] ?? 0, 2) },
      },
      options: {
        durationSec: opts.durationSec,
        warmupSec: opts.warmupSec,
        connections: opts.connections,
        backends,
        pgbench: pgbenchBin ?? null,
      },
      backends: reports,
      skipped,
      resultsFile: path.relative(REPO_ROOT, resultsFile),
    };
    await writeFile(resultsFile, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`\n${toMarkdown(report)}\nResults: ${report.resultsFile}\n`);
    if (profileDir) process.stdout.write(`CPU profiles: ${path.relative(REPO_ROOT, profileDir)}\n`);
    return report;
  } finally {
    clearTimeout(watchdog);
    await cleanUpAll();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('exit', killAllChildrenNow);
  }
}

/** Runs `main` as a command: exits when it is done, whatever is still pending. */
export function runAsCommand(argv: string[]): void {
  main(argv).then(
    () => process.exit(0),
    (err: unknown) => {
      if (err instanceof UsageError) process.stderr.write(`bench: ${err.message}\n\n${USAGE}`);
      else
        process.stderr.write(
          `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
        );
      process.exit(1);
    },
  );
}

if (import.meta.main) runAsCommand(process.argv.slice(2));
