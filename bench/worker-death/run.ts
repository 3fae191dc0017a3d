// How long a turn orphaned by a dead worker waits before another worker takes it up. Real
// `errand worker` processes on PostgreSQL; the one holding a turn is killed with SIGKILL while
// the turn waits on the model (a loopback fake that never answers that call), and the clock
// runs from the kill to the turn's next `turn.started` event (another worker claimed it) and
// to the model call of that attempt (the work resumed). Results go to
// bench/results/worker-death.json and a line for the README's Benchmarks table to stdout.
//
//   node bench/worker-death/run.ts [--repetitions 7] [--pg-url URL]
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { startService } from '../../src/service.ts';
import { dynamic, reply, startFakeLlm } from '../../test/support/fake-llm.ts';
import { makeOrigin } from '../../test/support/git.ts';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const DEFAULT_PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';
const MODEL_KEY = 'sk-bench-worker-death-0000';
const PUBLIC_URL = 'https://errand.bench.invalid';

interface Sample {
  /** SIGKILL → the turn's next `turn.started` event (a live worker claimed it). */
  claimMs: number;
  /** SIGKILL → the retried attempt's model call (workspace prepared, agent running again). */
  modelMs: number;
}

interface Summary {
  min: number;
  median: number;
  max: number;
}

function summarize(values: number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[mid] ?? 0)
      : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  return { min: sorted[0] ?? 0, median, max: sorted.at(-1) ?? 0 };
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 90_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      repetitions: { type: 'string', default: '7' },
      'pg-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('node bench/worker-death/run.ts [--repetitions 7] [--pg-url URL]\n');
    return;
  }
  const repetitions = Number(values.repetitions);
  if (!Number.isInteger(repetitions) || repetitions < 1)
    throw new Error('--repetitions must be a whole number ≥ 1');
  const adminUrl = values['pg-url'] ?? process.env.DATABASE_URL ?? DEFAULT_PG_ADMIN_URL;

  const dbName = `errand_bench_death_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'errand-bench-death-'));
  const llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-bench'] });
  const env: Record<string, string> = {
    DATABASE_URL: dbUrl.toString(),
    ERRAND_ALLOW_LOCAL_REPOS: 'true',
    ERRAND_PORT: '0',
    ERRAND_LOG_LEVEL: 'silent',
    ERRAND_RATE_LIMIT_CREATE: '0',
    OPENAI_API_KEY: MODEL_KEY,
    OPENAI_BASE_URL: `${llm.url}/v1`,
    ERRAND_MODEL: 'openai:gpt-bench',
    ERRAND_PUBLIC_URL: PUBLIC_URL,
  };
  const workers = new Set<ChildProcess>();
  let api: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const origin = await makeOrigin(tmp);
    let adminKey = '';
    // The API in this process: it supervises the queue as every Errand process does.
    api = await startService(loadConfig({ ...env, ERRAND_DATA_DIR: path.join(tmp, 'api') }), {
      api: true,
      worker: false,
      onAdminKey: (key) => {
        adminKey = key;
      },
    });
    const base = api.url ?? '';
    const call = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${base}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${adminKey}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      const json = (await res.json()) as Record<string, unknown>;
      if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    const project = await call('POST', '/v2/admin/projects', {
      name: 'bench',
      repository: origin.url,
    });

    let machines = 0;
    const spawnWorker = async (): Promise<ChildProcess> => {
      const child = spawn(process.execPath, [MAIN, 'worker', '--concurrency', '2'], {
        env: {
          ...process.env,
          ...env,
          ERRAND_DATA_DIR: path.join(tmp, `worker-${++machines}`),
          ERRAND_LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      workers.add(child);
      child.once('exit', () => workers.delete(child));
      let err = '';
      await new Promise<void>((resolve, reject) => {
        child.stderr?.on('data', (chunk: Buffer) => {
          err += chunk.toString();
          if (err.includes('"errand started"')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`worker exited with ${code}: ${err}`)));
      });
      return child;
    };

    const samples: Sample[] = [];
    let holder = await spawnWorker();
    for (let i = 0; i < repetitions; i++) {
      const before = llm.requests.length;
      // The first call hangs until its worker is gone; the retried attempt's call finishes.
      llm.script(
        dynamic(async (request) => {
          await until('the dying worker to hang up', async () =>
            request.aborted ? true : undefined,
          );
          return { type: 'error', status: 500 };
        }),
        reply('Nothing to change.'),
      );
      const job = await call('POST', `/v2/agent/${project.id}/job`, { prompt: 'Look around.' });
      const jobId = String(job.id);
      // Only `holder` runs at this point, so the turn waiting on the model is its turn.
      await until('the first model call', async () =>
        llm.requests.length > before ? true : undefined,
      );
      const next = await spawnWorker();
      const killedAt = Date.now();
      holder.kill('SIGKILL');
      const modelAt = await until('the retried model call', async () =>
        llm.requests.length > before + 1 ? Date.now() : undefined,
      );
      const restarted = await until('the second turn.started event', async () => {
        const rows = await api?.ctx.db
          .selectFrom('events')
          .select('at')
          .where('job_id', '=', jobId)
          .where('type', '=', 'turn.started')
          .orderBy('seq')
          .execute();
        return rows && rows.length >= 2 ? new Date(rows[1]?.at ?? 0).getTime() : undefined;
      });
      await until('the job to complete', async () => {
        const got = await call('GET', `/v2/agent/${project.id}/job/${jobId}`);
        if (got.status === 'failed') throw new Error(`job failed: ${String(got.error)}`);
        return got.status === 'completed' ? true : undefined;
      });
      const sample = { claimMs: restarted - killedAt, modelMs: modelAt - killedAt };
      samples.push(sample);
      process.stderr.write(
        `run ${i + 1}/${repetitions}: claimed again after ${seconds(sample.claimMs)} s, model called after ${seconds(sample.modelMs)} s\n`,
      );
      holder = next;
    }

    const claim = summarize(samples.map((s) => s.claimMs));
    const model = summarize(samples.map((s) => s.modelMs));
    const results = path.join(REPO_ROOT, 'bench', 'results');
    await mkdir(results, { recursive: true });
    await writeFile(
      path.join(results, 'worker-death.json'),
      `${JSON.stringify({ at: new Date().toISOString(), repetitions, samples, claim, model }, null, 2)}\n`,
    );
    const cell = (s: Summary) =>
      `${seconds(s.min)} s / ${seconds(s.median)} s / ${seconds(s.max)} s`;
    process.stdout.write(
      `| worker killed mid-turn (SIGKILL), PostgreSQL, ${repetitions} runs | ${cell(claim)} | ${cell(model)} |\n`,
    );
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    await api?.stop();
    await llm.close();
    await rm(tmp, { recursive: true, force: true });
    const cleanup = new pg.Client({ connectionString: adminUrl });
    await cleanup.connect();
    await cleanup.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await cleanup.end();
  }
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
