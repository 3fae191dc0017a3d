// Live event streams at scale: 1,000 Server-Sent Events streams open on one API process
// (`errand serve --no-worker`, a child process), one per job. Measures the memory a stream
// costs the service (its RSS before and after opening them) and the delivery latency of an
// event: from its commit to its arrival on the stream.
//
// The events are written by this process straight into the service's database, as a worker
// writes them, so the path measured is the one of a real deployment: commit, NOTIFY, the API
// process's LISTEN, its read, the socket. On PostgreSQL that database is the bench database; in
// the embedded mode it is the server `serve` runs, reached through its socket. Two patterns:
// "steady" (one event at a time to a random stream, 200 a second) and "burst" (one event for
// every stream in one transaction).
//
// Results go to bench/results/streams.json and lines for the README's Benchmarks table to stdout.
//
//   node bench/streams/run.ts [--streams 1000] [--repetitions 3] [--backend both|postgres|embedded]
//                             [--pg-url URL]
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { embeddedDatabase } from '../api/database.ts';
import { treeMemory } from '../perf/service.ts';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const DEFAULT_PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';

type Backend = 'postgres' | 'embedded';

interface Latencies {
  p50: number;
  p99: number;
  max: number;
  count: number;
}

interface Result {
  backend: Backend;
  streams: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  kibPerStream: number;
  /** PSS of serve and its descendants (the embedded server), before and after. */
  treePssBeforeMiB: number;
  treePssAfterMiB: number;
  steady: Latencies[];
  burst: Latencies[];
}

function percentiles(values: number[]): Latencies {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? 0, count: sorted.length };
}

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const line = status.split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line?.replace(/\D+/g, '') ?? 0);
}

interface Service {
  child: ChildProcess;
  url: string;
  adminKey: string;
  stop(): Promise<void>;
}

async function startServe(env: Record<string, string>, dataDir: string): Promise<Service> {
  const child = spawn(process.execPath, [MAIN, 'serve', '--no-worker', '--port', '0'], {
    env: { ...process.env, ...env, ERRAND_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /errand listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited (${code}): ${output}`)));
  });
  const adminKey = (await readFile(path.join(dataDir, 'admin.key'), 'utf8')).trim();
  return {
    child,
    url,
    adminKey,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function api(
  svc: Service,
  method: string,
  route: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${svc.url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${svc.adminKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** One open stream: calls `onEvent` with each event's type and data as they arrive. */
function openStream(
  agent: http.Agent,
  url: string,
  key: string,
  onEvent: (type: string, data: string) => void,
): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, {
      agent,
      headers: { accept: 'text/event-stream', authorization: `Bearer ${key}` },
    });
    request.on('error', reject);
    request.on('response', (response) => {
      if (response.statusCode !== 200) {
        reject(new Error(`stream answered ${response.statusCode}`));
        return;
      }
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (chunk: string) => {
        buffer += chunk;
        for (;;) {
          const end = buffer.indexOf('\n\n');
          if (end < 0) break;
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const type = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (type && data) onEvent(type, data);
        }
      });
      response.on('error', () => {});
      resolve(request);
    });
  });
}

async function measure(
  backend: Backend,
  env: Record<string, string>,
  count: number,
  repetitions: number,
  dbUrl: string | undefined,
): Promise<Result> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'errand-bench-streams-'));
  const svc = await startServe(env, dataDir);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const requests: http.ClientRequest[] = [];
  let writer: pg.Client | undefined;
  try {
    // The service's database: the bench database, or the embedded server serve runs.
    writer = new pg.Client(
      dbUrl ? { connectionString: dbUrl } : (await embeddedDatabase(dataDir)).client,
    );
    const db = writer;
    const repository = path.join(dataDir, 'repo');
    await mkdir(repository);
    const project = await api(svc, 'POST', '/v2/admin/projects', {
      name: 'bench',
      repository,
      model: 'openai-compatible:bench-model',
    });
    const projectId = String(project.id);
    const jobs: string[] = [];
    for (let i = 0; i < count; i++) {
      const job = await api(svc, 'POST', `/v2/agent/${projectId}/job`, { prompt: `job ${i}` });
      jobs.push(String(job.id));
    }
    // Arrival times by a marker each test event carries.
    const waiting = new Map<string, (at: number) => void>();
    const arrived = (marker: string) => {
      const at = performance.timeOrigin + performance.now();
      waiting.get(marker)?.(at);
      waiting.delete(marker);
    };
    const openAll = async () => {
      for (const jobId of jobs) {
        requests.push(
          await openStream(
            agent,
            `${svc.url}/v2/agent/${projectId}/job/${jobId}/events`,
            svc.adminKey,
            (type, data) => {
              if (type === 'bench.tick') arrived(JSON.parse(data).data.marker);
            },
          ),
        );
      }
    };
    // A first round of streams, opened and closed, so that the measured round finds the
    // process warmed up (its heap grown, its code compiled) as a long-running server is.
    await openAll();
    await sleep(1_000);
    for (const request of requests.splice(0)) request.destroy();
    await sleep(5_000);
    const rssBefore = await rssKiB(svc.child.pid ?? 0);
    const treeBefore = treeMemory(svc.child.pid ?? 0);
    await openAll();
    await sleep(5_000);
    const rssAfter = await rssKiB(svc.child.pid ?? 0);
    const treeAfter = treeMemory(svc.child.pid ?? 0);
    const expect = (marker: string) =>
      new Promise<number>((resolve) => waiting.set(marker, resolve));
    const now = () => performance.timeOrigin + performance.now();

    const steady: Latencies[] = [];
    const burst: Latencies[] = [];
    await db.connect();
    const insert = (jobId: string, marker: string) =>
      db.query(
        `INSERT INTO events (job_id, turn, type, data) VALUES ($1, 1, 'bench.tick', jsonb_build_object('marker', $2::text))`,
        [jobId, marker],
      );
    for (let r = 0; r < repetitions; r++) {
      // Steady: 1,000 events, one every 5 ms, each to a random stream.
      const samples: Promise<number>[] = [];
      for (let i = 0; i < 1_000; i++) {
        const jobId = jobs[Math.floor(Math.random() * jobs.length)] as string;
        const marker = `s${r}:${i}`;
        const arrival = expect(marker);
        const sent = now();
        await insert(jobId, marker);
        const committed = now();
        // The commit is the moment the event exists; half the round trip before it.
        const origin = sent + (committed - sent) / 2;
        samples.push(arrival.then((at) => at - origin));
        await sleep(5);
      }
      steady.push(percentiles(await Promise.all(samples)));
      // Burst: one event for each stream, committed together.
      const arrivals = jobs.map((_, i) => expect(`b${r}:${i}`));
      const values = jobs.map(
        (jobId, i) => `('${jobId}', 1, 'bench.tick', '{"marker":"b${r}:${i}"}')`,
      );
      const sent = now();
      await db.query(`INSERT INTO events (job_id, turn, type, data) VALUES ${values.join(', ')}`);
      const committed = now();
      const origin = sent + (committed - sent) / 2;
      burst.push(percentiles((await Promise.all(arrivals)).map((at) => at - origin)));
      await sleep(1_000);
    }
    return {
      backend,
      streams: count,
      rssBeforeMiB: rssBefore / 1024,
      rssAfterMiB: rssAfter / 1024,
      kibPerStream: (rssAfter - rssBefore) / count,
      treePssBeforeMiB: treeBefore.pssMiB,
      treePssAfterMiB: treeAfter.pssMiB,
      steady,
      burst,
    };
  } finally {
    for (const request of requests) request.destroy();
    agent.destroy();
    await writer?.end().catch(() => {});
    await svc.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const ms = (value: number) => `${value.toFixed(1)} ms`;

function spread(runs: Latencies[], key: 'p50' | 'p99'): string {
  const values = runs.map((r) => r[key]).sort((a, b) => a - b);
  const median = values[Math.floor(values.length / 2)] ?? 0;
  return `${ms(median)} (${ms(values[0] ?? 0)}–${ms(values.at(-1) ?? 0)})`;
}

function markdown(results: Result[]): string {
  const lines = [
    '| Backend | Pattern | p50 | p99 | `serve` RSS, 0 → N streams | Per stream | `serve` and its PostgreSQL, PSS |',
    '|---|---|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const rss = `${r.rssBeforeMiB.toFixed(0)} → ${r.rssAfterMiB.toFixed(0)} MiB`;
    const per = `${r.kibPerStream.toFixed(1)} KiB`;
    const pss = `${r.treePssBeforeMiB.toFixed(0)} → ${r.treePssAfterMiB.toFixed(0)} MiB`;
    const backend = r.backend === 'postgres' ? 'PostgreSQL' : 'embedded';
    lines.push(
      `| ${backend} | steady, 200 events/s | ${spread(r.steady, 'p50')} | ${spread(r.steady, 'p99')} | ${rss} | ${per} | ${pss} |`,
      `| ${backend} | burst, one event to each of ${r.streams} streams | ${spread(r.burst, 'p50')} | ${spread(r.burst, 'p99')} | | | |`,
    );
  }
  return lines.join('\n');
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      streams: { type: 'string', default: '1000' },
      repetitions: { type: 'string', default: '3' },
      backend: { type: 'string', default: 'both' },
      'pg-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'node bench/streams/run.ts [--streams 1000] [--repetitions 3] [--backend both|postgres|embedded] [--pg-url URL]\n',
    );
    return;
  }
  const count = Number(values.streams);
  const repetitions = Number(values.repetitions);
  if (!Number.isInteger(count) || count < 1)
    throw new Error('--streams must be a whole number ≥ 1');
  if (!Number.isInteger(repetitions) || repetitions < 1)
    throw new Error('--repetitions must be a whole number ≥ 1');
  if (!['both', 'postgres', 'embedded'].includes(values.backend))
    throw new Error('--backend must be both, postgres or embedded');
  const backends: Backend[] =
    values.backend === 'both' ? ['postgres', 'embedded'] : [values.backend as Backend];
  const common = {
    ERRAND_LOG_LEVEL: 'warn',
    ERRAND_ALLOW_LOCAL_REPOS: 'true',
    ERRAND_RATE_LIMIT_CREATE: '0',
    ERRAND_STREAMS_PER_KEY: String(count + 10),
    ERRAND_OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
  };
  const results: Result[] = [];
  for (const backend of backends) {
    if (backend === 'embedded') {
      results.push(await measure(backend, common, count, repetitions, undefined));
      continue;
    }
    const adminUrl = values['pg-url'] ?? process.env.DATABASE_URL ?? DEFAULT_PG_ADMIN_URL;
    const dbName = `errand_bench_streams_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    const dbUrl = new URL(adminUrl);
    dbUrl.pathname = `/${dbName}`;
    try {
      results.push(
        await measure(
          backend,
          { ...common, DATABASE_URL: dbUrl.toString() },
          count,
          repetitions,
          dbUrl.toString(),
        ),
      );
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  }
  const dir = path.join(REPO_ROOT, 'bench/results');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'streams.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`\n${markdown(results)}\n`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(
        `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}
