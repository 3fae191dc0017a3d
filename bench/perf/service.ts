// The real `errand serve` as the perf bench drives it: started as a child process (embedded or on
// a PostgreSQL database), its admin and job API over loopback, a job followed to its end on its
// event stream, and the memory of the process with all its descendants (in the embedded mode,
// the PostgreSQL server it runs).
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { type Child, startChild } from '../api/children.ts';

export const REPO_ROOT = path.resolve(import.meta.dirname, '../..');

export interface ServeOptions {
  name: string;
  dataDir: string;
  /**
   * PostgreSQL mode when given; otherwise embedded: serve runs its own PostgreSQL server on
   * dataDir, as a child process.
   */
  databaseUrl: string | undefined;
  /** Whether this process runs turns (serve's default) or is an API process (--no-worker). */
  worker: boolean;
  /** ERRAND_OPENAI_COMPATIBLE_BASE_URL: the fake model's, or an address where nothing listens. */
  modelBaseUrl: string;
}

export interface Service {
  name: string;
  child: Child;
  url: string;
  adminKey: string;
}

export async function startServe(opts: ServeOptions): Promise<Service> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ERRAND_LOG_LEVEL: 'warn',
    ERRAND_RATE_LIMIT_CREATE: '0',
    // The projects' repositories are local bare repositories; PostgreSQL mode refuses those by
    // default.
    ERRAND_ALLOW_LOCAL_REPOS: 'true',
    ERRAND_HOST: '127.0.0.1',
    ERRAND_OPENAI_COMPATIBLE_BASE_URL: opts.modelBaseUrl,
    // A failed turn shows at once instead of after retries (a bench job never fails normally).
    ERRAND_TURN_RETRIES: '0',
  };
  delete env.DATABASE_URL;
  if (opts.databaseUrl) env.DATABASE_URL = opts.databaseUrl;
  const { child, match } = await startChild({
    name: opts.name,
    args: [
      path.join(REPO_ROOT, 'src', 'main.ts'),
      'serve',
      '--port',
      '0',
      '--data-dir',
      opts.dataDir,
      ...(opts.worker ? [] : ['--no-worker']),
    ],
    cwd: REPO_ROOT,
    env,
    ready: /errand listening on (http:\/\/\S+)/,
    timeoutMs: 120_000,
  });
  const adminKey = (await readFile(path.join(opts.dataDir, 'admin.key'), 'utf8')).trim();
  return { name: opts.name, child, url: match, adminKey };
}

export interface HttpAnswer {
  status: number;
  text: string;
}

export async function request(
  method: 'GET' | 'POST',
  url: string,
  key: string | undefined,
  body?: unknown,
): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}

export async function expectJson<T>(
  what: string,
  expected: number,
  answer: Promise<HttpAnswer>,
): Promise<T> {
  const { status, text } = await answer;
  if (status !== expected) throw new Error(`${what}: expected ${expected}, got ${status}: ${text}`);
  return JSON.parse(text) as T;
}

export interface BenchProject {
  id: string;
  key: string;
  jobsUrl: string;
}

/** A project (with the given repository and model) and a project key for it. */
export async function createProject(
  svc: Service,
  name: string,
  repository: string,
  model: string,
): Promise<BenchProject> {
  const project = await expectJson<{ id: string }>(
    `${svc.name}: create project ${name}`,
    201,
    request('POST', `${svc.url}/v2/admin/projects`, svc.adminKey, { name, repository, model }),
  );
  const { key } = await expectJson<{ key: string }>(
    `${svc.name}: create key for ${name}`,
    201,
    request('POST', `${svc.url}/v2/admin/keys`, svc.adminKey, { projectId: project.id, name }),
  );
  return { id: project.id, key, jobsUrl: `${svc.url}/v2/agent/${project.id}/job` };
}

export async function createJob(
  svc: Service,
  project: BenchProject,
  prompt: string,
): Promise<{ id: string; createdAt: number }> {
  const res = await fetch(project.jobsUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt }),
    signal: AbortSignal.timeout(30_000),
  });
  // The clock starts with the 201's headers, before its body is read.
  const createdAt = performance.now();
  const text = await res.text();
  if (res.status !== 201) throw new Error(`${svc.name}: create job: got ${res.status}: ${text}`);
  return { id: (JSON.parse(text) as { id: string }).id, createdAt };
}

/**
 * Follows the job's event stream until the event that settles it; resolves with the time
 * (performance.now()) its `job.completed` event was parsed. A `job.failed` or `job.archived`,
 * or a stream that ends without either, is an error.
 */
export function untilCompleted(
  project: BenchProject,
  jobId: string,
  timeoutMs = 60_000,
): Promise<number> {
  const url = `${project.jobsUrl}/${jobId}/events`;
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | undefined, at?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      if (err) reject(err);
      else resolve(at ?? performance.now());
    };
    const timer = setTimeout(
      () => finish(new Error(`job ${jobId} did not complete within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const req = http.get(url, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${project.key}` },
    });
    req.on('error', (err) => finish(err));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () =>
          finish(new Error(`events of job ${jobId}: HTTP ${res.statusCode}: ${body}`)),
        );
        return;
      }
      let buffer = '';
      const seen: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk.replaceAll('\r\n', '\n');
        for (;;) {
          const end = buffer.indexOf('\n\n');
          if (end < 0) break;
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const type = /^event: ?(.*)$/m.exec(block)?.[1];
          if (!type) continue;
          seen.push(type);
          if (type === 'job.completed') return finish(undefined, performance.now());
          if (type === 'job.failed' || type === 'job.archived') {
            const data = /^data: ?(.*)$/m.exec(block)?.[1] ?? '';
            return finish(new Error(`job ${jobId} ended with ${type}: ${data.slice(0, 2000)}`));
          }
        }
      });
      res.on('end', () =>
        finish(new Error(`the event stream of job ${jobId} ended after: ${seen.join(', ')}`)),
      );
    });
  });
}

function descendants(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const c of children.trim().split(/\s+/)) {
      if (!c) continue;
      const child = Number(c);
      out.push(child, ...descendants(child));
    }
  }
  return out;
}

/** A `<name>: <n> kB` line of a /proc file of `pid`; 0 when the process ended meanwhile. */
function procKiB(pid: number, file: 'status' | 'smaps_rollup', name: string): number {
  try {
    const text = readFileSync(`/proc/${pid}/${file}`, 'utf8');
    return Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  } catch {
    return 0; // the process ended between the listing and the read
  }
}

export interface TreeMemory {
  /** VmRSS summed: each process counts all its resident pages, shared ones included. */
  rssMiB: number;
  /**
   * Pss summed (/proc/<pid>/smaps_rollup): a page shared by n processes counts 1/n in each, so
   * the sum counts PostgreSQL's shared memory, and the code its processes share, once.
   */
  pssMiB: number;
  processes: number;
}

/** The memory of `pid` and all its descendants, in MiB. */
export function treeMemory(pid: number): TreeMemory {
  const pids = [pid, ...descendants(pid)];
  const sum = (file: 'status' | 'smaps_rollup', name: string) =>
    pids.reduce((total, p) => total + procKiB(p, file, name), 0) / 1024;
  return {
    rssMiB: sum('status', 'VmRSS'),
    pssMiB: sum('smaps_rollup', 'Pss'),
    processes: pids.length,
  };
}
